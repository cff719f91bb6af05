"""The judge: the one place a candidate becomes the new best.

A candidate is run only if it is strictly smaller than the best under (tokens, characters, text),
has not been seen (the seen-set, keyed on normalised source, is the cache), compiles, reads no
name the best binds and it no longer does, and spells no secret of the environment the best does
not. Whatever only a run can tell, the judge asks of the ``Runs`` it is handed with the candidate
(reducer/search/scheduler.py); a candidate that reproduces and that libcst can read is accepted. The
judge calls nothing back: whoever handed it the candidate hears of the new best from ``decide``.

A pass never meets the judge: it offers candidates to the gate (reducer/passes/base.py's
``Gate``, which reducer/search/driver.py's ``Reducer`` is), and the best, the trace, the target's message
and ``failure_lines`` it reads there come from here, the order of runs from the scheduler.
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import libcst as cst

from reducer.analysis.cst import compiles, libcst_parses, parses
from reducer.analysis.names import unbound_reads
from reducer.analysis.provenance import leaked, secret_values
from reducer.analysis.size import Size, count_statements, normalize, size_of
from reducer.errors import ExitCode, ReprobotError
from reducer.search.stats import Tally


@dataclass(frozen=True)
class Checked:
    source: str
    size: Size
    key: str                # "" when refused before the key was needed
    why: str | None         # not_smaller | seen | invalid | unbound | secret; None: only a run can tell


def candidate_key(source: str) -> str:
    """The seen-set's key: candidates that differ only in layout or comments share a verdict."""
    return hashlib.sha1(normalize(source).encode("utf-8", "surrogatepass")).hexdigest()


@functools.lru_cache(maxsize=256)
def _unbound(source: str) -> frozenset[str] | None:
    """``unbound_reads`` of a source; the best's is asked for with every candidate. (Not through
    the passes' parse cache: candidates would push the best out of it.)"""
    return unbound_reads(source)


class Runs(Protocol):
    """What the judge needs of the scheduler."""

    def verdict(self, source: str, key: str) -> bool:
        """Run the candidate (or wait for its run made ahead); its verdict is in the seen-set."""
        ...

    def read_ahead(self, key: str) -> bool:
        """True, once, when the seen-set's verdict for ``key`` came from a run made ahead that
        nobody has read yet (it was counted as tried, so it is no cache hit)."""
        ...


class Judge:
    """Refusals that need no run, the seen-set, the best, and acceptance."""

    def __init__(self, source: str, *, tally: Tally, seen: dict[str, bool] | None = None, name_check: bool = True, trace: Any = None,
                 failure_message: str = "",
                 failure_lines: Callable[[str], tuple[int, ...] | None] | None = None) -> None:
        try:
            cst.parse_module(source)
        except cst.ParserSyntaxError as e:
            raise ReprobotError(f"cannot parse the script for reduction: line {e.raw_line}: {e.message}",
                                ExitCode.NOT_PYTHON) from None
        # A script written for a newer Python than reprobot's own still parses with libcst;
        # then compile() cannot judge candidates and only libcst's parse does.
        self.compile_check = parses(source, compile_check=True)
        self.best = source
        self.best_size = size_of(source)
        self.seen: dict[str, bool] = dict(seen or {})
        self.tally = tally
        self.name_check = name_check
        self.trace = trace
        # The target's message as the original printed it: values it shows stay (literals pass).
        self.failure_message = failure_message
        self._failure_lines = failure_lines
        self._secrets = secret_values()
        # A whole program written from the original's failing call (the boundary call): its values
        # can be long (a dataset's items written out) while it has a fraction of the statements.
        # While this is set, fewer statements (and no more processes) is smaller too; the size
        # passes then shrink those values. Set only by ``whole_programs`` for the prelude's one
        # offer on the original, so the order every other step moves down is unchanged.
        self.statements_first = False

    def check(self, source: str) -> Checked:
        """What the judge knows before any run: the refusals that need none (not smaller than the
        best, does not parse, would unbind a name), or that the seen-set answers. (The scheduler
        asks the loop's clock first: a pass computing candidates on a huge script stops at the
        deadline too.)"""
        size = size_of(source)
        if not size < self.best_size and not (self.statements_first and self._fewer_statements(source, size)):
            return Checked(source, size, "", "not_smaller")
        key = candidate_key(source)
        if key in self.seen:
            return Checked(source, size, key, "seen")
        # cheapest first: compile and the name check are C-fast, libcst's parse is not
        if self.compile_check and not compiles(source):
            return Checked(source, size, key, "invalid")
        if self._unbinds(source):
            return Checked(source, size, key, "unbound")
        if self._spells_secret(source):
            return Checked(source, size, key, "secret")
        # What compiles is run; libcst's parse (which the passes need) is checked when a candidate
        # is accepted (decide): most candidates are not, and the parse was the judge's largest
        # cost per candidate. A script for a newer Python than reprobot's has only this check.
        if not self.compile_check and not libcst_parses(source):
            return Checked(source, size, key, "invalid")
        return Checked(source, size, key, None)

    @contextmanager
    def whole_programs(self) -> Iterator[None]:
        """``statements_first`` while inside (the prelude's boundary call)."""
        self.statements_first = True
        try:
            yield
        finally:
            self.statements_first = False

    def _fewer_statements(self, source: str, size: Size) -> bool:
        return size.processes <= self.best_size.processes and count_statements(source) < count_statements(self.best)

    def decide(self, c: Checked, runs: Runs) -> bool:
        """Count the proposal, read or get its verdict from ``runs``, and accept it when it
        reproduces (True: ``c.source`` is the new best)."""
        ps = self.tally.here()
        ps.proposed += 1
        self.tally.stats.proposed += 1
        if c.why == "seen":
            if not runs.read_ahead(c.key):   # a run made ahead is already counted in tried
                ps.cache_hits += 1
                self.tally.stats.cache_hits += 1
            interesting = self.seen[c.key]
        elif c.why is not None:
            setattr(ps, c.why, getattr(ps, c.why) + 1)
            if c.key:
                self.seen[c.key] = False
            return False
        else:
            interesting = runs.verdict(c.source, c.key)
        if interesting and self.compile_check and not libcst_parses(c.source):
            ps.invalid += 1                     # it reproduces, but the passes could not read it
            self.seen[c.key] = False
            return False
        if interesting:
            self._accept(c.source, c.size)
        return interesting

    def _accept(self, source: str, size: Size) -> None:
        self.best, self.best_size = source, size
        self.tally.here().accepted += 1
        self.tally.stats.accepted += 1

    def failure_lines(self, source: str) -> tuple[int, ...] | None:
        """Where ``source`` failed in the run that accepted it (the script's own traceback
        lines), when the oracle keeps that (``reducer.failure.oracle.Oracle`` does)."""
        return self._failure_lines(source) if self._failure_lines is not None else None

    def _spells_secret(self, source: str) -> bool:
        """A secret of this environment that the best does not contain: no pass (a recorded value,
        a folded constant) may write one into a repro that is filed in public."""
        found = leaked(source, self._secrets)
        return found is not None and leaked(self.best, [found]) is None

    def _unbinds(self, source: str) -> bool:
        """The candidate reads a name that the best binds and it no longer does."""
        if not self.name_check:
            return False
        before = _unbound(self.best)
        after = _unbound(source)
        return before is not None and after is not None and bool(after - before)
