"""The reducer: run a candidate, read how it failed, and shrink it while it fails the same way."""
