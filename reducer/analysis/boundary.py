"""The boundary call: where the script's own code entered the library that raised the failure,
and the values its arguments had at that moment.

One run of the original under a small launcher (``LAUNCHER``, like ``reducer.analysis.trace``'s: runpy,
``sys.settrace`` and ``threading.settrace``, no third-party imports). Its local tracer watches
only the script's own frames; the first time an exception reaches one of them from a callee
outside the script (the exception's traceback goes on into another file), that frame's line is
a boundary; so is a line of the script whose exception started there without a ``raise``: a C
function it called raised it (``feats.view(...)`` on a tensor whose strides forbid the view), with
no Python frame of the library to enter. For every call on that statement the launcher evaluates
each argument, the receiver of a method call, and the callee itself in the frame — only
expressions without a call, an
``await``, a ``yield``, a walrus or a lambda in them, so evaluating them again runs nothing of the
script — and writes, per expression text, the source text that rebuilds the value (literals,
containers of them, the script's enum members) or, for any other object, its type's module and
qualified name. A record is written at once (O_APPEND), so a worker thread that logs and
swallows the failure, or a process killed later, loses nothing.

``reducer.passes.boundary`` turns the record that matches the target failure into a
whole-program candidate: the imports the call needs plus that one call with those values.

Unlike the call records of ``reducer.analysis.trace`` (the latest call per call site), these are the values
of the failing call itself, even when the same line ran before with other values.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reducer.analysis.recipes import LOADER, recipe_env
from reducer.analysis.trace import OUTSIDE_SOURCE, VALUE_SOURCE, launcher_head, run_main

ENV_VAR = "REPROBOT_BOUNDARY_OUT"

LAUNCHER = r'''
import ast, collections, os, re, runpy, sys, threading, json, weakref

# the failing call of a child is recorded as the parent's (trace.py's hand-over)
''' + launcher_head("REPROBOT_BOUNDARY_OUT", parent='os.environ.setdefault("REPROBOT_TRACE_OUT", '
                                                   'os.environ.get("REPROBOT_BOUNDARY_OUT", os.devnull))') + r'''
_here = os.path.dirname(_script)
_private = [p for p in (_here, os.environ.get("TMPDIR", "").rstrip(os.sep)) if len(p) > 1]
# exceptions seen lately (kept alive, so an identity check is sound): one exception reaches every
# frame it leaves right after another, so the recent ones are enough to see it once
_done = collections.deque(maxlen=64)
_records = [0]
_MAX_RECORDS, _MAX_REPR = 1000, 4000
_pending = {}       # script frame id -> (exception, traceback) a C call of its current line raised
_calls_at = None


''' + VALUE_SOURCE + LOADER + OUTSIDE_SOURCE + r'''

_blobs = []


def _outside(texts):
    """Whether any string these texts spell carries an environment value or a file the script
    read: such a value never becomes part of a repro, however it was computed."""
    if not _blobs:
        _blobs.append(_read_blobs())
    for text in texts:
        try:
            tree = ast.parse(text)
        except Exception:
            return True
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and \
                    _from_outside(repr(node.value), _blobs[0]):
                return True
    return False


def _describe(value):
    if isinstance(value, (str, os.PathLike)):
        # a path the script wrote (a checkpoint folder): the recipe that writes it, before its text
        made = _rebuilt(value, literal=False)
        if made is not None:
            if _outside(made["setup"] + [made["expr"]]):
                return {"outside": True}
            return {"type": type(value).__module__ + ":" + type(value).__qualname__, "recipe": made}
    try:
        text = _source(value)
    except Exception:
        text = None
    if text is not None and len(text) <= _MAX_REPR:
        return {"outside": True} if _outside([text]) else {"value": text}
    cls = type(value)
    out = {"type": getattr(cls, "__module__", "") + ":" + getattr(cls, "__qualname__", "")}
    enum = sys.modules.get("enum")
    name = getattr(value, "name", None)
    if enum is not None and isinstance(value, enum.Enum) and isinstance(name, str) and name.isidentifier():
        out["member"] = out["type"] + "." + name    # a library enum's member: re.RegexFlag.IGNORECASE
    # a function or class: where it lives, so the candidate can import it (json.loads, not <function>)
    mod, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if isinstance(mod, str) and isinstance(qual, str) and not isinstance(value, (int, float, str, bytes)):
        out["object"] = mod + ":" + qual
    if "object" not in out and "member" not in out:
        recipe = _rebuilt(value)
        if recipe is not None:
            if _outside(recipe["setup"] + [recipe["expr"]]):
                out["outside"] = True
            else:
                out["recipe"] = recipe
        else:
            made = _made_of(value)
            if made is not None:
                out["made"] = made
    return out


_UNSAFE = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Lambda,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


# the lines of the script's own ``raise`` and ``assert`` statements: an exception that starts there
# is the script's, one that starts on any other line with a call was raised by a C function it called
_raise_lines = set()


def _index():
    """line -> [(expression text, compiled code or None)] for the calls of each statement."""
    try:
        with open(_script, encoding="utf-8") as f:
            text = f.read()
        tree = ast.parse(text)
    except Exception:
        return {}
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.Assert)):
            _raise_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if not isinstance(node, ast.Call):
            continue
        parts = [node.func] + list(node.args) + [k.value for k in node.keywords]
        if isinstance(node.func, ast.Attribute):
            parts.append(node.func.value)
        exprs = []
        for p in parts:
            if isinstance(p, ast.Starred):
                p = p.value
            seg = ast.get_source_segment(text, p)
            if seg is None:
                continue
            code = None
            if not any(isinstance(n, _UNSAFE) for n in ast.walk(p)):
                try:
                    code = compile(ast.Expression(p), "<boundary>", "eval")
                except Exception:
                    code = None
            exprs.append((seg, code))
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            out.setdefault(line, []).extend(exprs)
    return out


def _rank():
    """This process's rank in a multi-process job, else None: a launched job's (torchrun, accelerate
    launch) from its environment; a job whose ranks the script started itself (``mp.spawn``, a
    ``Process`` per rank) from the process group it joined, which is up by the time a call of
    DistributedDataParallel or a collective is entered."""
    try:
        if "RANK" in os.environ:
            return int(os.environ["RANK"]) if int(os.environ.get("WORLD_SIZE", "1")) > 1 else None
    except ValueError:
        return None
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return int(dist.get_rank())
    except Exception:
        return None
    return None


def _calls_on(line):
    """The call expressions of the script's ``line`` (the index is built on first use)."""
    global _calls_at
    if _calls_at is None:
        _calls_at = _index()
    return _calls_at.get(line, [])


