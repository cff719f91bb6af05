"""One traced run of the original: the lines that ran (for the first cut) and the values calls
received (for constant propagation).

The original script is run ONCE in the user's interpreter under a small launcher (``LAUNCHER``,
written to a temp file): ``python launcher.py script.py args...``. The launcher runs the script as
``__main__`` with ``runpy`` under ``sys.settrace`` (no third-party imports, so it works in any
user environment, Python 3.8+), and appends to the JSON-lines file named by
``$REPROBOT_TRACE_OUT``:
- ``{"line": n}`` the first time each line of the script executes (written at once with
  O_APPEND, so forked workers and hard crashes lose nothing already seen);
- the same from every child of the run that is a Python interpreter (spawn / forkserver
  workers, ``torch.multiprocessing.spawn`` ranks, and their own children): the launcher puts
  its path and the script's in the environment, and reducer/run/exception_hook/sitecustomize.py
  runs it in child mode at the child's start-up (a warm child: when it takes its environment),
  so a line only a child ran counts as executed;
- ``{"call": {...}}`` at exit: for calls made from the script's own lines, the callee's name,
  parameters and those argument values whose ``repr`` evaluates back to an equal literal (the
  latest value per call site; bounded in count and size).
The launcher strips its own and runpy's frames from an uncaught traceback, so the output reads
as if the script had been run directly and the Signature is unchanged.

``reducer.passes.first_cut`` then offers, before any delta debugging, the original minus every
statement that never executed (unused functions, branches not taken, code after the failure).
"""
from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst

from reducer.analysis.cst import parse_with_positions
from reducer.analysis.provenance import Provenance, leaked, secret_values
from reducer.run.processes import script_argument

ENV_VAR = "REPROBOT_TRACE_OUT"

# How a launcher writes a recorded value back as source: shared with reducer/analysis/boundary.py's
# launcher (both run as scripts in the user's interpreter; each defines ``_private``).
VALUE_SOURCE = r'''
def _member(value):
    """``Color.RED`` for a member of an enum the script defines: its repr is not source."""
    enum = sys.modules.get("enum")
    cls = type(value)
    if enum is None or not isinstance(value, enum.Enum) or cls.__module__ != "__main__":
        return None
    path = cls.__qualname__.split(".") + [value.name]
    return ".".join(path) if all(p.isidentifier() for p in path) else None


def _source(value, depth=0):
    """Source text that rebuilds ``value`` in the script, or None: literals, containers of
    them, and the script's own enum members (``{"dtype": DType.F16}``)."""
    cls = type(value)
    if cls in (list, tuple, set, dict) and depth < 6 and len(value) <= 200:
        if cls is dict:
            parts = [(_source(k, depth + 1), _source(v, depth + 1)) for k, v in value.items()]
            if any(k is None or v is None for k, v in parts):
                return None
            return "{" + ", ".join(k + ": " + v for k, v in parts) + "}"
        items = [_source(v, depth + 1) for v in value]
        if any(t is None for t in items):
            return None
        if cls is set:
            return "{" + ", ".join(items) + "}" if items else "set()"
        body = ", ".join(items)
        return "[" + body + "]" if cls is list else "(" + body + ("," if len(items) == 1 else "") + ")"
    member = _member(value)
    if member is not None:
        return member
    if cls not in (int, float, complex, str, bytes, bool, type(None)):
        return None
    if cls is float and (value != value or value in (float("inf"), float("-inf"))):
        return None
    text = repr(value)
    return None if any(p in text for p in _private) else text
'''

