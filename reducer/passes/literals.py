"""Shrink values: drop entries from list/tuple/set/dict displays (a ``device_map`` entry), make
numbers 0/1/small (``max_new_tokens=512`` → ``1``), shorten strings, and replace a compound
expression (``a + b``, ``a or b``, ``x if c else y``) by one of its parts."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

from reducer.passes.arguments import without_trailing_comma
from reducer.passes.base import Gate, collect, delete_runs, replace, run_targets, safe

_CONTAINERS = (cst.List, cst.Tuple, cst.Set, cst.Dict)


def containers(module: cst.Module) -> list[cst.CSTNode]:
    return collect(module, lambda n: isinstance(n, _CONTAINERS) and len(n.elements) > 0)


def _elements(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    return node.elements


def _set_elements(node: cst.CSTNode, items: list) -> cst.CSTNode:
    items = without_trailing_comma(items)
    if isinstance(node, cst.Tuple) and len(items) == 1:
        # `(a, b)` minus `b` must stay a tuple: `(a,)`
        items = [items[0].with_changes(comma=cst.Comma())]
    if isinstance(node, cst.Tuple) and not items:
        return cst.Tuple(elements=[])
    return node.with_changes(elements=items)


def shrink_containers(gate: Gate) -> None:
    delete_runs(gate, containers, _elements, _set_elements)


# ---- scalar literals -------------------------------------------------------------------------
def _is_scalar_target(n: cst.CSTNode) -> bool:
    return isinstance(n, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString,
                          cst.BinaryOperation, cst.BooleanOperation, cst.IfExp))


def scalar_targets(module: cst.Module) -> list[cst.CSTNode]:
    return collect(module, _is_scalar_target)


def smaller_ints(text: str) -> list[str]:
    try:
        n = int(text.replace("_", ""), 0)
    except ValueError:
        return ["0", "1"]
    out = ["0", "1", "2"]
    while n > 2:
        n //= 2
        out.append(str(n))
    return out


def shorter_strings(node: cst.SimpleString) -> list[str]:
    prefix, quote = node.prefix, node.quote
    body = node.value[len(prefix) + len(quote): -len(quote)]
    out = [f"{prefix}{quote}{quote}"]
    if len(body) > 1 and "\\" not in body:
        out.append(f"{prefix}{quote}{body[: len(body) // 2]}{quote}")
        out.append(f"{prefix}{quote}{body[0]}{quote}")
    # the quote style itself is noise: "" is the same as """"""
    if len(quote) == 3 and "\n" not in body and '"' not in body and "\\" not in body:
        out.append(f'{prefix}"{body}"')
    return out


def _values(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.Integer):
        return [cst.Integer(v) for v in smaller_ints(node.value)]
    if isinstance(node, cst.Float):
        return [cst.Integer("0"), cst.Integer("1"), cst.Float("0.0"), cst.Float("1.0"), cst.Float("0.5")]
    if isinstance(node, cst.SimpleString):
        return [cst.SimpleString(v) for v in shorter_strings(node)]
    if isinstance(node, cst.FormattedString):
        return [cst.SimpleString('""')]
    if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
        return [node.left, node.right]
    if isinstance(node, cst.IfExp):
        return [node.body, node.orelse]
    return []


def _alternatives(module: cst.Module, node: cst.CSTNode) -> Iterable[str | None]:
    for value in _values(node):
        if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp)):
            # keep the outer parentheses the operation had, so precedence cannot change
            if node.lpar and not value.lpar:
                value = value.with_changes(lpar=node.lpar, rpar=node.rpar)
        yield safe(lambda value=value: replace(module, node, value))


def shrink_literals(gate: Gate) -> None:
    run_targets(gate, scalar_targets, _alternatives)
