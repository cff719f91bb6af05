"""Candidate runs on a cluster (issue #34). Nothing here imports Ray at module level: the engine
(ray_runner.py) is imported only when ``reprobot reduce --cluster`` is given, and Ray is the
optional extra ``reprobot[ray]``."""