# What the script read from outside, at run time: the environment's values and the files the script
# opened (an audit hook), and whether a recorded value's strings carry any of them. Shared with
# reducer/analysis/boundary.py's launcher; needs ``_script``, ``re``, ``ast`` and ``sys`` there.
OUTSIDE_SOURCE = r'''
def _outside_strings():
    """Values of this run's environment worth hiding: any variable named like a secret, and
    every other one but the machine's paths and locale (a value the script read from the
    environment is not the script's to publish, whatever it is called)."""
    out = set()
    for k, v in os.environ.items():
        if len(v) < 6:
            continue
        if _SECRET_NAME.search(k) or not (k in _ENV_NOISE or k.startswith(("LC_", "PYTHON", "XDG_"))):
            out.add(v)
    return out


_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
_ENV_NOISE = {"PATH", "PWD", "OLDPWD", "HOME", "SHELL", "TERM", "LANG", "LANGUAGE", "USER", "LOGNAME",
              "TMPDIR", "TEMP", "TMP", "SHLVL", "_"}
_env_strings = _outside_strings()
_stdlib = os.path.dirname(os.__file__) + os.sep
_read_paths = []    # files the script read itself or through the standard library
_MAX_READ_FILES, _MAX_FILE_BYTES, _MAX_READ_BYTES = 64, 4 << 20, 16 << 20


def _opened_by_script():
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name == _script:
            return True
        if not name.startswith(_stdlib) or "-packages" in name:
            return False    # a library read it (a model's config.json): its values are public
        frame = frame.f_back
    return False


def _audit(event, args):
    """An "open" for reading made by the script: its content is outside data."""
    if event != "open" or len(_read_paths) >= _MAX_READ_FILES:
        return
    try:
        path, mode, flags = args
        if path is None or isinstance(path, int):
            return
        writes = any(c in mode for c in "wax") if isinstance(mode, str) else (flags or 0) & 3 == os.O_WRONLY
        if writes or not _opened_by_script():
            return
        path = os.path.abspath(os.fsdecode(path))
        if path not in _read_paths and os.path.isfile(path):
            _read_paths.append(path)
    except Exception:
        pass


def _read_blobs():
    blobs, total = [], 0
    for path in _read_paths:
        try:
            with open(path, "rb") as f:
                data = f.read(min(_MAX_FILE_BYTES, _MAX_READ_BYTES - total))
        except OSError:
            continue
        blobs.append(data)
        total += len(data)
        if total >= _MAX_READ_BYTES:
            break
    return blobs


def _leaves(text):
    """The strings a recorded value spells, from its source text."""
    try:
        tree = ast.parse(text, mode="eval")
    except Exception:
        return None
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes))]


def _from_outside(text, blobs):
    """Whether a recorded value carries an environment value or a file's content: such a value
    never becomes a literal of the repro, whatever code computed it."""
    leaves = _leaves(text)
    if leaves is None:
        return True
    for leaf in leaves:
        raw = leaf if isinstance(leaf, bytes) else leaf.encode("utf-8", "surrogatepass")
        if any(s.encode("utf-8", "surrogatepass") in raw for s in _env_strings):
            return True
        if len(raw) >= 6 and any(raw in blob for blob in blobs):
            return True
    return False
'''

def launcher_head(out_var: str = "REPROBOT_TRACE_OUT", parent: str = "") -> str:
    """The first part of every launcher of a traced run (this one's, the boundary's, the
    handback's): who it runs as, the hand-over to children, and ``_emit``, which appends one JSON
    line to the file ``out_var`` names. ``parent``: more lines only the parent runs."""
    return r'''
# In a child of the run (a spawn/forkserver worker, a torchrun rank, any Python the script started),
# reducer/run/exception_hook/sitecustomize.py runs this file with _REPROBOT_TRACE_CHILD set: the
# same tracer, installed before the child runs anything of the script, writing to the same file.
_child = bool(globals().get("_REPROBOT_TRACE_CHILD"))
_script = os.environ["REPROBOT_TRACE_SCRIPT"] if _child else os.path.abspath(sys.argv[1])
if not _child:
    # children inherit these: they trace themselves (sitecustomize.reprobot_trace_child)
    os.environ["REPROBOT_TRACE_SCRIPT"] = _script
    os.environ["REPROBOT_TRACE_LAUNCHER"] = os.path.abspath(__file__)
''' + "".join(f"    {line}\n" for line in parent.splitlines() if line.strip()) + f'''
_out = os.environ.get("{out_var}")
''' + r'''_fd = os.open(_out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if _out else None


def _emit(obj):
    if _fd is not None:
        try:
            os.write(_fd, (json.dumps(obj) + "\n").encode("utf-8"))
        except (OSError, ValueError, TypeError):
            pass

'''


