"""A step through a wrapper, dropped: ``m.base_layer.weight`` → ``m.weight``.

ML scripts reach into wrappers — a PEFT layer's ``base_layer``, DDP's ``module``, a PEFT model's
``base_model`` — to read what the wrapper holds. Once the plain object fails the same way, the
wrapper (``get_peft_model(...)``, ``DDP(...)``) and its import are dead and the statement passes
remove them; no other pass can, since deleting the wrapper first breaks the attribute read.

Every site at once first, then one by one.
"""
from __future__ import annotations

import libcst as cst

from reducer.analysis.cst import collect, render
from reducer.analysis.names import Role, census
from reducer.passes.base import Gate
from reducer.passes.loops import together_then_each


def _imported(module: cst.Module) -> set[str]:
    return set(census(module).total({Role.IMPORT}))


class _Stores(cst.CSTVisitor):
    """Attribute nodes that are written (``a.b.c = x``, ``del a.b.c``, ``a.b.c += 1``, ``for a.b.c in``)."""

    def __init__(self) -> None:
        self.found: set[int] = set()

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.found.add(id(node.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.found.add(id(node.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.found.add(id(node.target))

    def visit_Del(self, node: cst.Del) -> None:
        self.found.add(id(node.target))

    def visit_For(self, node: cst.For) -> None:
        self.found.add(id(node.target))


def _sites(module: cst.Module) -> list[cst.Attribute]:
    """``<variable>.<mid>.<last>`` chains, outermost node of the three, in pre-order."""
    modules = _imported(module)
    stores = _Stores()
    module.visit(stores)
    out = []
    for node in collect(module, lambda n: isinstance(n, cst.Attribute)):
        inner = node.value
        if (isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Name)
                and inner.value.value not in modules and id(node) not in stores.found
                and not inner.lpar and not inner.rpar):
            out.append(node)
    return out


class _Drop(cst.CSTTransformer):
    def __init__(self, targets: list[cst.Attribute]) -> None:
        self.targets = {id(t) for t in targets}

    def on_leave(self, original: cst.CSTNode, updated):
        if id(original) in self.targets and isinstance(updated, cst.Attribute) \
                and isinstance(updated.value, cst.Attribute):
            return updated.with_changes(value=updated.value.value)
        return updated


def _candidate(module: cst.Module, targets: list[cst.Attribute]) -> str | None:
    if not targets:
        return None
    try:
        out = render(module.visit(_Drop(targets)))
    except (cst.CSTValidationError, ValueError, TypeError):
        return None
    return None if out == module.code else out


def drop_middle_attributes(gate: Gate) -> None:
    """Every chain at once first, then one by one (see the module docstring).

    Removes: one attribute of a chain of two or more on a variable (``a.b.c`` → ``a.c``).
    Never changes: a chain on a module (``os.path.join``) or on a call's result, an attribute that
    is assigned to or deleted."""
    together_then_each(gate, _sites, lambda module, node: [_candidate(module, [node])],
                       lambda module: _candidate(module, _sites(module)))
