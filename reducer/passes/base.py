"""The pass contract: what a pass is, and the part of the search it may use.

A pass is a function ``pass_fn(gate)``: it reads ``gate.best``, builds candidate sources and offers
them to the gate, which alone decides (size order, seen-set, parse check, oracle run). Passes never
run anything themselves. "The gate" is this protocol and only it (reducer/search/driver.py's ``Reducer``
is the one the search hands over); the decision behind it is reducer/search/judge.py's ``Judge``. The
loops most passes are built on are in reducer/passes/loops.py, the rewrites several families
build their candidates from in reducer/passes/rewrites.py; the libcst toolkit they use is
reducer/analysis/cst.py.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

Offer = tuple[Any, str]     # (tag handed back when accepted, candidate source)


class Gate(Protocol):
    """The part of the search driver a pass may use."""

    best: str
    trace: Any          # reducer.analysis.trace.TraceData | None
    failure_message: str  # the target's message as the original printed it ("" if unknown)

    def consider(self, source: str) -> bool: ...

    def first(self, candidates: Iterable[Offer]) -> Any | None:
        """Offer candidates in order; return the tag of the first one accepted, or None."""
        ...

    def prefetch(self, sources: list[str | None]) -> None:
        """Run these now, side by side, so that later ``consider`` calls read their verdicts."""
        ...

    def ahead(self, sources: list[str | None]) -> None:
        """Start these on idle slots without waiting: candidates the pass may offer next. Their
        verdicts are read only when (and if) they are offered, in order."""
        ...

    def failure_lines(self, source: str) -> tuple[int, ...] | None:
        """The script's own traceback lines in the run that accepted ``source``, if known."""
        ...

    def whole_programs(self) -> AbstractContextManager[None]:
        """While inside, a candidate with fewer statements is smaller even with more tokens: for
        the prelude's whole programs written from the original's failing call (values written
        out can be long). Any other pass keeps the size order (reducer/analysis/size.py)."""
        ...


@dataclass(frozen=True)
class Pass:
    name: str
    fn: Callable[[Gate], None]