def run_main(first: str = "") -> str:
    """The launcher's last part, shared by this one, the boundary's (reducer/analysis/
    boundary.py) and the handback's: ``_main`` runs the script as ``__main__`` with the trace function set (after
    ``first``, lines of ``_main``'s body), and re-raises its exception with a traceback that
    starts at the script; a child started by spawn runs ``_child_main`` instead."""
    return r'''

def _main():
''' + "".join(f"    {line}\n" for line in first.splitlines() if line.strip()) + r'''    sys.argv = sys.argv[1:]
    sys.argv[0] = _script
    sys.path[0] = os.path.dirname(_script)
    if hasattr(sys, "addaudithook") and "_audit" in globals():     # a launcher that reads the script's opens
        sys.addaudithook(_audit)
    threading.settrace(_global)
    sys.settrace(_global)
    try:
        runpy.run_path(_script, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as exc:
        sys.settrace(None)
        tb = exc.__traceback__
        # hide the launcher and runpy: the traceback starts at the script, as in a direct run
        while tb is not None and tb.tb_frame.f_code.co_filename != _script:
            tb = tb.tb_next
        tb = tb or exc.__traceback__
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        sys.stderr.flush()
        sys.exit(1)
    finally:
        sys.settrace(None)


if _child:
    _child_main()
else:
    _main()
'''


