"""Make a repro self-contained: what it reads from the user's disk becomes code.

After the search, each local artefact the repro reads (reducer/analysis/artefacts.py) is offered a few
rewrites, most readable first, and each one is a real run of the whole candidate saved alone as
``repro.py`` in an empty folder with the Hub offline (``Runner.run(alone=True)``). The first that
still fails the same way is kept:

- a config folder: ``AutoConfig.for_model("llama", hidden_size=16, ...)`` /
  ``LlamaConfig(hidden_size=16, ...)``, the values that differ from the class's defaults;
- a model folder: ``AutoModelForCausalLM.from_config(<that config>)`` / ``LlamaForCausalLM(<it>)``,
  random weights (kept only if the failure does not depend on the saved ones);
- a PEFT adapter folder: ``get_peft_model(model, LoraConfig(r=4, ...))``;
  (the calls that build a config from its model type and put an adapter on a model are the
  targets' spelling, asked through reducer/stack.py: with none registered those rewrites are
  not tried)
- ``json.load(open(path))`` of a small file: the value, as a literal;
- any small text file or folder of them (a tokenizer, a CSV, a JSONL): written by the repro
  itself to a temporary folder just before the statement that reads it.

This never goes through the search's gate (its size order would refuse every one: a literal is
longer than a path); the oracle alone decides. What no rewrite replaces is named in ``needs``.
"""
from __future__ import annotations

import json
import keyword
import pprint
import re
import ast
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst

from reducer.analysis.artefacts import Artefact, Context, Read, dotted, find_reads
from reducer.analysis.cst import collect, render
from reducer.analysis.names import uses
from reducer.passes.cleanup import drop_dead_code, drop_unused_imports
from reducer.stack import Spelling, adapter_wrapper, config_by_type

# A file or folder above this is named, not written into the repro.
MAX_INLINE_BYTES = 64 * 1024
MAX_FOLDER_FILES = 12
# How many rewrites, all artefacts together (each is a cold run).
MAX_TRIES = 16

Probe = Callable[[str, Path], "dict[str, Any] | None"]
RunAlone = Callable[[str], Any]          # source -> the matching record of an alone run, or None


