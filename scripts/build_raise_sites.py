"""Build bot/data/raise_sites.json.gz: where each of the stack's error messages is raised.

    python scripts/build_raise_sites.py [--wheels DIR] [--out PATH]

A pasted traceback is often cut above the library frames (``Traceback ... trainer.train()``
then the error line), and a forum post may show the error line alone. The message still says who
raised it: this catalogue maps the message templates of every ``raise X("...")`` in released
versions of the stack's packages (spread over 2022-2026: the list in scripts/release_wheels.py,
shared with the signature catalogue, trl included) to the
package, file and function that raise them. Routing reads it (bot/upstream/raise_sites.py);
nothing here is learned from the labelled issue set.

Wheels are taken from ``--wheels`` when given (file names ``<pkg>-<version>-*.whl``), else
downloaded with ``pip download --no-deps`` into a temporary folder (PyPI, about 900 MB).
"""
from __future__ import annotations

import argparse
import ast
import gzip
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# scripts/ is sys.path[0] when this runs as a script.
from release_wheels import VERSIONS, download, releases  # noqa: E402

OUT = ROOT / "bot" / "data" / "raise_sites.json.gz"

# A template must say this much literally to name its raiser (``f"{x}"`` names nobody).
MIN_LITERAL = 12
HOLE = None
# Templates that restate Python's own messages (a ``__getattr__`` that raises
# ``f"'{type(self).__name__}' object has no attribute '{name}'"``) would claim every such error.
_PYTHONS_OWN = re.compile(r"^(?:'?\{\}'?(?: object)? has no attribute '?\{\}'?|module '?\{\}'? has no attribute '?\{\}'?"
                          r"|(?:list|tuple|string) index out of range|name '?\{\}'? is not defined)\.?$")
Parts = list  # of str (literal) and None (a formatted value)


def _format_parts(text: str, pattern: re.Pattern[str]) -> Parts:
    out: Parts = []
    pos = 0
    for m in pattern.finditer(text):
        out += [text[pos:m.start()], HOLE]
        pos = m.end()
    return out + [text[pos:]]


_BRACES = re.compile(r"\{[^{}]*\}")
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifgexXcu]")


class _Templates:
    """Message templates of one function body: string expressions, and names bound to them."""

    def __init__(self, body: list[ast.stmt]) -> None:
        self.bound: dict[str, list[tuple[int, ast.expr, bool]]] = defaultdict(list)
        for node in (n for stmt in body for n in ast.walk(stmt)):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.bound[node.targets[0].id].append((node.lineno, node.value, False))
            elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
                self.bound[node.target.id].append((node.lineno, node.value, True))

    def parts(self, expr: ast.expr, line: int, depth: int = 0) -> Parts:
        if depth > 4:
            return [HOLE]
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [expr.value]
        if isinstance(expr, ast.JoinedStr):
            out: Parts = []
            for v in expr.values:
                out += [v.value] if isinstance(v, ast.Constant) and isinstance(v.value, str) else [HOLE]
            return out
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self.parts(expr.left, line, depth + 1) + self.parts(expr.right, line, depth + 1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod) and isinstance(expr.left, ast.Constant) \
                and isinstance(expr.left.value, str):
            return _format_parts(expr.left.value, _PERCENT)
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "format"
                and isinstance(expr.func.value, ast.Constant) and isinstance(expr.func.value.value, str)):
            return _format_parts(expr.func.value.value, _BRACES)
        if isinstance(expr, ast.Name) and expr.id in self.bound:
            # The message built before the raise: the last plain binding above it, plus what
            # ``+=`` added after that binding.
            rows = [r for r in self.bound[expr.id] if r[0] < line]
            start = max((i for i, r in enumerate(rows) if not r[2]), default=None)
            if start is None:
                return [HOLE]
            out = []
            for _, value, _aug in rows[start:]:
                out += self.parts(value, line, depth + 1)
            return out
        return [HOLE]


def first_line(parts: Parts) -> list[str | None]:
    """The template's first line, with holes merged and literal whitespace collapsed."""
    out: list[str | None] = []
    text_started = False
    for p in parts:
        if p is HOLE:
            if not out or out[-1] is not HOLE:
                out.append(HOLE)
            continue
        if not out:
            p = p.lstrip()
        head, nl, _ = p.partition("\n")
        head = re.sub(r"\s+", " ", head)
        if head:
            text_started = True
            if out and out[-1] is not HOLE:
                out[-1] += head
            else:
                out.append(head)
        if nl and text_started:
            break
    return out


def _exc_name(exc: ast.expr) -> str | None:
    call = exc if isinstance(exc, ast.Call) else None
    func = call.func if call else exc
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def sites_of(source: str) -> list[tuple[str, list[str | None], str]]:
    """(exception, first-line template, function) of every raise in ``source`` that says enough."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []

    def visit(body_owner: ast.AST, func: str) -> None:
        body = getattr(body_owner, "body", [])
        templates = _Templates(body)
        for node in ast.walk(body_owner):
            if node is not body_owner and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                name = _exc_name(node.exc)
                if not name:
                    continue
                tpl = first_line(templates.parts(node.exc.args[0], node.lineno))
                shape = "".join("{}" if p is HOLE else p for p in tpl).strip()
                if sum(len(p) for p in tpl if p) >= MIN_LITERAL and not _PYTHONS_OWN.match(shape):
                    out.append((name, tpl, func))

    # Functions at any depth own their raises; module level raises belong to <module>.
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(node, node.name)
    module_level = ast.Module(body=[s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                               ast.ClassDef))], type_ignores=[])
    visit(module_level, "<module>")
    return out


def catalogue(releases: list[tuple[str, str, Iterable[tuple[str, str]]]]) -> list[dict]:
    """``releases``: (package, version, its (file name, source) pairs), oldest first per package."""
    entries: dict[tuple, dict] = {}
    for pkg, version, sources in releases:
        for name, source in sources:
            for exc, tpl, func in sites_of(source):
                key = (pkg, exc, json.dumps(tpl))
                e = entries.setdefault(key, {"package": pkg, "exc": exc, "template": tpl, "sites": {},
                                             "first": version, "last": version})
                e["last"] = version
                e["sites"][f"{name}:{func}"] = None
    out = []
    for e in entries.values():
        sites = list(e["sites"])
        e["n_sites"] = len(sites)
        # A message copied into a hundred model files needs only a few of them named.
        e["sites"] = sites[:3]
        out.append(e)
    return sorted(out, key=lambda e: (e["package"], e["exc"], json.dumps(e["template"])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", type=Path, help="a folder holding the wheels (else they are downloaded)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.wheels or Path(tmp)
        if args.wheels is None:
            download(folder)
        rows = catalogue(releases(folder, who="build_raise_sites"))
    data = {"versions": VERSIONS, "min_literal": MIN_LITERAL, "entries": rows}
    # mtime=0: the same wheels give the same bytes.
    with gzip.GzipFile(args.out, "wb", mtime=0) as fh:
        fh.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
    by_pkg = defaultdict(int)
    for r in rows:
        by_pkg[r["package"]] += 1
    print(f"{args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}: {len(rows)} templates "
          f"({', '.join(f'{k} {v}' for k, v in sorted(by_pkg.items()))}), {args.out.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