LAUNCHER = r'''
import ast, atexit, json, os, re, runpy, sys, threading

''' + launcher_head() + r'''
_here = os.path.dirname(_script)
# paths inside this run's own scratch copy and temp dir mean nothing in another run
_private = [p for p in (_here, os.environ.get("TMPDIR", "").rstrip(os.sep)) if len(p) > 1]
_seen = set()
_calls = {}
_MAX_CALLS, _MAX_REPR = 2000, 2000


''' + VALUE_SOURCE + r'''

def _literal(value):
    try:
        text = _source(value)
        if text is None:
            text = _tensor_source(value)
        return text if text is not None and len(text) <= _MAX_REPR else None
    except Exception:
        return None


_MAX_TENSOR = 64


def _tensor_source(value, depth=0):
    """``torch.tensor([[5, 7]])`` for a small plain CPU tensor (its dtype written where
    ``torch.tensor`` would infer another), and a tokenizer's output (a mapping of the library's)
    as a dict of those: what a loop feeds a model step after step, tokenized the same way every
    time, then needs no tokenizer. Here and not in the boundary's launcher, whose tensor recipes
    keep shape and dtype without the values."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor or value.layout != torch.strided or value.device.type != "cpu" \
                or value.requires_grad or value.numel() == 0:
            return None
        if value.numel() > _MAX_TENSOR:
            return _filled(torch, value)
        body = _source(value.tolist())
        if body is None:
            return None
        inferred = torch.tensor(value.tolist()).dtype
        return "torch.tensor(%s%s)" % (body, "" if inferred == value.dtype else ", dtype=" + str(value.dtype))
    mapping = sys.modules.get("collections.abc")
    if depth == 0 and mapping is not None and isinstance(value, mapping.Mapping) \
            and type(value).__module__.split(".")[0] == "transformers" and 0 < len(value) <= 8:
        parts = []
        for k, v in value.items():
            key, item = _source(k), _source(v)
            item = item if item is not None else _tensor_source(v, depth + 1)
            if key is None or item is None:
                return None
            parts.append(key + ": " + item)
        return "{" + ", ".join(parts) + "}"
    return None


_MAX_FILLED = 1 << 16


def _filled(torch, value):
    """``torch.full((28, 16), 1)`` for a larger integer or bool tensor holding one value (a batch
    of ids a reduction has made all alike: spawn_gc_lm_ddp's 448): its size says nothing more."""
    if value.is_floating_point() or value.is_complex() or value.numel() > _MAX_FILLED:
        return None
    first = value.reshape(-1)[0]
    if not bool((value == first).all()):
        return None
    return "torch.full(%r, %r, dtype=%s)" % (tuple(value.shape), first.item(), value.dtype)


def _is_init(obj, code):
    try:
        return getattr(type(obj).__init__, "__code__", None) is code
    except Exception:
        return False


def _record_call(frame):
    caller = frame.f_back
    key = (caller.f_lineno, frame.f_code.co_name)
    if key not in _calls and len(_calls) >= _MAX_CALLS:
        return
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[:n])
    values = {}
    for name in names:
        if name in frame.f_locals:
            text = _literal(frame.f_locals[name])
            if text is not None:
                values[name] = text
    if code.co_flags & 0x08:
        # **kwargs: what a `**helper()` at the call site really passed, entry by entry
        varkw = code.co_varnames[n + (1 if code.co_flags & 0x04 else 0)]
        extra = frame.f_locals.get(varkw)
        if isinstance(extra, dict):
            for k, v in list(extra.items())[:50]:
                text = _literal(v)
                values["**" + str(k)] = text if text is not None else "<unknown>"
    qual = getattr(code, "co_qualname", code.co_name)
    if names and names[0] in frame.f_locals and (code.co_name == "__init__" or _is_init(frame.f_locals[names[0]], code)):
        # a class reached through a registry: which class was built, not whose __init__ ran; also
        # an __init__ under a decorator (transformers' configs: ``init_with_validate(self, **kwargs)``)
        qual = "class:" + type(frame.f_locals[names[0]]).__qualname__
    earlier = _calls.get(key)
    varies = set(earlier["varies"]) if earlier else set()
    if earlier:
        # a site called again with another value pins nothing down
        varies.update(k for k in set(values) | set(earlier["values"]) if values.get(k) != earlier["values"].get(k))
    _calls[key] = {"line": caller.f_lineno, "func": code.co_name, "params": names, "qual": qual,
                   "posonly": code.co_posonlyargcount if hasattr(code, "co_posonlyargcount") else 0,
                   "values": values, "varies": sorted(varies)}


def _index_bindings():
    """line -> (names it binds, last line of the statement, the loop body's lines or None),
    for plain assignments and for-loops of the script."""
    try:
        with open(_script, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except Exception:
        return {}

    def names(target):
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            out = [names(e) for e in target.elts]
            return None if any(n is None for n in out) else [x for n in out for x in n]
        return None

    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, body = node.targets[0], None
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, body = node.target, None
        elif isinstance(node, ast.For) and node.body:
            target, body = node.target, (node.body[0].lineno, node.body[-1].end_lineno)
        else:
            continue
        found = names(target)
        if found:
            end = body[0] - 1 if body else getattr(node, "end_lineno", node.lineno)
            out[node.lineno] = (found, end, body)
    return out


''' + OUTSIDE_SOURCE + r'''
_binding_lines = _index_bindings()
_pending = {}       # frame -> line of its last binding statement, not yet read back
_binds = {}         # (line, name) -> [value text or None, times seen, varies]
_MAX_BINDS = 5000


def _read_back(frame, line):
    names = _binding_lines[line][0]
    local = frame.f_locals
    for name in names:
        if name not in local:
            continue
        text = _literal(local[name])
        rec = _binds.get((line, name))
        if rec is None:
            if len(_binds) < _MAX_BINDS:
                _binds[(line, name)] = [text, 1, False]
        else:
            rec[1] += 1
            rec[2] = rec[2] or rec[0] != text


def _binding_event(frame, event):
    """After a binding statement runs, the frame's next event shows what it bound."""
    line = _pending.get(frame)
    if line is not None:
        names, end, body = _binding_lines[line]
        here = frame.f_lineno
        if event == "exception":
            del _pending[frame]         # the statement raised: it bound nothing
        elif event == "line" and line <= here <= end:
            return                      # still inside the statement (a continuation line)
        else:
            del _pending[frame]
            # a loop's names are bound only when its body runs, not when it ends
            if body is None or (event == "line" and body[0] <= here <= body[1]):
                _read_back(frame, line)
    if event == "line" and frame.f_lineno in _binding_lines:
        _pending[frame] = frame.f_lineno


def _local(frame, event, arg):
    if event == "line" and frame.f_lineno not in _seen:
        _seen.add(frame.f_lineno)
        _emit({"line": frame.f_lineno})
    if _binding_lines:
        try:
            _binding_event(frame, event)
        except Exception:
            _pending.pop(frame, None)
    return _local


def _global(frame, event, arg):
    if event != "call":
        return None
    try:
        back = frame.f_back
        if back is not None and back.f_code.co_filename == _script:
            _record_call(frame)
    except Exception:
        pass
    if frame.f_code.co_filename == _script:
        if frame.f_lineno not in _seen:
            _seen.add(frame.f_lineno)
            _emit({"line": frame.f_lineno})
        return _local
    return None


_dumped = []


@atexit.register
def _dump():
    if _dumped:
        return
    _dumped.append(True)
    sys.settrace(None)
    blobs = _read_blobs()
    for rec in list(_calls.values()):
        for name, text in list(rec["values"].items()):
            if text != "<unknown>" and _from_outside(text, blobs):
                rec["values"][name] = "<unknown>"
        _emit({"call": rec})
    for (line, name), (text, seen, varies) in list(_binds.items()):
        if text is not None and _from_outside(text, blobs):
            text = None
        _emit({"bind": {"line": line, "name": name, "value": text, "seen": seen, "varies": varies}})


def _on_term(signum, frame):
    # A rank the launcher stops (SIGTERM: torch.multiprocessing.spawn, torchrun) once another
    # failed: what it recorded is written first, or a value both ranks had would read as the
    # one rank's that lived (``rank`` pinned to 1 in both) and the candidate built on it hangs.
    try:
        _dump()
    finally:
        import signal
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _catch_term():
    try:
        import signal
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_term)
    except Exception:
        pass


def _child_main():
    _catch_term()
    if hasattr(sys, "addaudithook"):
        sys.addaudithook(_audit)
    threading.settrace(_global)
    sys.settrace(_global)

''' + run_main()


