"""The options of the failing call that the call did not set: what `contrast` may add.

A maintainer's most common answer to a usage error is "pass the option made for this": the call
that failed has a keyword (``load_state_dict(..., assign=True)`` for a state dict of meta tensors)
the caller left at its default. `contrast` drops and flips only what the repro spells out, so it
could never find that answer; these are the changes that set each such option the other way.

Which call: the innermost one the user's code made into a library, read from the failure's own
traceback (the last user frame and the library frame it entered), so a user-defined ``forward``
called back by torch counts as the user's code and its ``F.linear(...)`` is the call. Which options:
the keywords of that function's definition whose default is ``True`` or ``False``, read from the
library's source file the traceback names (the environment the repro ran in; where that path is
gone, the same package path under reprobot's own interpreter), that the call does
not already pass by keyword or by position. Private names (``_call_impl``) and constructors (the
class a frame's ``__init__`` belongs to is not in the frame) give none.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bot.upstream.failure import path_frames
from reducer.failure.normalize import library_path
from reducer.failure.outcome import TracebackRecord

# the options tried per call at most: a few cold runs, beside the changes of what the repro spells out
MAX_OPTIONS = 6


@dataclass(frozen=True)
class CallOptions:
    func: str                       # the function's name, as the repro's call names it (``load_state_dict``)
    options: dict[str, bool]        # keyword -> its default, in the definition's order
    positional: tuple[str, ...]     # the parameters a positional argument fills, in order (``self`` dropped)


def entered_call(record: TracebackRecord) -> tuple[str, str, int] | None:
    """(function, library file, line) of the innermost call from the user's code into a library."""
    frames = path_frames(record)
    for outer, inner in reversed(list(zip(frames, frames[1:]))):
        if outer.package is None and inner.package is not None:
            return inner.frame.func, inner.frame.path, inner.frame.lineno
    return None


def _source_file(path: str) -> Path | None:
    """The library file a frame names: its recorded path, else (a folder moved to another machine, a
    path scrubbed to ``<env>/...``) the same package path under this interpreter's own sys.path."""
    recorded = Path(path).expanduser()
    if recorded.is_file():
        return recorded
    rel = library_path(path)
    found = (Path(p) / rel for p in sys.path if p and rel)
    return next((f for f in found if f.is_file()), None)


@lru_cache(maxsize=32)
def _tree(path: str) -> ast.Module | None:
    source = _source_file(path)
    try:
        return ast.parse(source.read_text(encoding="utf-8", errors="replace")) if source else None
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def call_options(record: TracebackRecord) -> CallOptions | None:
    """The boolean options of the function the user's code called into, as its source defines them."""
    entered = entered_call(record)
    if entered is None:
        return None
    func, path, lineno = entered
    if func.startswith("_") or func == "<module>":
        return None
    tree = _tree(path)
    if tree is None:
        return None
    # the innermost definition of that name around the frame's line (a method, or a nested def)
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func
            and n.lineno <= lineno <= (n.end_lineno or n.lineno)]
    if not defs:
        return None
    args = max(defs, key=lambda n: n.lineno).args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    defaults = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    options = {name: d.value for name, d in defaults.items()
               if isinstance(d, ast.Constant) and isinstance(d.value, bool) and not name.startswith("_")}
    if positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    return CallOptions(func, options, tuple(positional)) if options else None


def description(name: str, value: bool, func: str) -> str:
    """How contrast names the change (bot/upstream/kind.py reads it back)."""
    return f"with `{name}={value}` (an option of {func}() the call did not set)"


__all__ = ["CallOptions", "MAX_OPTIONS", "call_options", "description", "entered_call"]
