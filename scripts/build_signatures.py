"""Build bot/data/signatures.json.gz: the keyword arguments the stack's callables accept, release by release.

    python scripts/build_signatures.py [--wheels DIR] [--out PATH]

``TypeError: X.__init__() got an unexpected keyword argument 'k'`` is a usage error when no release
of the package ever let ``X`` take ``k`` (a typo, the wrong class), and a version mismatch when
another release does. This catalogue says which: for every public module-level function and class
of each stack package, and every class's public methods and ``__init__``, the parameter names each
catalogued release accepts (read with ``ast`` from the wheels, never imported). A class is called
through its ``__init__``; a ``@dataclass`` without one through its annotated fields, those of its
bases defined in the same package included. Bases defined elsewhere (``torch.nn.Module``,
transformers' ``TrainingArguments`` under a trl config) are recorded by name, unresolved.

Stored per package, releases oldest first: name -> [releases it exists in, releases it takes
**kwargs in, {parameter: releases that accept it}, unresolved base names], each set of releases a
bit mask over the package's version list (bit i: ``versions[pkg][i]``). Same-named callables of one
release (a class copied into two model files) are merged: the catalogue errs towards "some release
accepts it", never towards calling a real keyword a typo.
"""
from __future__ import annotations

import argparse
import ast
import gzip
import json
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from release_wheels import VERSIONS, Release, check_against_registry, download, releases  # noqa: E402

OUT = ROOT / "bot" / "data" / "signatures.json.gz"
_DATACLASS_DECORATORS = {"dataclass", "dataclasses.dataclass"}


@dataclass
class Sig:
    """What one callable of one release accepts."""
    params: set[str] = field(default_factory=set)
    var_kw: bool = False
    unresolved: set[str] = field(default_factory=set)   # bases named but not defined in the package

    def merge(self, other: "Sig") -> None:
        self.params |= other.params
        self.var_kw |= other.var_kw
        self.unresolved |= other.unresolved


@dataclass
class _Class:
    name: str
    bases: list[str]
    init: Sig | None            # its own ``__init__``, if it defines one
    fields: set[str] | None     # its own init fields, if it is a dataclass
    methods: dict[str, Sig]


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Subscript):      # ``Generic[T]``
        return _dotted(node.value)
    return ""