def write_launcher(directory: Path | None = None) -> Path:
    directory = Path(directory or tempfile.mkdtemp(prefix="reprobot-trace-"))
    path = directory / "reprobot_trace_launcher.py"
    path.write_text(LAUNCHER, encoding="utf-8")
    return path


@dataclass
class CallRecord:
    line: int
    func: str
    params: list[str]
    values: dict[str, str]      # parameter name → repr of a literal value
    posonly: int = 0
    qual: str = ""              # the callee's qualified name; "class:Name" for a constructor
    varies: list[str] = field(default_factory=list)     # parameters seen with more than one value

    @classmethod
    def from_dict(cls, c: dict[str, Any]) -> CallRecord:
        return cls(int(c["line"]), str(c["func"]), list(c["params"]), dict(c["values"]),
                   int(c.get("posonly", 0)), str(c.get("qual", "")), list(c.get("varies", [])))


@dataclass
class BindRecord:
    """What one name held after a plain assignment or a for-loop header of the script ran."""
    line: int
    name: str
    value: str | None           # source text that rebuilds it; None when it has none
    seen: int = 1               # how many times the statement bound it
    varies: bool = False        # bound to more than one value

    @classmethod
    def from_dict(cls, b: dict[str, Any]) -> BindRecord:
        value = b.get("value")
        return cls(int(b["line"]), str(b["name"]), None if value is None else str(value),
                   int(b.get("seen", 1)), bool(b.get("varies", False)))


