"""The two search loops almost every pass is built on, and ``find_integer`` under them.

- ``run_targets``: walk the pass's target nodes in pre-order and offer each target's alternatives;
- ``delete_runs``: delete runs of items from a list (statements, call arguments, container
  entries), finding long deletable runs with ``find_integer`` (probe 1..4, double, bisect).
Both rely on one property of pre-order: rewriting target *i* only changes nodes at or after *i*,
so index *i* still names the same target after an accepted change. They only offer candidates
to the gate; it decides.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import libcst as cst

from reducer.analysis.cst import parse, replace, safe
from reducer.passes.base import Gate, Offer

T = TypeVar("T")


def find_integer(f: Callable[[int], bool], ahead: Callable[[list[int]], None] | None = None) -> int:
    """Largest n with f(n) true, assuming f(0) and rough monotonicity (hypothesis' find_integer):
    try 1..4 linearly, then double, then bisect between the last success and the first failure.

    ``ahead`` hears, before each probe past the linear ones, that probe and the ones that may come
    after it whichever way it goes (the next doubling and the bisection's midpoint; both halves'
    midpoints), so idle slots can run them side by side. The probes ``f`` sees, and the answer,
    are the same with or without it."""
    for i in range(1, 5):
        if not f(i):
            return i - 1
    lo, hi = 4, 8
    while True:
        if ahead is not None:
            ahead([hi, hi * 2, (lo + hi) // 2, hi * 4])
        if not f(hi):
            break
        lo, hi = hi, hi * 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if ahead is not None:
            ahead([mid] + [n for n in ((mid + hi) // 2, (lo + mid) // 2) if lo < n < hi and n != mid])
        if f(mid):
            lo = mid
        else:
            hi = mid
    return lo


def run_targets(gate: Gate, find: Callable[[cst.Module], Sequence[cst.CSTNode]],
                alternatives: Callable[[cst.Module, cst.CSTNode], Iterable[str | None]]) -> None:
    """Offer each target's alternatives, target by target in pre-order, lazily (so speculation
    in the gate can look ahead across targets)."""
    i = 0
    while True:
        module = parse(gate.best)
        targets = find(module)
        if i >= len(targets):
            return

        def stream(module=module, targets=targets, start=i) -> Iterator[Offer]:
            for idx in range(start, len(targets)):
                for alt in _guarded(lambda: list(alternatives(module, targets[idx]))):
                    if alt is not None:
                        yield idx, alt

        hit = gate.first(stream())
        if hit is None:
            return
        i = hit     # the target changed in place (or vanished): look at index i again


def together_then_each(gate: Gate, find: Callable[[cst.Module], Sequence[cst.CSTNode]],
                       alternatives: Callable[[cst.Module, cst.CSTNode], Iterable[str | None]],
                       everything: Callable[[cst.Module], str | None]) -> None:
    """Every target at once first (one run, often enough), then target by target."""
    together = everything(parse(gate.best))
    if together is not None and gate.consider(together):
        return
    run_targets(gate, find, alternatives)


def _guarded(make: Callable[[], list[T]]) -> list[T]:
    try:
        return make()
    except (cst.CSTValidationError, cst.ParserSyntaxError, ValueError, TypeError, AttributeError,
            RecursionError):
        return []


def delete_runs(gate: Gate, find_owners: Callable[[cst.Module], Sequence[cst.CSTNode]],
                get_items: Callable[[cst.CSTNode], Sequence[cst.CSTNode]],
                set_items: Callable[[cst.CSTNode, list[cst.CSTNode]], cst.CSTNode]) -> None:
    """For each owner (in order) delete runs of its items, walking from the last item backwards.

    The gate is offered single deletions lazily, owner after owner: i, i-1, ... of this owner,
    then every item of the next owners (so idle slots can run them while one owner has few items
    left); the first one accepted is the one an owner-by-owner walk accepts. Once deleting item p
    is accepted, ``find_integer`` grows the run backwards from p: deleting items p-n..p from the
    same starting list, each larger run strictly smaller than the last.
    """
    o, pos = 0, None
    while True:
        module = parse(gate.best)
        owners = find_owners(module)
        if o >= len(owners):
            return

        def without(oi: int, lo: int, hi: int, module=module, owners=owners) -> str | None:
            # owners[oi]'s items[lo..hi] removed (inclusive)
            owner = owners[oi]
            items = list(get_items(owner))
            return safe(lambda: replace(module, owner, set_items(owner, items[:lo] + items[hi + 1:])))

        def singles(owners=owners, first=o, start_at=pos, without=without) -> Iterator[Offer]:
            for oi in range(first, len(owners)):
                last = len(get_items(owners[oi])) - 1
                start = last if oi != first or start_at is None else min(start_at, last)
                for p in range(start, -1, -1):
                    c = without(oi, p, p)
                    if c is not None:
                        yield (oi, p), c

        hit = gate.first(singles())
        if hit is None:
            return
        o, p = hit
        # find_integer's linear probes are independent: let --jobs run them side by side
        gate.prefetch([without(o, p - k, p) for k in range(1, 5) if p - k >= 0])

        def grow(n: int, o=o, p=p, without=without) -> bool:
            if n == 0:
                return True
            if p - n < 0:
                return False
            c = without(o, p - n, p)
            return c is not None and gate.consider(c)

        def probes(ns: list[int], o=o, p=p, without=without) -> None:
            gate.ahead([without(o, p - n, p) for n in ns if 0 < n <= p])

        n = find_integer(grow, probes)
        pos = p - n - 1
        if pos < 0:
            o, pos = o + 1, None


def one_after_another(source: str, step: Callable[[cst.Module], str | None], limit: int) -> str | None:
    """``step`` (the rewrite of the first site it finds in a module; None when there is none or it
    cannot be made) applied again to its own result, at most ``limit`` times: a rewrite that makes
    the next one possible (a value inlined into a line that is inlined next) in one candidate.
    None when nothing changed."""
    text = source
    for _ in range(limit):
        nxt = step(parse(text))
        if nxt is None:
            break
        text = nxt
    return text if text != source else None
