"""Which of the user's other packages a row's other failure blames, and their releases of the row's time.

A `versions` row swaps one package and keeps every other pin of the user's lock, moving only a
requirement the swapped release declares and the lock does not meet (requirement_choice.py). A
companion the swapped release uses without declaring it, or declares only as an extra, stays at
the user's release, which may be too old for it: transformers lists accelerate only under
``transformers[torch]``, so a row of transformers 4.38-4.57 over the user's accelerate 0.25.0 failed
otherwise, first on ``Accelerator.__init__() got an unexpected keyword argument
'use_seedable_sampler'``, later on "Using the `Trainer` with `PyTorch` requires `accelerate>=...`"
(the real-bug benchmark's transformers-28293, issue #42). Every row from the first to the fix read
"fails otherwise", and the fixing release was never named. A user upgrading transformers would
have upgraded accelerate with it.

So a row that fails otherwise, where the failure names a package the lock holds (a requirement in
its message, ``pip install X``, an import from it, a rejected call to one of its registered callees,
a frame in it; or an exception chained under it does: transformers' lazy-import wrapper "Failed to
import transformers.trainer ... (look up to see its traceback)" names nothing, its cause does),
runs once more with those packages at the release contemporary with the swapped one (the newest
uploaded no later than it: requirement_choice's anchor). The row then says what moved and why, and
lists it in ``also`` with the rest of what was installed beside the swapped release, so a pass that
needed the move is read as requirement_choice's additions are (a pass with a package the failure was
raised through moved is not the swapped release's fix: versions.py, kind.py).

Only the lock's packages move (the user's environment, brought to the row's time), never the
foundation (torch: the row runs on the user's build), never the swapped package itself, and only
to a release the index dates: without upload times there is no "the row's time" to move to.
"""
from __future__ import annotations

import re
from typing import Callable

from packaging.utils import canonicalize_name

from bot.rerun.releases import IndexOptions
from bot.rerun.requirement_choice import CONTEMPORARY, Chooser
from bot.rerun.verdict import Verdict
from bot.targets import registry

# Where a message names a package: an import from it, a requirement on it, an install of it.
_NAMED = (
    re.compile(r"(?:from|module|named) '([A-Za-z_]\w*)"),
    re.compile(r"(?<![\w.\-])([A-Za-z][\w\-]*)\s*(?:>=|==|~=|<=|!=|>|<)\s*[<\d]"),
    re.compile(r"pip install (?:-U |--upgrade )?[`'\"]?([A-Za-z][\w\-]*)"),
)
# A call a callee refused: ``Accelerator.__init__() got an unexpected keyword argument ...``.
_CALLEE = re.compile(r"([A-Za-z_]\w*)(?:\.\w+)*\(\) (?:got an unexpected keyword|got multiple values|"
                     r"missing \d+ required|takes )")


def blamed(verdict: Verdict) -> set[str]:
    """Distribution names (canonical) the other failure, or an exception chained under it, names or
    runs through."""
    messages, frames = [(verdict.detail or "").split(" @ ", 1)[0]], list(verdict.frames)
    for cause in verdict.causes:
        message, _, where = cause.partition(" @ ")
        messages.append(message)
        frames += [f for f in where.split(" < ") if f]
    names = {m.group(1).split(".")[0] for message in messages for pattern in _NAMED for m in pattern.finditer(message)}
    callees = registry.callee_packages()
    names |= {callees[m.group(1)] for message in messages for m in _CALLEE.finditer(message) if m.group(1) in callees}
    names |= {frame.split(":", 1)[0].split("/", 1)[0].removesuffix(".py") for frame in frames}
    targets = registry.package_targets()
    dists = {d for name in names for d in (targets[name].dists if name in targets else (name,))}
    return {canonicalize_name(d) for d in dists}


def _foundation() -> set[str]:
    return {canonicalize_name(d) for t in registry.targets() if t.foundation for d in t.dists}


def to_move(verdict: Verdict, held: dict[str, str], swap: dict[str, str]) -> list[str]:
    """The packages of `held` (the row's pins from the user's lock) the failure blames, that the
    row may move: not swapped, not the foundation."""
    swapped = {canonicalize_name(n) for n in swap}
    return sorted(n for n in blamed(verdict) if n in held and n not in swapped and n not in _foundation())


def of_the_time(names: list[str], swap: dict[str, str], held: dict[str, str], python_version: str,
                index: IndexOptions, chooser: Callable[..., Chooser] = Chooser) -> dict[str, str]:
    """Each of `names` at the release contemporary with the swapped one, where that is another
    release than the row holds (empty: no upload times, or nothing to change)."""
    if not names:
        return {}
    pick = chooser(python_version, index, dict(swap))
    if pick.anchor is None:
        return {}
    return {c.name: c.version for c in pick.choose(names, lambda n: held.get(canonicalize_name(n)))
            if c.how == CONTEMPORARY and c.version and c.version != held.get(canonicalize_name(c.name))}


def note(moved: dict[str, str], held: dict[str, str], verdict: Verdict) -> str:
    """The row's words for the move: what, from what, and the failure that asked for it."""
    what = ", ".join(f"{n} {v} (contemporary; the lock's {held.get(n, '?')})" for n, v in sorted(moved.items()))
    return f"moved beside it: {what}, after the row failed otherwise with the lock's: {verdict.detail[:160]}"