def _values(frame):
    values = {}
    for text, code in _calls_on(frame.f_lineno):
        if text in values or code is None:
            continue
        try:
            value = eval(code, frame.f_globals, frame.f_locals)
            values[text] = _describe(value)
        except Exception:
            continue
        if "value" not in values[text] and "recipe" not in values[text]:
            alias = _global_alias(value, frame, text)
            if alias is not None:
                values[text]["global"] = alias
    # the frame's own variables too (a parameter the slice of an unwritable argument reads)
    if frame.f_code.co_name != "<module>":
        for name, value in list(frame.f_locals.items())[:100]:
            if name not in values and isinstance(name, str) and name.isidentifier():
                try:
                    described = _describe(value)
                except Exception:
                    continue
                if "value" in described or "recipe" in described:
                    values[name] = described
    return values


def _global_alias(value, frame, text):
    """The script's global holding this very object, for a value with no literal and no recipe
    (``self.tok`` in a worker thread is the ``tok`` the top level built and configured): the slice
    can start from that global's statements instead of from ``self``, which it cannot rebuild."""
    if isinstance(value, (int, float, str, bytes, bool, type(None), type)) \
            or type(value).__name__ in ("module", "function", "builtin_function_or_method", "method"):
        return None
    for k, v in list(frame.f_globals.items())[:500]:
        if v is value and isinstance(k, str) and k.isidentifier() and not k.startswith("_") and k != text:
            return k
    return None


