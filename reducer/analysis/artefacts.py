"""What a script reads from the user's disk that a maintainer will not have: local model and
config folders given to ``from_pretrained``, tokenizer and adapter folders, data files opened or
parsed. Found statically, with libcst, by working out each path argument the way the run would:
string literals, ``__file__``, ``os.path``/``pathlib`` arithmetic, ``os.environ``/``getenv``
(read from the run's environment) and argparse defaults (or the run's own arguments).

A path counts when it exists on this machine outside the interpreter's own tree and the Hub's
cache: a public model the cache holds is one a maintainer downloads by its id.
"""
from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

# Readers whose first argument is a path to a data file.
_FILE_READERS = {"open", "read_csv", "read_json", "read_table", "read_parquet", "loadtxt", "genfromtxt",
                 "load_file", "safe_open"}
_DOTTED_READERS = {"torch.load", "np.load", "numpy.load"}
_PATH_METHOD_READERS = {"read_text", "read_bytes", "open"}
_PATH_ARGS = ("pretrained_model_name_or_path", "model_id", "data_files", "data_dir")
# Writers: a path the script itself creates before it reads it is not the user's file (a repro that
# saves a tiny model and loads it back needs nothing from anyone's disk).
_SAVERS = {"save_pretrained", "save_model", "to_json_file", "to_csv", "to_json", "to_parquet"}
_SAVER_ARGS = ("save_directory", "output_dir", "json_file_path", "path_or_buf", "path", "name")
_PATH_METHOD_WRITERS = {"write_text", "write_bytes"}
_MAX_DEPTH = 12


@dataclass
class Context:
    """What the run's paths are evaluated against."""
    script: Path                                    # the original script, resolved
    env: Mapping[str, str] = field(default_factory=dict)
    argv: Sequence[str] = ()
    # folders a maintainer has too: the interpreter's tree, the Hub's cache
    shared: Sequence[Path] = ()

    @property
    def folder(self) -> Path:
        return self.script.parent


@dataclass(frozen=True)
class Artefact:
    """One read of a local file or folder, at one call."""
    kind: str          # config | model | tokenizer | adapter | data
    path: Path         # where it is on this machine
    call: str          # the call, as written (``AutoConfig.from_pretrained``)
    argument: str      # the path expression, as written
    wrapped_in_json_load: bool = False

    @property
    def label(self) -> str:
        return self.path.name or str(self.path)

    def to_dict(self, folder: Path | None = None) -> dict[str, str]:
        shown = self.path
        if folder is not None:
            try:
                shown = self.path.relative_to(folder)
            except ValueError:
                pass
        return {"kind": self.kind, "path": str(shown), "call": self.call, "argument": self.argument,
                "folder": "yes" if self.path.is_dir() else "no"}


def default_shared(python: str | None = None) -> list[Path]:
    roots = {Path(sys.prefix), Path(sys.base_prefix), Path.home() / ".cache" / "huggingface"}
    if os.environ.get("HF_HOME"):
        roots.add(Path(os.environ["HF_HOME"]))
    if python:
        roots.add(Path(python).resolve().parent.parent)
    return [r.resolve() for r in roots] + [Path("/usr"), Path("/proc"), Path("/dev"), Path("/sys"), Path("/etc")]


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _last(name: str | None) -> str:
    return (name or "").rsplit(".", 1)[-1]


