"""What a failure is, and whether a run has it: what one run produced (outcome.py) and every
traceback read from its output (tracebacks.py), their library frames and messages normalised
(normalize.py), the failure's identity and the match (signature.py), which process's failure a
multi-process run is about (ranks.py), how often it shows (flaky.py), the question every
candidate is asked, does it fail the same way (oracle.py), the original's failure established
once (original.py: find_failure, the Failure the rest reduces), and the inputs that are not a
plain script written as one before that (notebook.py, pytest_node.py). It sits above run/ (the
oracle and find_failure ask it for runs, signature.py reads which tracebacks were raised) and
below everything that reduces; run/ reads only its data types back (RUN_MAY_IMPORT in
tests/test_import_graph.py)."""
