"""A whole reduction's steps around the search, in the order reducer/engine.py runs them: the
warm start (warm_start.py), the original's traced runs and the retraces of a changed best
(retrace.py), then the final word (cold_verdict.py: the cold verdict, the walk back, the repro
rate) with the self-contained rewrites it runs (standalone.py) and the probe those run in the
user's interpreter, found by path next to standalone.py (artefact_probe.py, standard library
only). Each step makes real runs of the original or the result through failure/'s oracle, and
standalone.py reuses a pass's cleanup, so this folder sits above failure/, analysis/, passes/ and
search/, just under the entry."""
