"""What the script's own code handed back to the library that then failed on it.

A library calls the user's code back — a Trainer an overridden ``evaluate``, a DataLoader a
Dataset's ``__getitem__``, a trainer a ``formatting_func`` — and uses what it returns. When the
failure is the library choking on that value (``metrics.update(dataset_metrics)`` with the
``None`` an ``evaluate`` that forgot its ``return`` gave back; ``torch.stack(batch)`` over the
rows of different shapes a ``__getitem__`` gave back), the callback broke the library's contract:
the classic usage error, and no reading of the error line alone tells it from a bug.

One run under a small launcher (``LAUNCHER``, the same hand-over as ``reducer.analysis.trace``'s:
runpy, ``sys.settrace`` and ``threading.settrace``, children included) records every value a
function of the script returns to a caller in another file, keeping the latest ones alive (so an
identity check is sound). When an exception first reaches a frame of the script from a callee
in another file, the launcher looks at the innermost library frame of its traceback: each local
the raising line reads that holds such a value — the very object, or a list, tuple or dict
holding it or a piece of it — is a record. An immutable scalar (``None``, a number, a string) has
no identity of its own: it counts only where the library frame itself called the function and
assigned the result to that local on the calling line (``dataset_metrics = self.evaluate(...)``).

``bot/rerun/contrast.py`` runs it once on the repro; ``bot/upstream/kind.py`` reads a record that
matches the failure as evidence of a usage error.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reducer.analysis.trace import launcher_head, run_main

LAUNCHER = r'''
import collections, linecache, os, re, runpy, sys, threading, json

# a child's failure counts too (trace.py's hand-over)
''' + launcher_head() + r'''
# (value, function, caller frame id, caller code, assignment target on the calling line): kept
# alive, so an identity check against them is sound; the latest are enough (a failure follows soon)
_given = collections.deque(maxlen=256)
_done = collections.deque(maxlen=64)
_raising = set()        # ids of script frames an exception is leaving (their "return" carries None)
_records = [0]
_MAX_RECORDS, _MAX_MEMBERS = 50, 64
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=(?!=)")
_NAME = re.compile(r"[A-Za-z_]\w*")



def _members(value):
    """The objects a list, tuple or dict holds (one level, a bounded number)."""
    try:
        if isinstance(value, dict):
            items = list(value.values())[:_MAX_MEMBERS]
        elif isinstance(value, (list, tuple)):
            items = list(value[:_MAX_MEMBERS])
        else:
            return []
    except Exception:
        return []
    return [v for v in items if not isinstance(v, _SCALARS)]


def _describe(value):
    if value is None:
        return "None"
    kind = type(value).__name__
    members = _members(value)
    if members:
        inner = sorted({type(m).__name__ for m in members})
        return f"{kind} of {', '.join(inner[:3])}"
    if isinstance(value, (str, bytes)):
        return f"{kind} of length {len(value)}"
    if isinstance(value, _SCALARS):
        return f"{kind} {value!r}"[:80]
    shape = getattr(value, "shape", None)
    return f"{kind} of shape {tuple(shape)}" if isinstance(shape, tuple) or type(shape).__name__ == "Size" else kind


def _held(value, given):
    """How ``value`` (a local of the failing frame) holds ``given`` (what the script returned):
    "returned" (the very object) or "holds" (it, or a piece of it, is an element of the local)."""
    if value is given:
        return "returned"
    mine = [given] + _members(given)
    theirs = _members(value)
    for v in theirs:
        if any(v is m for m in mine) or any(x is m for x in _members(v) for m in mine):
            return "holds"
    return None


def _check(tb, exc):
    """The innermost frame of ``tb``: each local its raising line reads that holds what the script
    handed back."""
    last = tb
    while last.tb_next is not None:
        last = last.tb_next
    frame = last.tb_frame
    if frame.f_code.co_filename == _script:
        return
    line = linecache.getline(frame.f_code.co_filename, last.tb_lineno).strip()
    read = set(_NAME.findall(line)) - {"self", "cls"}
    for name, value in list(frame.f_locals.items()):
        if name not in read:
            continue
        for given, func, caller, code, target in reversed(_given):
            if isinstance(given, _SCALARS):
                # no identity of its own: the library frame called the function and kept the result here
                how = "returned" if (caller == id(frame) and code is frame.f_code and target == name
                                     and value is given) else None
            else:
                how = _held(value, given)
            if how:
                _records[0] += 1
                _emit({"exc_type": type(exc).__module__ + "." + type(exc).__qualname__
                       if type(exc).__module__ not in ("builtins", "__main__") else type(exc).__qualname__,
                       "message": str(exc)[:2000], "func": func, "returned": _describe(given), "how": how,
                       "path": frame.f_code.co_filename, "frame": frame.f_code.co_name, "line": line[:200],
                       "local": name, "pid": os.getpid()})
                return


def _local(frame, event, arg):
    if event == "return":
        if id(frame) in _raising:
            _raising.discard(id(frame))
            return _local
        caller = frame.f_back
        if caller is not None and caller.f_code.co_filename not in (_script, __file__) \
                and "runpy" not in caller.f_code.co_filename:
            target = None
            if isinstance(arg, _SCALARS):
                m = _ASSIGNED.match(linecache.getline(caller.f_code.co_filename, caller.f_lineno))
                target = m.group(1) if m else None
            _given.append((arg, frame.f_code.co_qualname if hasattr(frame.f_code, "co_qualname")
                           else frame.f_code.co_name, id(caller), caller.f_code, target))
    elif event == "exception":
        _raising.add(id(frame))
        exc, tb = arg[1], arg[2]
        if _records[0] < _MAX_RECORDS and not any(e is exc for e in _done):
            _done.append(exc)
            try:
                if tb is not None and tb.tb_next is not None:     # it came from a callee
                    _check(tb, exc)
            except Exception:
                pass
    elif event == "line" and _raising:
        _raising.discard(id(frame))             # caught here: the frame goes on
    return _local


def _global(frame, event, arg):
    if event == "call" and frame.f_code.co_filename == _script:
        return _local
    return None


def _child_main():
    threading.settrace(_global)
    sys.settrace(_global)

''' + run_main()


@dataclass(frozen=True)
class Handback:
    """A library frame failed while its raising line read a value a script function returned."""
    exc_type: str
    message: str
    func: str          # the script's function that returned it ("MyTrainer.evaluate")
    returned: str      # what it returned, described ("None", "tuple of Tensor")
    how: str           # "returned": the very value; "holds": the local holds it or a piece of it
    path: str          # the library frame's file, as the run had it
    frame: str         # its function
    line: str          # the raising line
    local: str         # the local it read

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Any) -> "Handback | None":
        if not isinstance(d, dict):
            return None
        try:
            return cls(*(str(d[k]) for k in cls.__dataclass_fields__))
        except KeyError:
            return None


def load(path: Path) -> list[Handback]:
    out: list[Handback] = []
    if not path.is_file():
        return out
    for row in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            found = Handback.from_dict(json.loads(row))
        except ValueError:
            continue
        if found is not None:
            out.append(found)
    return out


def handback_run(source: str, run) -> list[Handback]:
    """Run ``source`` once under the launcher (``run(source, launcher_argv, extra_env)``, as
    ``reducer.analysis.boundary.boundary_run`` calls it) and read what it recorded, its children's
    included."""
    with tempfile.TemporaryDirectory(prefix="reprobot-handback-") as d:
        launcher = Path(d) / "reprobot_handback_launcher.py"
        launcher.write_text(LAUNCHER, encoding="utf-8")
        out = Path(d) / "handback.jsonl"
        # REPROBOT_TRACE_OUT: children and launched ranks run this launcher in child mode (the trace's hand-over)
        run(source, [str(launcher)], {"REPROBOT_TRACE_OUT": str(out)})
        return load(out)
