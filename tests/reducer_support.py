"""Helpers for the reducer engine's tests: a real-subprocess oracle built on the project's own
traceback parser and Signature, so tests exercise the same notion of "fails the same way"."""
from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from reducer.failure.signature import MatchOptions, Signature, find_match, signature_of
from reducer.failure.tracebacks import parse_tracebacks


def run_source(source: str, *, python: str = sys.executable, launcher: list[str] | None = None,
               env: dict[str, str] | None = None, timeout: float = 30.0) -> subprocess.CompletedProcess:
    import os
    with tempfile.TemporaryDirectory(prefix="reprobot-test-") as d:
        (Path(d) / "script.py").write_text(source, encoding="utf-8")
        try:
            return subprocess.run([python, *(launcher or []), "script.py"], cwd=d, capture_output=True,
                                  text=True, timeout=timeout, env={**os.environ, **(env or {})})
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess([python], -9, "", "")


class SubprocessOracle:
    """Interesting iff a real run of the candidate shows a traceback with the target Signature."""

    def __init__(self, target: Signature, options: MatchOptions = MatchOptions(), timeout: float = 30.0) -> None:
        self.target, self.options, self.timeout = target, options, timeout
        self.runs = 0
        self._lock = threading.Lock()

    @classmethod
    def for_source(cls, source: str, **kw) -> SubprocessOracle:
        proc = run_source(source)
        records = parse_tracebacks(proc.stderr)
        assert records, f"the original does not fail:\n{proc.stderr[-2000:]}"
        options = kw.pop("options", MatchOptions())
        return cls(signature_of(records[-1], options), options, **kw)

    def __call__(self, source: str) -> bool:
        with self._lock:
            self.runs += 1
        proc = run_source(source, timeout=self.timeout)
        return find_match(parse_tracebacks(proc.stderr), self.target, self.options) is not None


class _TooLong(Exception):
    pass


def raises(exc_type: type[BaseException], contains: str = "", max_lines: int = 20000):
    """A pure-Python oracle: exec the candidate in a fresh namespace; interesting iff it raises
    ``exc_type`` with ``contains`` in its message. A line budget stops candidates that loop."""
    def predicate(source: str) -> bool:
        budget = [max_lines]

        def tracer(frame, event, arg):
            if event == "line":
                budget[0] -= 1
                if budget[0] < 0:
                    raise _TooLong
            return tracer

        old = sys.gettrace()
        sys.settrace(tracer)
        try:
            exec(compile(source, "<candidate>", "exec"), {"__name__": "__main__"})
        except _TooLong:
            return False
        except exc_type as e:
            return contains in str(e)
        except BaseException:
            return False
        finally:
            sys.settrace(old)
        return False
    return predicate


class RecordingOracle:
    """An oracle that keeps every source it was asked about (``.runs``), then asks ``predicate``."""

    def __init__(self, predicate) -> None:
        self.predicate, self.runs = predicate, []

    def __call__(self, source: str) -> bool:
        self.runs.append(source)
        return self.predicate(source)


def reduce_with(source: str, oracle, *pass_names: str, **kw) -> str:
    """Reduce with only the named passes (no trace, no final formatting) and return the result."""
    from reducer.passes import BY_NAME
    from reducer.search.driver import Reducer
    kw.setdefault("format_result", False)
    return Reducer(source, oracle, passes=[BY_NAME[n] for n in pass_names], **kw).run().best_source