def _emit_record(frame, exc_type, message, callee, **more):
    record = {"line": frame.f_lineno, "func": frame.f_code.co_name, "exc_type": exc_type,
              "message": message, "values": _values(frame), "child": _child, **more}
    rank = _rank()
    if rank is not None:
        record["rank"] = rank
    state = _process_state()
    if state is not None:
        record["state"] = state
    if callee is not None:
        record["callee"] = callee
    if RECIPE_ERRORS:
        record["recipe_errors"] = RECIPE_ERRORS[:8]
    _emit(record)


def _record(frame, exc, tb=None):
    _emit_record(frame, type(exc).__module__ + "." + type(exc).__qualname__, str(exc)[:2000], _callee(frame, tb))


# Watched calls (REPROBOT_BOUNDARY_AT: "line:callee,..."): every process records the values of
# such a call when it enters the callee, failing or not. A failure in one rank of a launched job
# needs the other ranks' values of the same call (each may build a model of another size), and a
# rank that only waits in a collective may be killed before it raises anything.
_watch = set()
for _w in os.environ.get("REPROBOT_BOUNDARY_AT", "").split(","):
    _l, _, _c = _w.partition(":")
    if _l.isdigit() and _c:
        _watch.add((int(_l), _c))
_watched = set()


# The arguments of the latest call each frame of the script made into another file, taken when
# that call started (a callee may pop or rebind its parameters before it raises): script frame id
# -> (its code, the callee's code, the callee's frame locals at its start).
_entered = {}


def _entering(frame):
    back = frame.f_back
    if back is None or back.f_code.co_filename != _script or frame.f_code.co_filename == _script:
        return
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames[:n + (1 if code.co_flags & 0x04 else 0) + (1 if code.co_flags & 0x08 else 0)]
    loc = frame.f_locals
    taken = {}
    for name in names:
        if name in loc:
            taken[name] = _copied(loc[name])
    _entered[id(back)] = (back.f_code, code, taken)
    key = (back.f_lineno, getattr(code, "co_qualname", code.co_name))
    if key not in _watch:
        key = (back.f_lineno, code.co_name)
    if key in _watch and key not in _watched and _records[0] < _MAX_RECORDS:
        _watched.add(key)
        _records[0] += 1
        _emit_record(back, "", "", _received_by(code, taken, _function_of(code, frame.f_globals, taken)), entry=True)
    if code.co_name == "__init__" and code.co_argcount:
        _remember_made(frame, code, taken, back.f_lineno)


# Library objects the script built itself (``trainer = Trainer(model=..., callbacks=[...])``): what
# their constructor received, for a failing call whose receiver or argument is such an object and
# has no recipe of its own. id -> (weak reference, script line, __init__ code, what it took, the
# function). An entry goes when its object does (the arguments are held only that long).
_made = {}
_MAX_MADE = 256


def _remember_made(frame, code, taken, line):
    obj = taken.get(code.co_varnames[0])
    if obj is None:
        return
    key = id(obj)
    try:
        ref = weakref.ref(obj, lambda _r, key=key: _made.pop(key, None))
    except TypeError:
        return      # no weak references: not remembered rather than kept alive
    if len(_made) >= _MAX_MADE:
        _made.pop(next(iter(_made)), None)
    args = {k: v for k, v in taken.items() if v is not obj}
    _made[key] = (ref, line, code, args, _function_of(code, frame.f_globals, taken))


_making = [0]


def _made_of(value):
    """How the script built ``value``: {"line", "callee"} (the callee as ``_callee`` writes one,
    without ``self``), two levels deep at most."""
    entry = _made.get(id(value))
    if entry is None or entry[0]() is not value or _making[0] > 1:
        return None
    _ref, line, code, args, fn = entry
    _making[0] += 1
    try:
        return {"line": line, "callee": _received_by(code, args, fn)}
    except Exception:
        return None
    finally:
        _making[0] -= 1


