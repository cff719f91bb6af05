"""Errors that reach the user as one line and a distinct exit status (never a traceback of ours)."""
from __future__ import annotations


class ExitCode:
    """Every command's exit statuses: one table (``MEANINGS``), printed by ``reprobot --help``
    and repeated in the README (tests/test_exit_codes.py checks both and that every
    ``ReprobotError`` names one of these)."""
    OK = 0
    DIFFERENT = 1          # env --check: the environments differ (as diff(1) says it)
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
    NOTHING_TO_FILE = 17   # the failure routes to no repository (the user's own code or environment)
    BUSY = 18              # another `file --submit` holds the folder's filing lock
    RUN_LIMIT = 19         # the original hit a run limit (--max-processes, --max-disk, --max-file-size)
    INTERRUPTED = 130
    TERMINATED = 143       # SIGTERM: as INTERRUPTED, the best result so far is saved


# What each status means, in the words of `reprobot --help` and the README's table.
MEANINGS: dict[int, str] = {
    ExitCode.OK: "ok",
    ExitCode.DIFFERENT: "differences found (env --check)",
    ExitCode.USAGE: "usage",
    ExitCode.FILE_MISSING: "file missing",
    ExitCode.NOT_PYTHON: "not Python / does not parse",
    ExitCode.NO_FAILURE: "no failure",
    ExitCode.TIMEOUT: "timeout",
    ExitCode.FLAKY: "flaky",
    ExitCode.NO_INTERPRETER: "interpreter missing",
    ExitCode.BAD_INPUT: "bad input",
    ExitCode.NO_TOKEN: "missing token",
    ExitCode.NETWORK: "network/rate limit",
    ExitCode.UNSAFE: "unsafe (a secret survived scrubbing, or a hazard without --anyway)",
    ExitCode.TIME_LIMIT: "stopped at --max-time (best result kept)",
    ExitCode.OUT_OF_MEMORY: "out of memory",
    ExitCode.TOO_LARGE: "script too large",
    ExitCode.NOTHING_TO_FILE: "nothing to file upstream",
    ExitCode.BUSY: "another filing holds the folder",
    ExitCode.RUN_LIMIT: "the original hit a run limit",
    ExitCode.INTERRUPTED: "interrupted",
    ExitCode.TERMINATED: "terminated (SIGTERM; best result kept)",
}


def exit_table() -> str:
    """The table as one paragraph: ``0 ok, 1 differences found (env --check), 2 usage, ...``."""
    return ", ".join(f"{code} {meaning}" for code, meaning in sorted(MEANINGS.items()))


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