class _Bindings(cst.CSTVisitor):
    """Every ``name = value`` of the script (any scope), and its argparse options."""

    def __init__(self) -> None:
        self.values: dict[str, list[cst.BaseExpression]] = {}
        self.options: dict[str, cst.Call] = {}
        self._params: dict[str, list[str]] = {}
        self._calls: list[cst.Call] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._params[node.name.value] = [p.name.value for p in node.params.params]

    def leave_Module(self, node: cst.Module) -> None:
        # a helper's parameter is bound to what its calls pass (``load(CHECKPOINT)``)
        for call in self._calls:
            params = self._params.get(call.func.value) if isinstance(call.func, cst.Name) else None
            for name, arg in zip(params or [], [a for a in call.args if a.keyword is None and not a.star]):
                self.values.setdefault(name, []).append(arg.value)
            for a in call.args:
                if a.keyword is not None and a.keyword.value in (params or []):
                    self.values.setdefault(a.keyword.value, []).append(a.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.values.setdefault(t.target.value, []).append(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self.values.setdefault(node.target.value, []).append(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        self._calls.append(node)
        if _last(dotted(node.func)) == "add_argument":
            dest = option_dest(node)
            if dest:
                self.options[dest] = node


def string_value(node: cst.BaseExpression) -> str | None:
    """The text of a string literal (plain or implicitly concatenated), else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            value = ast.literal_eval(cst.Module([]).code_for_node(node))
        except (ValueError, SyntaxError):
            return None
        return value if isinstance(value, str) else None
    return None


def option_dest(call: cst.Call) -> str | None:
    """The attribute an ``add_argument`` call's option lands on (``--ckpt-dir`` → ``ckpt_dir``)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "dest":
            return string_value(a.value)
    names = [string_value(a.value) for a in call.args if a.keyword is None]
    names = [n for n in names if n]
    longs = [n for n in names if n.startswith("--")]
    pick = longs[0] if longs else (names[0] if names else None)
    return None if pick is None else pick.lstrip("-").replace("-", "_")


class Evaluator:
    """The value a path expression had in the run, where it can be worked out without running."""

    def __init__(self, module: cst.Module, ctx: Context) -> None:
        self.ctx = ctx
        self.bindings = _Bindings()
        module.visit(self.bindings)

    def value(self, node: cst.BaseExpression, depth: int = 0) -> str | None:
        if depth > _MAX_DEPTH:
            return None
        text = string_value(node)
        if text is not None:
            return text
        for kind, fn in ((cst.Name, self._name), (cst.Call, self._call), (cst.Subscript, self._subscript),
                         (cst.Attribute, self._attribute), (cst.BinaryOperation, self._binop),
                         (cst.FormattedString, self._fstring)):
            if isinstance(node, kind):
                return fn(node, depth + 1)
        return None

    def _name(self, node: cst.Name, depth: int) -> str | None:
        if node.value == "__file__":
            return str(self.ctx.script)
        found = {v for v in (self.value(e, depth) for e in self.bindings.values.get(node.value, [])) if v}
        return found.pop() if len(found) == 1 else None

    def _args(self, call: cst.Call, depth: int) -> list[str] | None:
        values = [self.value(a.value, depth) for a in call.args if a.keyword is None and not a.star]
        return None if any(v is None for v in values) else values  # type: ignore[return-value]

    def _env(self, call_or_key: cst.BaseExpression, default: cst.BaseExpression | None, depth: int) -> str | None:
        key = self.value(call_or_key, depth)
        if key is None:
            return None
        if key in self.ctx.env:
            return self.ctx.env[key]
        return None if default is None else self.value(default, depth)

    def _call(self, node: cst.Call, depth: int) -> str | None:
        name = dotted(node.func) or ""
        last = _last(name)
        positional = [a for a in node.args if a.keyword is None]
        if name.endswith(("environ.get", "getenv")) and positional:
            return self._env(positional[0].value, positional[1].value if len(positional) > 1 else None, depth)
        if isinstance(node.func, cst.Attribute) and last in ("resolve", "absolute", "expanduser") and not node.args:
            inner = self.value(node.func.value, depth)
            return None if inner is None else str(self._absolute(os.path.expanduser(inner)))
        if isinstance(node.func, cst.Attribute) and last == "joinpath":
            base, rest = self.value(node.func.value, depth), self._args(node, depth)
            return None if base is None or rest is None else os.path.join(base, *rest)
        args = self._args(node, depth)
        if args is None or not args:
            return None
        if last in ("join", "Path", "PurePath", "PosixPath") and (last != "join" or "path" in name or name == "join"):
            return os.path.join(*args)
        if last == "dirname":
            return os.path.dirname(args[0])
        if last in ("abspath", "realpath"):
            return str(self._absolute(args[0]))
        if last in ("normpath", "fspath", "str"):
            return args[0]
        if last == "expanduser":
            return os.path.expanduser(args[0])
        return None

    def _absolute(self, text: str) -> Path:
        p = Path(text)
        return p if p.is_absolute() else self.ctx.folder / p

    def _subscript(self, node: cst.Subscript, depth: int) -> str | None:
        if (dotted(node.value) or "").endswith("environ") and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index):
                return self._env(index.value, None, depth)
        return None

    def _attribute(self, node: cst.Attribute, depth: int) -> str | None:
        if node.attr.value == "parent":
            inner = self.value(node.value, depth)
            return None if inner is None else os.path.dirname(inner)
        if isinstance(node.value, cst.Name) and node.attr.value in self.bindings.options:
            return self._option(node.attr.value, depth)
        return None

    def _option(self, dest: str, depth: int) -> str | None:
        """An argparse option: as the run's arguments give it, else its default."""
        call = self.bindings.options[dest]
        flags = [s for s in (string_value(a.value) for a in call.args if a.keyword is None) if s]
        argv = list(self.ctx.argv)
        for i, arg in enumerate(argv):
            for flag in flags:
                if arg == flag and i + 1 < len(argv):
                    return argv[i + 1]
                if arg.startswith(flag + "="):
                    return arg[len(flag) + 1:]
        for a in call.args:
            if a.keyword is not None and a.keyword.value == "default":
                return self.value(a.value, depth)
        return None

    def _binop(self, node: cst.BinaryOperation, depth: int) -> str | None:
        left, right = self.value(node.left, depth), self.value(node.right, depth)
        if left is None or right is None:
            return None
        if isinstance(node.operator, cst.Divide):
            return os.path.join(left, right)
        if isinstance(node.operator, cst.Add):
            return left + right
        return None

    def _fstring(self, node: cst.FormattedString, depth: int) -> str | None:
        out = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                out.append(part.value)
            elif isinstance(part, cst.FormattedStringExpression) and part.format_spec is None and part.conversion is None:
                v = self.value(part.expression, depth)
                if v is None:
                    return None
                out.append(v)
            else:
                return None
        return "".join(out)


# ---- which calls read what --------------------------------------------------------------------
def classify(call_name: str) -> str | None:
    """The kind of artefact a ``X.from_pretrained`` reads, by the class it is called on."""
    owner = call_name.rsplit(".", 2)[-2] if call_name.count(".") >= 1 else ""
    if owner.startswith(("PeftModel", "AutoPeftModel", "PeftMixedModel")):
        return "adapter"
    if owner.endswith("Config"):
        return "config"
    if re.search(r"Tokenizer|Processor|FeatureExtractor", owner):
        return "tokenizer"
    if owner:
        return "model"
    return None


def path_argument(call: cst.Call) -> cst.Arg | None:
    """The argument of ``call`` that names what it reads, if it is a reader this module knows."""
    name = dotted(call.func) or ""
    last = _last(name)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    keyword = {a.keyword.value: a for a in call.args if a.keyword is not None}
    if last == "from_pretrained":
        for k in _PATH_ARGS[:2]:
            if k in keyword:
                return keyword[k]
        index = 1 if classify(name) == "adapter" and not name.split(".")[0].startswith("AutoPeft") else 0
        return positional[index] if len(positional) > index else None
    if last == "load_dataset":
        return keyword.get("data_files") or keyword.get("data_dir")
    if last in _FILE_READERS or name in _DOTTED_READERS:
        if last == "open" and _writes(call, positional, keyword):
            return None
        return positional[0] if positional else None
    return None


def _writes(call: cst.Call, positional: list[cst.Arg], keyword: dict[str, cst.Arg]) -> bool:
    mode = keyword.get("mode") or (positional[1] if len(positional) > 1 else None)
    text = string_value(mode.value) if mode is not None else "r"
    return text is None or any(c in text for c in "wax+")


def written_path(call: cst.Call) -> cst.BaseExpression | None:
    """The path expression ``call`` creates or writes, if it is a writer this module knows."""
    name = dotted(call.func) or ""
    method = call.func
    # ``Model(config).save_pretrained(p)``: the receiver is a call, so only the method's name is known
    last = method.attr.value if isinstance(method, cst.Attribute) else _last(name)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    keyword = {a.keyword.value: a for a in call.args if a.keyword is not None}
    if (isinstance(method, cst.Attribute) and method.attr.value in _PATH_METHOD_WRITERS
            and isinstance(method.value, cst.Call) and _last(dotted(method.value.func)) == "Path"
            and method.value.args):
        return method.value.args[0].value
    if name in ("open", "io.open"):
        return positional[0].value if positional and _writes(call, positional, keyword) else None
    if name in ("torch.save", "save") or last == "save_file":
        arg = keyword.get("f") or keyword.get("filename") or (positional[1] if len(positional) > 1 else None)
        return arg.value if arg is not None else None
    if last in _SAVERS:
        for k in _SAVER_ARGS:
            if k in keyword:
                return keyword[k].value
        return positional[0].value if positional else None
    return None


def _kind(call: cst.Call) -> str:
    name = dotted(call.func) or ""
    return (classify(name) or "data") if _last(name) == "from_pretrained" else "data"


class _Reads(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[cst.Call, cst.Arg]] = []
        self.json_wrapped: dict[int, cst.Call] = {}     # open(...) call -> the json.load(...) around it
        self.written: list[tuple[int, cst.BaseExpression]] = []   # (visit order, the path written)
        self.order: dict[int, int] = {}                           # id(call) -> its visit order

    def visit_Call(self, node: cst.Call) -> None:
        self.order[id(node)] = len(self.order)
        target = written_path(node)
        if target is not None:
            self.written.append((self.order[id(node)], target))
        arg = path_argument(node)
        if arg is not None:
            self.found.append((node, arg))
        if dotted(node.func) in ("json.load", "load") and node.args and isinstance(node.args[0].value, cst.Call):
            self.json_wrapped[id(node.args[0].value)] = node
        method = node.func
        # Path(x).read_text(): the path is the receiver
        if (isinstance(method, cst.Attribute) and method.attr.value in _PATH_METHOD_READERS
                and isinstance(method.value, cst.Call) and _last(dotted(method.value.func)) == "Path"
                and method.value.args):
            self.found.append((node, method.value.args[0]))


def _local(path: Path, ctx: Context) -> bool:
    """On this disk, and not somewhere a maintainer's machine has too."""
    try:
        real = path.resolve()
    except OSError:
        return False
    if not real.exists():
        return False
    return not any(real == root or root in real.parents for root in ctx.shared)


Read = tuple[cst.Call, cst.Arg, Artefact, "cst.Call | None"]


def find_reads(source: str, ctx: Context) -> tuple[cst.Module, list[Read]]:
    """The module, and each of its calls that reads a local artefact: the call, its path argument,
    the artefact and the ``json.load`` around it (if any), in source order."""
    module = cst.parse_module(source)
    reads = _Reads()
    module.visit(reads)
    ev = Evaluator(module, ctx)
    written = [(order, p) for order, expr in reads.written if (p := _resolved(ev.value(expr), ctx)) is not None]
    out = []
    for call, arg in reads.found:
        path = _resolved(ev.value(arg.value), ctx)
        if path is None or not _local(path, ctx):
            continue
        order = reads.order[id(call)]
        # the very path the script wrote earlier (not anything inside it: saving a model into the
        # script's own folder does not make the user's data file there the script's)
        if any(o < order and w == path for o, w in written):
            continue
        wrapper = reads.json_wrapped.get(id(call))
        art = Artefact(_kind(call), path, dotted(call.func) or module.code_for_node(call.func),
                       module.code_for_node(arg.value), wrapper is not None)
        out.append((call, arg, art, wrapper))
    return module, out


def _resolved(text: str | None, ctx: Context) -> Path | None:
    if text is None:
        return None
    path = Path(os.path.expanduser(text))
    path = path if path.is_absolute() else ctx.folder / path
    try:
        return path.resolve()
    except OSError:
        return None


def find_artefacts(source: str, ctx: Context) -> list[Artefact]:
    return [read[2] for read in find_reads(source, ctx)[1]]


_ENV_READ = re.compile(r"""(?:environ\s*(?:\[|\.get\(|\.setdefault\()|getenv\()\s*(['"])([A-Za-z_][A-Za-z0-9_]*)\1""")


def env_names(source: str) -> set[str]:
    """The environment variables ``source`` names where it reads the environment."""
    return {m.group(2) for m in _ENV_READ.finditer(source)}