@dataclass
class Standalone:
    source: str
    record: Any                          # the alone run's matching record; None: not self-contained
    needs: list[dict[str, str]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verified(self) -> str:
        return "alone, offline" if self.record is not None and not self.needs else "beside its files"


# ---- writing code ------------------------------------------------------------------------------
def literal(value: Any, indent: int = 0) -> str | None:
    """Source for a JSON-like value, laid out over lines when long; None when it has no literal."""
    text = pprint.pformat(value, width=max(40, 100 - indent), sort_dicts=False)
    try:
        if ast.literal_eval(text) != value:
            return None
    except (ValueError, SyntaxError, RecursionError):
        return None
    return text.replace("\n", "\n" + " " * indent)


def call_code(func: str, positional: list[str], values: dict[str, Any], extra: list[str]) -> str | None:
    """``func(positional..., key=value..., extra...)``, one argument a line; keys that are not
    identifiers go in one ``**{...}``."""
    named = {k: v for k, v in values.items() if k.isidentifier() and not keyword.iskeyword(k)}
    rest = {k: v for k, v in values.items() if k not in named}
    parts = list(positional)
    for k, v in named.items():
        text = literal(v, 4 + len(k) + 1)
        if text is None:
            return None
        parts.append(f"{k}={text}")
    if rest:
        text = literal(rest, 6)
        if text is None:
            return None
        parts.append(f"**{text}")
    parts += extra
    if not parts:
        return f"{func}()"
    return f"{func}(\n" + "".join(f"    {p},\n" for p in parts) + ")"


def _kept_keywords(call: cst.Call, module: cst.Module, keep: set[str] | None, drop: set[str]) -> list[str]:
    out = []
    for a in call.args:
        if a.keyword is None or a.keyword.value in drop or (keep is not None and a.keyword.value not in keep):
            continue
        out.append(module.code_for_node(a).rstrip().rstrip(","))
    return out


# keywords that only say where and how to load: meaningless once nothing is loaded
_LOADING = {"pretrained_model_name_or_path", "model_id", "cache_dir", "revision", "token", "use_auth_token",
            "local_files_only", "force_download", "subfolder", "resume_download", "proxies", "use_safetensors",
            "low_cpu_mem_usage", "device_map", "max_memory", "offload_folder", "is_trainable", "config"}
_FROM_CONFIG = {"torch_dtype", "dtype", "attn_implementation", "trust_remote_code"}


def _owner(art: Artefact) -> str:
    return art.call.rsplit(".", 1)[0]


def _config_code(info: dict[str, Any], owner: str) -> Spelling | None:
    """The config as a call: the owner's class with its values, or, when the script loaded
    through another class, the target's by-type call (reducer/stack.py)."""
    values = dict(info.get("values") or {})
    model_type = values.pop("model_type", info.get("model_type"))
    if owner.rsplit(".", 1)[-1] != info.get("class"):       # AutoConfig, or another class
        by_type = config_by_type(owner)
        code = None if by_type is None else call_code(by_type.code, [repr(model_type)], values, [])
        return None if by_type is None or code is None else Spelling(code, by_type.imports)
    code = call_code(owner, [], values, [])
    return None if code is None else Spelling(code)


# ---- the rewrites of one read -------------------------------------------------------------------
Rewrite = tuple[str, str]     # (how, candidate source)


def rewrites(module: cst.Module, read: Read, probe: Probe, private: Callable[[str], bool]) -> Iterator[Rewrite]:
    call, arg, art, wrapper = read
    if art.kind == "config":
        yield from _config_rewrites(module, call, art, probe)
    elif art.kind == "model":
        yield from _model_rewrites(module, call, art, probe)
    elif art.kind == "adapter":
        yield from _adapter_rewrites(module, call, art, probe)
    if wrapper is not None:
        yield from _json_literal(module, wrapper, art, private)
    yield from _materialize(module, call, arg, art, private)


def _config_rewrites(module: cst.Module, call: cst.Call, art: Artefact, probe: Probe) -> Iterator[Rewrite]:
    info = probe("config", art.path)
    if not info:
        return
    values = dict(info.get("values") or {})
    kept = _kept_keywords(call, module, None, _LOADING)
    for k in kept:
        values.pop(k.split("=", 1)[0].strip(), None)
    owner = _owner(art)
    info = {**info, "values": values}
    spelled = _config_code(info, owner)
    if spelled is not None:
        code = spelled.code
        if kept:
            code = code[:-1] + "".join(f"    {k},\n" for k in kept) + ")"
        yield "config values inline", _with_imports(_swap(module, call, code), list(spelled.imports))


def _model_rewrites(module: cst.Module, call: cst.Call, art: Artefact, probe: Probe) -> Iterator[Rewrite]:
    info = probe("config", art.path)
    if not info:
        return
    by_type = config_by_type(_owner(art))
    if by_type is None:
        return
    config = call_code(by_type.code, [repr(info.get("model_type"))],
                       {k: v for k, v in (info.get("values") or {}).items() if k != "model_type"}, [])
    if config is None:
        return
    config = config.replace("\n", "\n    ")
    owner = _owner(art)
    auto = owner.rsplit(".", 1)[-1].startswith("Auto")
    kept = _kept_keywords(call, module, _FROM_CONFIG, set())
    forms = ([f"{owner}.from_config(\n    {config},\n" + "".join(f"    {k},\n" for k in kept) + ")"] if kept and auto else [])
    forms.append(f"{owner}.from_config({config})" if auto else f"{owner}({config})")
    for code in forms:
        yield "model from its config, random weights", _with_imports(_swap(module, call, code), list(by_type.imports))


def _adapter_rewrites(module: cst.Module, call: cst.Call, art: Artefact, probe: Probe) -> Iterator[Rewrite]:
    positional = [a for a in call.args if a.keyword is None]
    if not positional or _owner(art).rsplit(".", 1)[-1].startswith("Auto"):
        return
    info = probe("adapter", art.path)
    if not info or not info.get("class"):
        return
    cls = info["class"]
    wrapper = adapter_wrapper(cls)
    config = call_code(cls, [], dict(info.get("values") or {}), [])
    if config is None or wrapper is None:
        return
    model = module.code_for_node(positional[0].value)
    kept = _kept_keywords(call, module, {"adapter_name"}, set())
    code = f"{wrapper.code}({model}, " + config.replace("\n", "\n    ") + "".join(f", {k}" for k in kept) + ")"
    yield f"adapter config inline, {wrapper.code}", _with_imports(_swap(module, call, code), list(wrapper.imports))


def _json_literal(module: cst.Module, wrapper: cst.Call, art: Artefact,
                  private: Callable[[str], bool]) -> Iterator[Rewrite]:
    text = _small_text(art.path, private)
    if text is None:
        return
    try:
        value = json.loads(text)
    except ValueError:
        return
    code = literal(value)
    if code is not None:
        yield "file content inline", _swap(module, wrapper, code)


def _small_text(path: Path, private: Callable[[str], bool]) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_INLINE_BYTES:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return None if private(text) or "\0" in text else text


def _folder_texts(path: Path, private: Callable[[str], bool]) -> dict[str, str] | None:
    """The folder's small text files (binary ones left out: a rewrite without them is still run)."""
    files = sorted(p for p in path.rglob("*") if p.is_file())
    if len(files) > MAX_FOLDER_FILES or sum(p.stat().st_size for p in files) > 4 * MAX_INLINE_BYTES:
        return None
    texts = {}
    for p in files:
        t = _small_text(p, private)
        if t is not None:
            texts[p.relative_to(path).as_posix()] = t
    return texts or None


def _materialize(module: cst.Module, call: cst.Call, arg: cst.Arg, art: Artefact,
                 private: Callable[[str], bool]) -> Iterator[Rewrite]:
    """The repro writes the file (or the folder's text files) to a temporary folder itself, just
    before the statement that reads it, and reads that instead."""
    if art.path.is_dir():
        texts = _folder_texts(art.path, private)
    else:
        text = _small_text(art.path, private)
        texts = None if text is None else {art.path.name: text}
    if not texts:
        return
    var = _fresh_name(module, art.label)
    lines = [f"{var} = tempfile.mkdtemp()"]
    for name, text in texts.items():
        lines.append(f"pathlib.Path({var}, {name!r}).write_text({_text_code(name, text)})")
    target = f"{var}" if art.path.is_dir() else f"os.path.join({var}, {art.path.name!r})"
    try:
        before = [cst.parse_statement(line + "\n") for line in lines]
    except cst.ParserSyntaxError:
        return
    source = _insert_before(module, call, before, arg.value, cst.parse_expression(target))
    if source is not None:
        imports = [("", "tempfile"), ("", "pathlib")] + ([("", "os")] if not art.path.is_dir() else [])
        if any(name.endswith(".json") and _json_value(t) is not None for name, t in texts.items()):
            imports.append(("", "json"))
        yield "written to a temporary folder by the repro", _with_imports(source, imports)


def _json_value(text: str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    code = literal(value, 4)
    # a JSON file is written back as json.dumps(value): readable, and its entries can be read
    return None if code is None or json.dumps(value) == text.strip() and len(text) < 80 else code


def _text_code(name: str, text: str) -> str:
    if name.endswith(".json"):
        code = _json_value(text)
        if code is not None:
            return f"json.dumps({code})"
    if "\n" in text.rstrip("\n") and '"""' not in text and "\\" not in text and not text.endswith('"'):
        return '"""' + text + '"""'
    return repr(text)


def _fresh_name(module: cst.Module, label: str) -> str:
    base = re.sub(r"\W+", "_", Path(label).stem).strip("_").lower() or "data"
    base = base if base[0].isalpha() else "d_" + base
    taken = {n.value for n in collect(module, lambda n: isinstance(n, cst.Name))}
    name, i = f"{base}_dir", 2
    while name in taken or keyword.iskeyword(name):
        name, i = f"{base}_dir{i}", i + 1
    return name


# ---- editing the module -------------------------------------------------------------------------
def _swap(module: cst.Module, old: cst.CSTNode, code: str) -> str:
    new = cst.parse_expression(code)
    return _tidy(render(module.deep_replace(old, new)))  # type: ignore[arg-type]


class _Enclosing(cst.CSTVisitor):
    """The innermost statement that holds a node."""

    def __init__(self, target: cst.CSTNode) -> None:
        self.target, self.stack, self.found = target, [], None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is not None:
            return False
        if node is self.target:
            self.found = self.stack[-1] if self.stack else None
            return False
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.stack.append(node)
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        if self.stack and self.stack[-1] is node:
            self.stack.pop()


def _insert_before(module: cst.Module, call: cst.Call, lines: list[cst.BaseStatement],
                   old: cst.BaseExpression, new: cst.BaseExpression) -> str | None:
    finder = _Enclosing(call)
    module.visit(finder)
    stmt = finder.found
    if stmt is None:
        return None
    changed = stmt.deep_replace(old, new)
    return _tidy(render(module.deep_replace(stmt, cst.FlattenSentinel([*lines, changed]))))  # type: ignore[arg-type]


def _with_imports(source: str, wanted: list[tuple[str, str]]) -> str:
    """``source`` with ``from module import name`` / ``import name`` added after its last top-level
    import, for each name it does not bind yet."""
    module = cst.parse_module(source)
    bound = _bound_names(module)
    lines = []
    for mod, name in wanted:
        if name in bound:
            continue
        lines.append(cst.parse_statement(f"from {mod} import {name}\n" if mod else f"import {name}\n"))
        bound.add(name)
    if not lines:
        return source
    body = list(module.body)
    last = max((i for i, s in enumerate(body) if _is_import(s)), default=-1)
    return module.with_changes(body=[*body[:last + 1], *lines, *body[last + 1:]]).code


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom))
                                                             for s in stmt.body)


