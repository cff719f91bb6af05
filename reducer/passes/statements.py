"""Statement deletion, hierarchical (HDD): the module's own statements first, then the blocks one
level down, and so on; inside each block, runs of statements are deleted with find_integer."""
from __future__ import annotations

import libcst as cst

from reducer.analysis.cst import set_body, statement_list
from reducer.passes.base import Gate
from reducer.passes.loops import delete_runs


class _Blocks(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[int, int, cst.CSTNode]] = []
        self.depth = 0

    def visit_Module(self, node: cst.Module) -> None:
        self.found.append((0, len(self.found), node))

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.depth += 1
        self.found.append((self.depth, len(self.found), node))

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.depth -= 1


def blocks_by_depth(module: cst.Module) -> list[cst.CSTNode]:
    """Every statement list, shallowest first (pre-order within a depth). Deleting inside one
    block only removes deeper blocks, so a block's index here is stable while it is worked on."""
    v = _Blocks()
    module.visit(v)
    return [node for _, _, node in sorted(v.found, key=lambda t: (t[0], t[1]))]


def _multi_lines(module: cst.Module) -> list[cst.CSTNode]:
    from reducer.analysis.cst import collect
    return collect(module, lambda n: isinstance(n, cst.SimpleStatementLine) and len(n.body) > 1)


def delete_statements(gate: Gate) -> None:
    """Delete runs of statements, block by block, coarsest first.

    Removes: statements: the module's own first, then each block one level down, runs of them at a
    time (find_integer); then the small statements of a ``a = 1; b = 2`` line.
    Never changes: anything but whole statements (an emptied block gets ``pass``, reducer/analysis/cst.py
    ``render``)."""
    delete_runs(gate, blocks_by_depth, statement_list, set_body)
    # `a = 1; b = 2` on one line: its small statements are statements too (1-minimality).
    delete_runs(gate, _multi_lines, statement_list, set_body)
