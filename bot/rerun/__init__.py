"""Answers by running: the repro against other releases (`versions`) and one change at a time (`contrast`)."""
