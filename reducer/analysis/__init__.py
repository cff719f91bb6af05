"""What the script's code is, read without judging a failure: the libcst toolkit (cst.py) and
the final layout (format.py), the one name analysis (names.py), the size every candidate is
ordered by (size.py: it reads only code, and the passes measure with it too, so it sits below
them and the search), what ran and the values calls saw in one traced run (trace.py), the
failing call's values (boundary.py) and the value recipes its launcher writes them with
(recipes.py), what may be written into a repro as a literal (provenance.py), and what the script
reads from the user's disk (artefacts.py). The passes, the search and the steps around it build
on it; of the folders below it, it asks run/ only to start a traced run."""