def _copied(value, depth=0):
    """Plain containers as they were at the call: a callee may fill in or convert them (accelerate
    turns max_memory's "8GiB" into bytes in place) before it raises."""
    cls = type(value)
    if depth > 3 or cls not in (dict, list, tuple) or len(value) > 64:
        return value
    if cls is dict:
        return {k: _copied(v, depth + 1) for k, v in value.items()}
    return cls(_copied(v, depth + 1) for v in value)


def _function_of(code, globals_, taken):
    """The function object running ``code``, for its defaults: a method of its first argument's
    class (or the class itself), else a global of its module."""
    names = code.co_varnames[:1]
    first = taken.get(names[0]) if names else None
    for owner in ([first, type(first)] if first is not None else []):
        fn = getattr(owner, code.co_name, None)
        fn = getattr(fn, "__func__", fn)
        fn = getattr(fn, "__wrapped__", fn) if getattr(fn, "__code__", None) is not code else fn
        if getattr(fn, "__code__", None) is code:
            return fn
    fn = globals_.get(code.co_name)
    return fn if getattr(fn, "__code__", None) is code else None


def _callee(frame, tb):
    """What the library function the failing line entered received: each parameter (and the
    entries of its ``*args`` and ``**kwargs``), described, with which of them still held the
    function's default (so a ``**helper()`` at the call site can be spelled out)."""
    try:
        inner = tb.tb_next if tb is not None and tb.tb_frame is frame else None
        entered = _entered.get(id(frame))
        if inner is None or entered is None or entered[0] is not frame.f_code or entered[1] is not inner.tb_frame.f_code:
            return None
        code, taken = entered[1], entered[2]
        return _received_by(code, taken, _function_of(code, inner.tb_frame.f_globals, taken))
    except Exception:
        return None


def _received_by(code, taken, fn):
    n = code.co_argcount + code.co_kwonlyargcount
    defaults = {}
    if fn is not None:
        pos = code.co_varnames[:code.co_argcount]
        for name, value in zip(pos[len(pos) - len(fn.__defaults__ or ()):], fn.__defaults__ or ()):
            defaults[name] = value
        defaults.update(fn.__kwdefaults__ or {})
    params = []
    for name in code.co_varnames[:n]:
        if name not in taken:
            continue
        value = taken[name]
        d = _describe(value)
        if name in defaults and (defaults[name] is value or _same(defaults[name], value)):
            d["default"] = True
        params.append([name, d])
    out = {"name": code.co_name, "params": params, "posonly": code.co_posonlyargcount,
           "known_defaults": fn is not None}
    # the class's too where the interpreter knows it (3.11+): on ``DDP(nn.Linear(4, 2))`` a watch
    # for "__init__" alone is met first by Linear's
    qualname = getattr(code, "co_qualname", None)
    if isinstance(qualname, str) and qualname != code.co_name:
        out["qualname"] = qualname
    if code.co_flags & 0x04:
        out["varargs"] = [_describe(v) for v in list(taken.get(code.co_varnames[n], ()))[:32]]
    if code.co_flags & 0x08:
        extra = taken.get(code.co_varnames[n + (1 if code.co_flags & 0x04 else 0)]) or {}
        out["varkw"] = [[str(k), _describe(v)] for k, v in list(extra.items())[:64]]
    return out


def _same(a, b):
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _c_raised(frame):
    """The exception started on a line of the script that calls something and is no ``raise``."""
    return bool(_calls_on(frame.f_lineno)) and frame.f_lineno not in _raise_lines