def _bound_names(module: cst.Module) -> set[str]:
    names = set()
    for stmt in module.body:
        if not _is_import(stmt):
            continue
        for s in stmt.body:
            if isinstance(s.names, cst.ImportStar):
                continue
            for alias in s.names:
                target = alias.asname.name if alias.asname else alias.name
                names.add(module.code_for_node(target).split(".")[0])
    return names


_PATHISH = re.compile(r"^(os\.path\.\w+|os\.environ\.get|os\.getenv|getenv|Path|pathlib\.Path|str|"
                      r"os\.fspath|\w+\.(?:resolve|absolute|expanduser|joinpath|parent))$")


def _pathish(expr: cst.BaseExpression) -> bool:
    """Only strings, names and path or environment look-ups: dropping it loses no effect the
    failure could need (every rewrite is run anyway)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.Name, cst.FormattedString)):
        return True
    if isinstance(expr, cst.Attribute):
        return _pathish(expr.value)
    if isinstance(expr, cst.Subscript):
        return (dotted(expr.value) or "").endswith("environ")
    if isinstance(expr, cst.BinaryOperation):
        return _pathish(expr.left) and _pathish(expr.right)
    if isinstance(expr, cst.Call):
        return bool(_PATHISH.match(dotted(expr.func) or "")) and all(_pathish(a.value) for a in expr.args)
    return False


class _DropUnreadPaths(cst.CSTTransformer):
    def __init__(self, used: dict[str, int]) -> None:
        self.used = used

    def leave_SimpleStatementLine(self, original, updated):
        if len(updated.body) == 1 and isinstance(updated.body[0], cst.Assign):
            s = updated.body[0]
            if (len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name)
                    and not self.used.get(s.targets[0].target.value) and _pathish(s.value)):
                return cst.RemoveFromParent()
        return updated


def _tidy(source: str) -> str:
    """What the rewrite left unread goes: the path's own assignments (an ``os.environ[...]`` a
    maintainer has no value for), dead code, imports."""
    for _ in range(5):
        module = cst.parse_module(source)
        after = render(module.visit(_DropUnreadPaths(uses(module))))
        if after == source:
            break
        source = after
    return drop_unused_imports(drop_dead_code(source))


# ---- the driver ---------------------------------------------------------------------------------
def make_standalone(source: str, ctx: Context, run_alone: RunAlone, probe: Probe,
                    private: Callable[[str], bool] = lambda text: False, max_tries: int = MAX_TRIES) -> Standalone:
    """Rewrite the artefacts ``source`` reads, one rewrite a run, while it still fails the same
    way alone and offline; what stays is named."""
    record = run_alone(source)
    out = Standalone(source, record)
    given_up: set[tuple[str, str, str]] = set()
    tries = 0
    while tries < max_tries:
        module, reads = find_reads(out.source, ctx)
        todo = [r for r in reads if _key(r[2]) not in given_up]
        if not todo:
            break
        read = todo[0]
        accepted = False
        for how, candidate in rewrites(module, read, probe, private):
            if tries >= max_tries or candidate == out.source:
                continue
            tries += 1
            found = run_alone(candidate)
            out.attempts.append({"artefact": read[2].label, "kind": read[2].kind, "how": how,
                                 "fails_the_same_way": found is not None})
            if found is not None:
                out.source, out.record, accepted = candidate, found, True
                break
        if not accepted:
            given_up.add(_key(read[2]))
    out.needs = [a.to_dict(ctx.folder) for a in _unique(find_reads(out.source, ctx)[1])]
    for need in out.needs:
        hint = _hint(need, ctx, probe)
        if hint:
            need["hint"] = hint
    return out


def _key(art: Artefact) -> tuple[str, str, str]:
    return art.call, art.argument, str(art.path)


def _unique(reads: list[Read]) -> list[Artefact]:
    seen, out = set(), []
    for r in reads:
        if r[2].path not in seen:
            seen.add(r[2].path)
            out.append(r[2])
    return out


def _hint(need: dict[str, str], ctx: Context, probe: Probe) -> str | None:
    """How a maintainer gets something like it: for a model folder, a public checkpoint of the
    same architecture (a suggestion: the failure may depend on the user's own weights)."""
    if need["kind"] not in ("model", "config"):
        return None
    path = Path(need["path"])
    info = probe("config", path if path.is_absolute() else ctx.folder / path)
    if not info:
        return None
    arch = (info.get("architectures") or [None])[0]
    if arch:
        return (f"a {info.get('model_type')} checkpoint ({arch}); a public one of the same architecture, "
                f"e.g. hf-internal-testing/tiny-random-{arch}, may stand in")
    return f"a {info.get('model_type')} checkpoint"


def probe_in(python: str, env: dict[str, str] | None = None, timeout: float = 120.0) -> Probe:
    """A probe that asks the user's interpreter (reducer/reduction/artefact_probe.py); None where it cannot say."""
    script = Path(__file__).with_name("artefact_probe.py")
    cache: dict[tuple[str, str], dict[str, Any] | None] = {}

    def probe(kind: str, path: Path) -> dict[str, Any] | None:
        key = (kind, str(path))
        if key not in cache:
            try:
                proc = subprocess.run([python, str(script), kind, str(path)], capture_output=True, text=True,
                                      timeout=timeout, env=env, check=False, stdin=subprocess.DEVNULL)
                cache[key] = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
            except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
                cache[key] = None
        return cache[key]

    return probe
