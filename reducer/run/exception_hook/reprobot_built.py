"""Where the tensors a failing line reads were made (stdlib only until the script imports torch):
loaded by sitecustomize.py only while ``REPROBOT_BUILT`` names a file.

A failure raised in one package is often caused by a tensor another package made and handed
over: transformers' cache concatenates a prefix PEFT built, transformers' mask function indexes
with ids trl's collator built. The traceback names only the raiser. Once the script imports torch
(never earlier: importing it here would change the run), a ``TorchFunctionMode`` notes for each
tensor a torch function returns the innermost frame outside torch that called it. When an
exception is recorded, the names the innermost frames' failing lines read are looked up (locals by
name; ``self.attr`` through the instance's ``__dict__`` only, so no property runs; the first items
of a list, tuple or dict, which is how a cache and a batch hold their tensors), and each tensor's
maker is appended to the file as one JSON line.

``tracemalloc`` cannot answer this: on Python 3.11 and 3.12 ``get_object_traceback`` returns None
for tensors, dicts and small lists (measured). A mode sees only tensors made by torch functions
called from Python, which is what a package hands over.

bot/rerun/built.py runs a repro once with this on and reads the file; the mode's cost (a Python
call per torch function) is paid by that one run only.
"""
import linecache
import os
import re
import sys

from reprobot_after_import import append_json_line, when_imported

_ENV = "REPROBOT_BUILT"
_LINE_FRAMES = 4        # the innermost frames of the traceback whose lines are read
_ITEMS = 4              # items of a container looked at
_MAX_MADE = 200000      # tensors remembered (a long loop must not grow this without bound)
_HERE = os.path.abspath(__file__)
_NAME = re.compile(r"(?<![\w.])(self\.)?([A-Za-z_]\w*)")
_made = {}              # id(tensor) -> (weakref to it, (file, line, function))
_done = set()


def _ours_or_torch(filename):
    return filename == _HERE or os.sep + "torch" + os.sep in filename or filename.startswith("<")


def _maker():
    f = sys._getframe(2)
    while f is not None:
        if not _ours_or_torch(f.f_code.co_filename):
            return [f.f_code.co_filename, f.f_lineno, f.f_code.co_name]
        f = f.f_back
    return None


def _watch(torch):
    import weakref
    from torch.overrides import TorchFunctionMode

    class _Made(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if len(_made) < _MAX_MADE:
                where = None
                for t in (out if isinstance(out, (tuple, list)) else (out,)):
                    if isinstance(t, torch.Tensor):
                        old = _made.get(id(t))
                        if old is None or old[0]() is not t:
                            where = where or _maker()
                            try:
                                _made[id(t)] = (weakref.ref(t), where)
                            except TypeError:
                                pass
            return out

    _Made().__enter__()


def _maker_of(value):
    got = _made.get(id(value))
    return got[1] if got is not None and got[0]() is value else None


def _values(frame, line):
    found = []
    local = frame.f_locals
    owner = local.get("self")
    owned = getattr(owner, "__dict__", None) if owner is not None else None
    seen = set()
    for m in _NAME.finditer(line):
        key = ("self." if m.group(1) else "") + m.group(2)
        if key in seen:
            continue
        seen.add(key)
        if m.group(1):
            if not isinstance(owned, dict) or m.group(2) not in owned:
                continue
            value = owned[m.group(2)]
        elif m.group(2) in local and m.group(2) != "self":
            value = local[m.group(2)]
        else:
            continue
        found.append((key, value))
        if isinstance(value, (list, tuple)):
            found.extend(("%s[%d]" % (key, i), v) for i, v in enumerate(value[:_ITEMS]))
        elif isinstance(value, dict):
            found.extend(("%s[%r]" % (key, k), value[k]) for k in list(value)[:_ITEMS])
    out = []
    for key, value in found:
        where = _maker_of(value)
        if where:
            out.append({"name": key, "made": where})
    return out


def record(exc, how):
    """Append one line for ``exc``, once per exception of this process."""
    path = os.environ.get(_ENV)
    tb = getattr(exc, "__traceback__", None)
    if not path or tb is None or id(exc) in _done:
        return
    _done.add(id(exc))
    try:
        frames = []
        while tb is not None:
            if tb.tb_frame.f_code.co_filename != _HERE:
                frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        lines = []
        for frame, lineno in frames[-_LINE_FRAMES:]:
            text = linecache.getline(frame.f_code.co_filename, lineno).strip()
            lines.append({"file": frame.f_code.co_filename, "line": lineno, "function": frame.f_code.co_name,
                          "values": _values(frame, text) if text else []})
        append_json_line(path, {"pid": os.getpid(), "how": how, "exception": type(exc).__name__, "frames": lines})
    except BaseException:
        pass


def start():
    when_imported("torch", _watch)
