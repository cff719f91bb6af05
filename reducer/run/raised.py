"""Which tracebacks in a run's output were raised, and which were only printed.

Every interpreter a run starts loads ``exception_hook/sitecustomize.py`` (through PYTHONPATH),
which appends the headline of each exception it reports to a file in the run's scratch folder.
A traceback parsed from the output whose headline is in that file was raised; one that is not
was text a program printed (a log line quoting an old traceback, a forged one). When no
interpreter loaded the recorder (``python -S``, ``-I``, a non-Python child), nothing is known
and nothing is marked.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Callable

from reducer.failure.outcome import TracebackRecord

EXCEPTIONS_ENV = "REPROBOT_EXCEPTIONS"
HOOK_DIR = Path(__file__).resolve().parent / "exception_hook"
RAISED, PRINTED = "raised", "printed"
_MAX_BYTES = 1 << 20


def read_raised(path: Path, clean: Callable[[str], str] = lambda s: s) -> frozenset[str] | None:
    """The headlines the recorder wrote, or None when no interpreter of the run loaded it."""
    try:
        with path.open("rb") as fh:
            data = fh.read(_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    headlines = set()
    for line in clean(data).splitlines():
        try:
            headline = json.loads(line).get("headline")
        except (ValueError, AttributeError):
            continue  # a line cut at the size bound, or not ours
        if isinstance(headline, str):
            headlines.add(_key(headline))
    return frozenset(headlines)


def _key(headline: str) -> str:
    return " ".join(headline.split())


def mark(records: list[TracebackRecord], raised: frozenset[str] | None) -> list[TracebackRecord]:
    """``records`` with ``origin`` set on Python exceptions (crash dumps are left as they are)."""
    if raised is None:
        return records
    return [_marked(r, raised) for r in records]


def _marked(record: TracebackRecord, raised: frozenset[str]) -> TracebackRecord:
    chain = tuple(_marked(c, raised) for c in record.chain)
    if record.kind != "exception":
        return dataclasses.replace(record, chain=chain)
    origin = RAISED if _key(record.headline) in raised else PRINTED
    return dataclasses.replace(record, chain=chain, origin=origin)


def hook_environment(env: dict[str, str], exceptions: Path) -> None:
    """Put the recorder in front of the run's PYTHONPATH and tell it where to write."""
    paths = [str(HOOK_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(HOOK_DIR)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[EXCEPTIONS_ENV] = str(exceptions)