def _local(frame, event, arg):
    if event == "exception" and _records[0] < _MAX_RECORDS:
        try:
            exc, tb = arg[1], arg[2]
            if not any(e is exc for e in _done):
                last = tb
                while last is not None and last.tb_next is not None:
                    last = last.tb_next
                if last is not None and last.tb_frame.f_code.co_filename != _script:
                    _done.append(exc)
                    _records[0] += 1
                    _record(frame, exc, tb)
                elif last is not None:
                    _done.append(exc)      # raised by the script itself: no boundary ...
                    if last.tb_frame is frame and _c_raised(frame):
                        # ... unless a C function called on this line raised it (``feats.view(...)``,
                        # ``torch.cat(...)``): no Python frame of the library, but the same boundary.
                        # Recorded once it leaves the frame: a loop of ``try: int(x) except
                        # ValueError`` raises in C on every row and catches it on the next line
                        _pending[id(frame)] = (exc, tb)
        except Exception:
            pass
    elif event == "line" and _pending:
        _pending.pop(id(frame), None)          # caught in this frame
    elif event == "return" and id(frame) in _pending:
        exc, tb = _pending.pop(id(frame))
        try:
            if arg is None and _records[0] < _MAX_RECORDS:      # left the frame: not caught here
                _records[0] += 1
                _record(frame, exc, tb)
        except Exception:
            pass
    return _local


def _global(frame, event, arg):
    if event != "call":
        return None
    if frame.f_code.co_filename == _script:
        return _local
    try:
        _entering(frame)
    except Exception:
        pass
    return None


def _child_main():
    _load_recipes()
    if hasattr(sys, "addaudithook"):
        sys.addaudithook(_audit)
    threading.settrace(_global)
    sys.settrace(_global)

