"""Several node replacements in one candidate (inlining touches a definition and a call site)."""
from __future__ import annotations

from typing import Any

import libcst as cst

from reducer.passes.base import render


class _ReplaceMany(cst.CSTTransformer):
    def __init__(self, mapping: dict[int, Any]) -> None:
        self.mapping = mapping

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) not in self.mapping and super().on_visit(node)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
        if id(original) in self.mapping:
            return self.mapping[id(original)]
        return super().on_leave(original, updated)


def replace_many(module: cst.Module, pairs: list[tuple[cst.CSTNode, Any]]) -> str:
    return render(module.visit(_ReplaceMany({id(old): new for old, new in pairs})))