@dataclass
class TraceData:
    source: str                             # the traced source (line numbers refer to it)
    lines: set[int] = field(default_factory=set)
    calls: list[CallRecord] = field(default_factory=list)
    binds: list[BindRecord] = field(default_factory=list)

    @classmethod
    def load(cls, source: str, path: Path) -> TraceData:
        """The records every process of the run wrote (the script, and its children that traced
        themselves): lines are united; a name two processes bound to different values varies."""
        data = cls(source)
        if not path.exists():
            return data
        binds: dict[tuple[int, str], BindRecord] = {}
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError:
                continue        # a line cut short by a crash
            if "line" in rec and isinstance(rec["line"], int):
                data.lines.add(rec["line"])
            elif isinstance(rec.get("call"), dict):
                data.calls.append(CallRecord.from_dict(rec["call"]))
            elif isinstance(rec.get("bind"), dict):
                b = BindRecord.from_dict(rec["bind"])
                known = binds.get((b.line, b.name))
                if known is None:
                    binds[(b.line, b.name)] = b
                    data.binds.append(b)
                else:   # the same statement in another process (a child re-running module code)
                    known.varies = known.varies or b.varies or known.value != b.value
                    known.seen = max(known.seen, b.seen)
        return data

    def to_dict(self) -> dict[str, Any]:
        return {"lines": sorted(self.lines), "calls": [c.__dict__ for c in self.calls],
                "binds": [b.__dict__ for b in self.binds]}

    @classmethod
    def from_dict(cls, source: str, data: dict[str, Any]) -> TraceData:
        """What ``to_dict`` saved, for a resumed reduction of the same original ``source``."""
        calls = [CallRecord.from_dict(c) for c in data.get("calls", []) if isinstance(c, dict)]
        binds = [BindRecord.from_dict(b) for b in data.get("binds", []) if isinstance(b, dict)]
        return cls(source, {int(n) for n in data.get("lines", [])}, calls, binds)

    def literal_sites(self) -> dict[tuple[str, str], str]:
        """(callee expression text, argument expression text) → literal text, where the traced
        run pins it down to one value. Keyed by text, not line, so it survives later edits."""
        if not hasattr(self, "_sites"):
            allowed = self._allowed()
            self._sites = {k: v for k, v in _literal_sites(self).items() if allowed(k[1], [v])}
        return self._sites

    def binding_sites(self) -> dict[tuple[str, str, str], dict[str, str]]:
        """("=" or "for", target text, value or iterable text) → {name: source text of what it
        held}, where the traced run pins every name of the target down to one value (a loop:
        one pass through it)."""
        if not hasattr(self, "_binding_sites"):
            allowed = self._allowed()
            self._binding_sites = {k: v for k, v in _binding_sites(self).items() if allowed(k[2], v.values())}
        return self._binding_sites

    def _allowed(self) -> Callable[[str, Iterable[str]], bool]:
        """Whether the value an expression had may be written into the repro: not when the
        expression may carry what the script read from outside (reducer/analysis/provenance.py), nor when
        the value spells a secret of this environment."""
        provenance, secrets = Provenance(self.source), secret_values()
        return lambda expr, values: not provenance.tainted(expr) and not any(leaked(v, secrets) for v in values)

    def dispatch_sites(self) -> dict[str, str]:
        """callee expression text → the one top-level function or class of the script it called
        in the traced run (``COMMANDS[args.command]`` → ``cmd_report``, ``fn`` → ``handle_ingest``,
        ``Report.registry[name]`` → ``LatencyReport``)."""
        return {k: v[0] for k, v in self.dispatch_choices().items() if len(v) == 1}

    def dispatch_choices(self) -> dict[str, list[str]]:
        """callee expression text → every top-level function or class it called in the traced
        run, sorted: a worker loop's ``fn(job)`` that ran three handlers has three choices, and
        which one the failure needs is for the oracle to say."""
        if not hasattr(self, "_dispatch"):
            self._dispatch = _dispatch_sites(self)
        return self._dispatch