def _args_sig(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> Sig:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    is_static = any(_dotted(d) == "staticmethod" for d in fn.decorator_list)
    if method and not is_static and positional:
        positional = positional[1:]          # self / cls
    # Positional-only names cannot be passed by keyword, but a message naming one still means the
    # release knows it; keep them all.
    names = {p.arg for p in (*positional, *a.kwonlyargs)}
    return Sig(params=names, var_kw=a.kwarg is not None)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any(_dotted(d) in _DATACLASS_DECORATORS for d in cls.decorator_list)


def _field_is_init(value: ast.expr | None) -> bool:
    # ``field(init=False)`` is no parameter of the generated ``__init__``.
    if isinstance(value, ast.Call) and _dotted(value.func).rsplit(".", 1)[-1] == "field":
        for kw in value.keywords:
            if kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                return False
    return True


def _dataclass_fields(cls: ast.ClassDef) -> set[str]:
    out = set()
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if "ClassVar" in ast.unparse(stmt.annotation) or not _field_is_init(stmt.value):
                continue
            out.add(stmt.target.id)
    return out


def _public(name: str) -> bool:
    return not name.startswith("_")


def definitions(source: str) -> tuple[dict[str, Sig], dict[str, _Class]]:
    """The module-level public functions and the classes of one source file."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}, {}
    funcs: dict[str, Sig] = {}
    classes: dict[str, _Class] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(node.name):
            funcs[node.name] = _args_sig(node, method=False)
        elif isinstance(node, ast.ClassDef):
            methods: dict[str, Sig] = {}
            init = None
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if stmt.name == "__init__":
                        init = _args_sig(stmt, method=True)
                    elif _public(stmt.name):
                        methods[stmt.name] = _args_sig(stmt, method=True)
            classes[node.name] = _Class(node.name, [b for b in map(_dotted, node.bases) if b], init,
                                        _dataclass_fields(node) if _is_dataclass(node) else None, methods)
    return funcs, classes


def _constructor(name: str, classes: dict[str, list[_Class]], seen: frozenset[str] = frozenset()) -> Sig:
    """What calling class ``name`` accepts: its own ``__init__``, else its dataclass fields plus those
    of its bases, else its first base's constructor; bases outside the package stay names."""
    out = Sig()
    for cls in classes.get(name, ()):
        if cls.init is not None:
            out.merge(cls.init)
            continue
        if cls.fields is not None:
            out.params |= cls.fields
        for base in cls.bases:
            short = base.rsplit(".", 1)[-1]
            if short in ("object", "Generic", "ABC", "Protocol") or short in seen:
                continue
            if short not in classes:
                out.unresolved.add(short)
                if cls.fields is None:
                    break
                continue
            inherited = _constructor(short, classes, seen | {name})
            if not (inherited.params or inherited.var_kw or inherited.unresolved):
                continue                     # a mixin without an ``__init__``
            out.merge(inherited)
            if cls.fields is None:
                break                        # a plain class takes the first base's ``__init__`` (the MRO, roughly)
    return out


def signatures_of(sources: Iterable[tuple[str, str]]) -> dict[str, Sig]:
    """Callable name (``get_peft_model``, ``LoraConfig``, ``Trainer.train``) -> what one release accepts."""
    funcs: dict[str, Sig] = defaultdict(Sig)
    classes: dict[str, list[_Class]] = defaultdict(list)
    for _name, source in sources:
        f, c = definitions(source)
        for k, sig in f.items():
            funcs[k].merge(sig)
        for k, cls in c.items():
            classes[k].append(cls)
    out: dict[str, Sig] = dict(funcs)
    for name, defs in classes.items():
        if not _public(name):
            continue
        out.setdefault(name, Sig()).merge(_constructor(name, classes))
        for cls in defs:
            for m, sig in cls.methods.items():
                out.setdefault(f"{name}.{m}", Sig()).merge(sig)
    return out


def catalogue(rels: Iterable[Release], versions: dict[str, list[str]]) -> dict:
    """``rels`` oldest first per package -> the stored form (see the module's docstring)."""
    table: dict[str, dict[str, list]] = defaultdict(dict)
    for pkg, version, sources in rels:
        bit = 1 << versions[pkg].index(version)
        for name, sig in signatures_of(sources).items():
            row = table[pkg].setdefault(name, [0, 0, {}, []])
            row[0] |= bit
            if sig.var_kw:
                row[1] |= bit
            for p in sig.params:
                row[2][p] = row[2].get(p, 0) | bit
            row[3] = sorted(set(row[3]) | sig.unresolved)
    # Most callables have no unresolved base: their row stops at the parameters.
    callables = {pkg: {n: [r[0], r[1], dict(sorted(r[2].items()))] + ([r[3]] if r[3] else [])
                       for n, r in sorted(rows.items())} for pkg, rows in sorted(table.items())}
    return {"versions": versions, "callables": callables}


def write(data: dict, out: Path) -> None:
    # mtime=0 and no file name in the header: the same wheels give the same bytes.
    out.write_bytes(gzip.compress(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode(), mtime=0))


def build(folder: Path, out: Path, versions: dict[str, list[str]] = VERSIONS) -> dict:
    """Read the wheels in ``folder`` (versions sorted oldest first) and write the catalogue."""
    from bot.upstream.raise_sites import release_key

    ordered = {pkg: sorted(vs, key=release_key) for pkg, vs in versions.items()}
    data = catalogue(releases(folder, ordered, who="build_signatures"), ordered)
    write(data, out)
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", type=Path, help="a folder holding the wheels (else they are downloaded)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    check_against_registry(VERSIONS)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.wheels or Path(tmp)
        if args.wheels is None:
            download(folder)
        data = build(folder, args.out)
    counts = ", ".join(f"{pkg} {len(rows)} callables/{sum(len(r[2]) for r in rows.values())} parameters"
                       for pkg, rows in data["callables"].items())
    shown = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    print(f"{shown}: {counts}; {args.out.stat().st_size / 1e6:.2f} MB; built in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
