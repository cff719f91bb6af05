"""The reducer: run a candidate, read how it failed, and shrink it while it fails the same way.

One folder per stage, lowest first (a module imports its own folder and the ones below it:
ENGINE_LAYERS in tests/test_import_graph.py): run/ starts and watches the user's processes;
failure/ reads what a run produced and says whether it is the same failure; analysis/ reads the
script's code; passes/ propose smaller scripts; search/ decides which one becomes the best;
reduction/ holds the steps around the search (and cluster/ the search's runs on a Ray cluster).
At the top stays the package's public face: errors.py (the exit codes and the one error, used by
both packages and every folder, so below them all), stack.py (the interface the targets answer,
registered by the bot; failure/ and reduction/ ask it, so it is below them too) and engine.py
(the one entry to a whole reduction, above every folder)."""