def _with_positions(source: str):
    try:
        return parse_with_positions(source)
    except cst.ParserSyntaxError:
        return None


def _literal_sites(trace: TraceData) -> dict[tuple[str, str], str]:
    parsed = _with_positions(trace.source)
    if parsed is None:
        return {}
    module, pos = parsed
    calls = [n for n in pos if isinstance(n, cst.Call)]
    by_line: dict[int, list[CallRecord]] = {}
    for rec in trace.calls:
        by_line.setdefault(rec.line, []).append(rec)
    found: dict[tuple[str, str], set[str]] = {}
    for call in calls:
        r = pos[call]
        recs = [rec for line in range(r.start.line, r.end.line + 1) for rec in by_line.get(line, [])]
        name = call.func.attr.value if isinstance(call.func, cst.Attribute) else (
            call.func.value if isinstance(call.func, cst.Name) else None)
        for rec in recs:
            built = rec.qual == f"class:{name}"     # the class's own __init__, decorated or not
            if rec.func != name and not built and not (
                    rec.func in ("__init__", "__new__", "__call__") and name and name[:1].isupper()):
                continue
            params = list(rec.params)
            if params and params[0] in ("self", "cls") and (
                    isinstance(call.func, cst.Attribute) or built or rec.func in ("__init__", "__new__", "__call__")):
                params = params[1:]
            func_text = module.code_for_node(call.func)
            _star_kwargs_site(call, rec, module, found)
            i = 0
            for arg in call.args:
                if arg.star:
                    break
                pname = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) else None)
                if arg.keyword is None:
                    i += 1
                if pname is not None and pname not in rec.values and arg.keyword is not None:
                    pname = "**" + pname        # a keyword the callee takes through **kwargs
                if (pname is None or pname not in rec.values or rec.values[pname] == "<unknown>"
                        or pname in rec.varies):
                    continue
                found.setdefault((func_text, module.code_for_node(arg.value)), set()).add(rec.values[pname])
    # a site that saw two different values is not a constant
    return {k: next(iter(v)) for k, v in found.items() if len(v) == 1}


def _target_names(target: cst.BaseExpression) -> list[str] | None:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        parts = [_target_names(e.value) if isinstance(e, cst.Element) else None for e in target.elements]
        return None if any(p is None for p in parts) else [n for p in parts for n in p]
    return None


def _binding_sites(trace: TraceData) -> dict[tuple[str, str, str], dict[str, str]]:
    parsed = _with_positions(trace.source)
    if parsed is None or not trace.binds:
        return {}
    module, pos = parsed
    by_line: dict[int, dict[str, BindRecord]] = {}
    for b in trace.binds:
        by_line.setdefault(b.line, {})[b.name] = b
    found: dict[tuple[str, str, str], set[tuple[tuple[str, str], ...]]] = {}
    for node in pos:
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            kind, target, value = "=", node.targets[0].target, node.value
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            kind, target, value = "=", node.target, node.value
        elif isinstance(node, cst.For) and node.asynchronous is None:
            kind, target, value = "for", node.target, node.iter
        else:
            continue
        names = _target_names(target)
        recs = by_line.get(pos[node].start.line, {})
        if not names or any(n not in recs for n in names):
            continue
        picked = [recs[n] for n in names]
        if any(r.value is None or r.varies for r in picked) or (kind == "for" and any(r.seen != 1 for r in picked)):
            continue
        values = tuple((r.name, r.value) for r in picked)
        found.setdefault((kind, module.code_for_node(target), module.code_for_node(value)), set()).add(values)
    return {k: dict(next(iter(v))) for k, v in found.items() if len(v) == 1}


