"""`reprobot contrast`: which single change to the minimal repro makes it pass.

Every keyword, boolean, device, dtype and dict entry left in the repro gets a small set of
alternatives — drop it (the callee's default), the other boolean, a `device_map` collapsed to
one device, the dtype swapped, `cpu` <-> `cuda:0` — applied one at a time, each a real cold
run judged by the same signature. A maintainer reads the result as "all-GPU works, the split
map fails".
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from bot.rerun.repro_run import ReproRunner
from bot.rerun.verdict import Kind, Verdict

MAX_CHANGES = 80
_DTYPES = ("float16", "bfloat16", "float32")
_DTYPE_STRINGS = {"float16": "bfloat16", "bfloat16": "float16", "float32": "bfloat16",
                  "fp16": "bf16", "bf16": "fp16"}


@dataclass(frozen=True)
class Change:
    line: int
    description: str          # "`b=True` -> `b=False`", as a maintainer reads it
    source: str               # the whole repro with this one change


@dataclass
class Contrast:
    change: Change
    verdict: Verdict

    def to_dict(self) -> dict:
        return {"line": self.change.line, "change": self.change.description, "verdict": self.verdict.to_dict()}


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _short(node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(_code(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Replace(cst.CSTTransformer):
    """Replaces (or removes, with None) one node, found by identity in the tree it was taken from."""

    def __init__(self, target: cst.CSTNode, replacement: cst.CSTNode | None) -> None:
        self.target, self.replacement = target, replacement

    def on_leave(self, original, updated):
        if original is self.target:
            return cst.RemoveFromParent() if self.replacement is None else self.replacement
        return updated


def _string_value(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:
            return None
        return value if isinstance(value, str) else None
    return None


def _device_values(d: cst.Dict) -> list[cst.BaseExpression]:
    seen, out = set(), []
    for el in d.elements:
        if isinstance(el, cst.DictElement) and isinstance(el.value, (cst.Integer, cst.SimpleString)):
            code = _code(el.value)
            if code not in seen:
                seen.add(code)
                out.append(el.value)
    return out


def _looks_like_device_map(name: str | None, d: cst.Dict) -> bool:
    if name and "device_map" in name:
        return True
    values = _device_values(d)
    return bool(values) and len(values) == len([e for e in d.elements if isinstance(e, cst.DictElement)]) and all(
        isinstance(v, cst.Integer) or (_string_value(v) or "").split(":")[0] in ("cpu", "cuda", "disk", "meta")
        for v in values)


class _Sites(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.found: list[tuple[int, str, cst.CSTNode, cst.CSTNode | None]] = []
        self._keyword: list[str | None] = [None]
        # Only what the repro passes on: call arguments and assigned values, never a def's own
        # defaults or a comparison inside the user's helper.
        self._passing = 0
        self._skip = 0

    def visit_Parameters(self, node: cst.Parameters) -> None:
        self._skip += 1

    def leave_Parameters(self, original_node: cst.Parameters) -> None:
        self._skip -= 1

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._skip += 1

    def leave_Comparison(self, original_node: cst.Comparison) -> None:
        self._skip -= 1

    def visit_Assign(self, node: cst.Assign) -> None:
        self._passing += 1

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._passing -= 1

    @property
    def _active(self) -> bool:
        return self._passing > 0 and self._skip == 0

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _add(self, node: cst.CSTNode, description: str, replacement: cst.CSTNode | None) -> None:
        if not self._active:
            return
        self.found.append((self._line(node), description, node, replacement))

    def visit_Arg(self, node: cst.Arg) -> None:
        name = node.keyword.value if node.keyword else None
        self._keyword.append(name)
        self._passing += 1
        if name and node.star == "":
            self._add(node, f"without `{name}={_short(node.value)}` (the default)", None)

    def leave_Arg(self, original_node: cst.Arg) -> None:
        self._keyword.pop()
        self._passing -= 1

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self._add(node, f"without the entry `{_short(node.key)}: {_short(node.value)}`", None)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("True", "False"):
            other = "False" if node.value == "True" else "True"
            kw = self._keyword[-1]
            text = f"`{kw}={node.value}` -> `{kw}={other}`" if kw else f"`{node.value}` -> `{other}`"
            self._add(node, text, cst.Name(other))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == "torch" and node.attr.value in _DTYPES:
            for other in _DTYPES:
                if other != node.attr.value:
                    self._add(node, f"`torch.{node.attr.value}` -> `torch.{other}`",
                              node.with_changes(attr=cst.Name(other)))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = _string_value(node)
        if value is None:
            return
        quote = node.quote
        swaps: list[str] = []
        if value == "cpu":
            swaps = ["cuda:0"]
        elif value in ("cuda", "cuda:0") or value.startswith("cuda:"):
            swaps = ["cpu"]
        elif value in _DTYPE_STRINGS:
            swaps = [_DTYPE_STRINGS[value]]
        for other in swaps:
            self._add(node, f"`{value!r}` -> `{other!r}`", node.with_changes(value=f"{quote}{other}{quote}"))

    def visit_Dict(self, node: cst.Dict) -> None:
        if not _looks_like_device_map(self._keyword[-1], node):
            return
        values = _device_values(node)
        if len(node.elements) < 2 and len(values) < 2:
            return
        for v in values:
            one = cst.Dict([cst.DictElement(cst.SimpleString('""'), v)])
            self._add(node, f"device_map collapsed to one device: `{_code(one)}`", one)


def changes(source: str) -> list[Change]:
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module)
    sites = _Sites()
    wrapper.visit(sites)
    out: list[Change] = []
    seen: set[str] = {source}
    for line, description, node, replacement in sites.found:
        try:
            new = wrapper.module.visit(_Replace(node, replacement)).code
            compile(new, "<contrast>", "exec")
        except Exception:
            continue
        if new in seen:
            continue
        seen.add(new)
        out.append(Change(line, description, new))
        if len(out) >= MAX_CHANGES:
            break
    return out


def contrast(runner: ReproRunner, jobs: int = 1, notify=lambda _: None) -> list[Contrast]:
    todo = changes(runner.repro.source)
    notify(f"{len(todo)} single changes to try")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        verdicts = list(pool.map(lambda c: runner.verdict(c.source), todo))
    return [Contrast(c, v) for c, v in zip(todo, verdicts)]


def grouped(results: list[Contrast]) -> dict[str, list[Contrast]]:
    groups: dict[str, list[Contrast]] = {"passes": [], "same failure": [], "changes it": []}
    for r in results:
        key = "passes" if r.verdict.kind is Kind.PASS else (
            "same failure" if r.verdict.kind is Kind.SAME else "changes it")
        groups[key].append(r)
    return groups