''' + run_main("_load_recipes()")


@dataclass
class Boundary:
    """One exception that entered the script's own code from a callee in another file."""
    line: int
    func: str
    exc_type: str
    message: str
    # expression text -> {"value"|"type"|"object"|"recipe"}; a library object the script built
    # itself and no recipe rebuilds also has "made": {"line", "callee"} (what its __init__ received)
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    # what the library function the line entered received (the launcher's ``_callee``): its name,
    # [parameter, description] pairs, ``varargs``, ``varkw``; None when it was not seen
    callee: dict[str, Any] | None = None
    child: bool = False             # recorded in a child process of the run
    recipe_errors: list[str] = field(default_factory=list)   # recipes that raised (a bug of ours to see)
    rank: int | None = None         # the process's rank in a launched job (torchrun, accelerate launch)
    # the process-wide library state the call ran in, as recipes rebuild it (reducer/analysis/recipes.py's
    # ``process_state``): {"imports", "setup", "rank": {"expr", "imports"}}
    state: dict[str, Any] | None = None
    entry: bool = False             # a watched call as it was entered, not a failure

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Boundary:
        callee, state, rank = d.get("callee"), d.get("state"), d.get("rank")
        return cls(int(d["line"]), str(d.get("func", "")), str(d.get("exc_type", "")), str(d.get("message", "")),
                   {str(k): dict(v) for k, v in dict(d.get("values", {})).items() if isinstance(v, dict)},
                   callee if isinstance(callee, dict) else None, bool(d.get("child", False)),
                   [str(e) for e in d.get("recipe_errors", [])][:8],
                   rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
                   state if isinstance(state, dict) else None, bool(d.get("entry", False)))

    def recipe_of(self, expr: str) -> dict[str, Any] | None:
        recipe = self.values.get(expr, {}).get("recipe")
        return recipe if isinstance(recipe, dict) and isinstance(recipe.get("expr"), str) else None

    def value(self, expr: str) -> str | None:
        return self.values.get(expr, {}).get("value")

    def made_of(self, expr: str) -> dict[str, Any] | None:
        made = self.values.get(expr, {}).get("made")
        return made if isinstance(made, dict) else None

    def type_of(self, expr: str) -> str | None:
        return self.values.get(expr, {}).get("type")

    def object_of(self, expr: str) -> str | None:
        return self.values.get(expr, {}).get("object")

    def member_of(self, expr: str) -> str | None:
        return self.values.get(expr, {}).get("member")

    def alias_of(self, expr: str) -> str | None:
        """The script's global that held the same object (recorded only for a value with no
        literal and no recipe)."""
        alias = self.values.get(expr, {}).get("global")
        return alias if isinstance(alias, str) and alias.isidentifier() else None


def load(path: Path) -> list[Boundary]:
    out: list[Boundary] = []
    if not path.exists():
        return out
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(Boundary.from_dict(json.loads(raw)))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def boundary_run(source: str, run, recipes: tuple[Path, ...] = ()) -> list[Boundary]:
    """Run ``source`` once under the launcher (``run(source, launcher_argv, extra_env)``, as
    ``reducer.analysis.trace.trace_run`` calls it) and read the boundaries it recorded, in order, its
    children's included. ``recipes``: the files that rebuild values no literal spells
    (reducer/analysis/recipes.py), in the order they are asked."""
    with tempfile.TemporaryDirectory(prefix="reprobot-boundary-") as d:
        launcher = Path(d) / "reprobot_boundary_launcher.py"
        launcher.write_text(LAUNCHER, encoding="utf-8")
        out = Path(d) / "boundary.jsonl"
        # REPROBOT_TRACE_OUT too: under a launch line the ranks are the script's interpreters, and
        # the runner hands them this launcher (in child mode) as it hands them the trace's
        env = {ENV_VAR: str(out), "REPROBOT_TRACE_OUT": str(out), **recipe_env(recipes)}
        run(source, [str(launcher)], env)
        found = load(out)
        watch = peer_calls(found)
        if watch:
            # a rank's failure: one more run records the same call as every rank entered it
            out.unlink(missing_ok=True)
            run(source, [str(launcher)], {**env, "REPROBOT_BOUNDARY_AT": watch})
            found += [b for b in load(out) if b.entry]
        return found


def peer_calls(boundaries: list[Boundary]) -> str:
    """The calls to watch in every rank ("line:callee,..."): those where a rank of a launched job
    failed, when no other rank's values of them were recorded (at most two)."""
    out: list[str] = []
    for b in boundaries:
        if b.rank is None or b.entry or not b.callee or not b.callee.get("name"):
            continue
        if any(o.rank not in (None, b.rank) and o.line == b.line for o in boundaries):
            continue
        key = f"{b.line}:{b.callee.get('qualname') or b.callee['name']}"
        if key not in out:
            out.append(key)
    return ",".join(out[:2])


def matching(boundaries: list[Boundary], exc_type: str, message: str) -> list[Boundary]:
    """The boundaries of the target failure, best first: same type and message, then same message,
    then same type, latest first within each; the rest only where none of those was recorded."""
    def rank(b: Boundary) -> int:
        same_type = bool(exc_type) and (b.exc_type == exc_type or b.exc_type.endswith("." + exc_type)
                                        or exc_type.endswith(b.exc_type.rsplit(".", 1)[-1]))
        same_message = bool(message) and (b.message == message or message in b.message
                                          or (bool(b.message) and b.message in message))
        return 0 if same_type and same_message else 1 if same_message else 2 if same_type else 3
    # The iteration protocol's signals reach the script's frame too (a loop over a csv reader ends
    # with the reader's StopIteration): no failure, unless the target is one (``next()`` on an
    # empty loader). A candidate built on one can never show any other target.
    kept = [(i, b) for i, b in enumerate(boundaries)
            if b.exc_type.rsplit(".", 1)[-1] not in _ITERATION or rank(b) < 3]
    # Neither the type nor the message: only where nothing matches either (a parent's polls of a
    # queue end in queue.Empty again and again beside the child's real failure)
    if any(rank(b) < 3 for _, b in kept):
        kept = [(i, b) for i, b in kept if rank(b) < 3]
    ordered = sorted(kept, key=lambda ib: (rank(ib[1]), -ib[0]))
    return [b for _, b in ordered]


_ITERATION = frozenset({"StopIteration", "StopAsyncIteration", "GeneratorExit"})
