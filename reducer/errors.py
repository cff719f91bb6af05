"""Errors that reach the user as one line and a distinct exit status (never a traceback of ours)."""
from __future__ import annotations


class ExitCode:
    USAGE = 2
    FILE_MISSING = 3
    NOT_PYTHON = 4
    NO_FAILURE = 5
    TIMEOUT = 6
    FLAKY = 7
    NO_INTERPRETER = 8
    BAD_INPUT = 9          # malformed payload, import file, repro folder
    NO_TOKEN = 10
    NETWORK = 11           # GitHub unreachable, rate limit exhausted
    UNSAFE = 12            # a secret survived scrubbing; filing refused
    TIME_LIMIT = 14        # --max-time reached: the best result so far is saved; --resume continues
    OUT_OF_MEMORY = 15     # the original ran out of memory: the machine's problem, not a bug to report
    TOO_LARGE = 16         # the script is over --max-script-size / --max-statements: refused before any analysis
    INTERRUPTED = 130
    TERMINATED = 143       # SIGTERM: as INTERRUPTED, the best result so far is saved


class ReprobotError(Exception):
    """A problem with the user's input or environment, reported as one line."""

    exit_code: int = 1

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class DeadlineReached(Exception):
    """The command's --max-time is spent; raised where a run or a pass notices it."""