def _dispatch_sites(trace: TraceData) -> dict[str, list[str]]:
    parsed = _with_positions(trace.source)
    if parsed is None:
        return {}
    module, pos = parsed
    functions = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
    classes = {s.name.value for s in module.body if isinstance(s, cst.ClassDef)}
    calls = [n for n in pos if isinstance(n, cst.Call)]

    def spelled(call: cst.Call) -> str | None:
        f = call.func
        return f.value if isinstance(f, cst.Name) else f.attr.value if isinstance(f, cst.Attribute) else None

    by_line: dict[int, list[CallRecord]] = {}
    for rec in trace.calls:
        by_line.setdefault(rec.line, []).append(rec)
    found: dict[str, set[str]] = {}
    for call in calls:
        f = call.func
        if isinstance(f, cst.Attribute) or (isinstance(f, cst.Name) and (
                f.value in functions | classes or hasattr(builtins, f.value))):
            continue
        r = pos[call]
        lines = range(r.start.line, r.end.line + 1)
        # a record on these lines that another call spells by name is that call's, not ours
        named = {spelled(c) for c in calls if c is not call and pos[c].start.line in lines}
        targets = set()
        for rec in (rec for line in lines for rec in by_line.get(line, [])):
            if rec.func in named or rec.qual.removeprefix("class:") in named:
                continue
            if rec.qual in functions:
                targets.add(rec.qual)
            elif rec.qual.startswith("class:") and rec.qual[6:] in classes:
                targets.add(rec.qual[6:])
        if targets:
            found.setdefault(module.code_for_node(f), set()).update(targets)
    return {k: sorted(v) for k, v in found.items()}


def _star_kwargs_site(call: cst.Call, rec: CallRecord, module: cst.Module,
                      found: dict[tuple[str, str], set[str]]) -> None:
    """A single ``**expr`` at a call site: the callee's ``**kwargs`` minus the call's own extra
    keywords came from it, so ``expr`` had that dict as its value (when every entry is a literal)."""
    stars = [a for a in call.args if a.star == "**"]
    extra = {k[2:]: v for k, v in rec.values.items() if k.startswith("**")}
    if len(stars) != 1 or not extra:
        return
    explicit = {a.keyword.value for a in call.args if a.keyword is not None}
    entries = {k: v for k, v in extra.items() if k not in explicit}
    if not entries or "<unknown>" in entries.values():
        return
    text = "{" + ", ".join(f"{k!r}: {v}" for k, v in entries.items()) + "}"
    found.setdefault((module.code_for_node(call.func), "**" + module.code_for_node(stars[0].value)),
                     set()).add(text)


RunFn = Callable[[str, list[str], dict[str, str]], Any]


def trace_run(source: str, run: RunFn) -> TraceData:
    """Run ``source`` once under the launcher; ``run(source, launcher_argv, extra_env)`` does the
    actual run (``Runner.run(source, launcher=..., extra_env=...)`` fits)."""
    with tempfile.TemporaryDirectory(prefix="reprobot-trace-") as d:
        launcher = write_launcher(Path(d))
        out = Path(d) / "trace.jsonl"
        run(source, [str(launcher)], {ENV_VAR: str(out)})
        return TraceData.load(source, out)


def runner_run_fn(runner: Any, warm: bool | None = None) -> RunFn:
    """Adapter for ``reducer.run.runner.Runner``; ``warm=True`` forks the traced run from a warm
    interpreter (the launcher is a script, so it can be run as ``__main__`` there too)."""
    return lambda source, launcher, env: runner.run(source, launcher=launcher, extra_env=env, warm=warm)


def subprocess_run_fn(python: str = sys.executable, script_name: str = "script.py",
                      args: Iterable[str] = (), timeout: float = 120.0) -> RunFn:
    """A plain subprocess run in a temp dir (for tests and for use without the Runner)."""
    def run(source: str, launcher: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="reprobot-run-") as d:
            (Path(d) / script_name).write_text(source, encoding="utf-8")
            return subprocess.run([python, *launcher, script_argument(script_name), *args], cwd=d, capture_output=True,
                                  text=True, timeout=timeout, env={**os.environ, **env})
    return run
