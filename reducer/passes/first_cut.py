"""The first cut: before any delta debugging, the original minus every statement that never ran
in the traced run (reducer/analysis/trace.py records which lines did). One or two candidates that often
take a long script down to the path that fails."""
from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
from libcst.metadata import CodeRange

from reducer.analysis.cst import StatementTransformer, body_statements, parse_with_positions, parses, render, splice
from reducer.passes.base import Gate


class _Cut(StatementTransformer):
    """Drop statements none of whose own lines executed. ``aggressive`` also drops functions
    whose body never ran and replaces an ``if`` by the branch that ran."""

    def __init__(self, lines: set[int], aggressive: bool, positions: Mapping[cst.CSTNode, CodeRange]) -> None:
        self.lines, self.aggressive, self.positions = lines, aggressive, positions
        self.elifs: set[int] = set()

    def _ran(self, node: cst.CSTNode, header_only: bool) -> bool:
        r = self.positions[node]
        end = r.end.line
        if header_only:
            body = getattr(node, "body", None)
            if isinstance(body, cst.IndentedBlock) and body.body:
                end = self.positions[body.body[0]].start.line - 1
            else:
                end = r.start.line
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.decorators:
            start = self.positions[node.decorators[0]].start.line
        else:
            start = r.start.line
        return any(n in self.lines for n in range(start, max(start, end) + 1))

    def _block_ran(self, block: cst.BaseSuite) -> bool:
        if isinstance(block, cst.IndentedBlock):
            return any(self._ran(s, False) for s in block.body)
        return self._ran(block, False)

    def leave_SimpleStatementLine(self, original, updated):
        # `global`/`nonlocal` compile to no instruction at all, so they never show as executed
        if any(isinstance(s, (cst.Global, cst.Nonlocal)) for s in original.body):
            return updated
        return updated if self._ran(original, False) else cst.RemoveFromParent()

    def leave_FunctionDef(self, original, updated):
        if not self._ran(original, True):
            return cst.RemoveFromParent()
        if self.aggressive and not self._block_ran(original.body):
            return cst.RemoveFromParent()
        return updated

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))

    def leave_If(self, original, updated):
        if not self._ran(original, False):
            return cst.RemoveFromParent()
        if not self.aggressive or id(original) in self.elifs or isinstance(original.orelse, cst.If):
            return updated
        body_ran = self._block_ran(original.body)
        else_ran = original.orelse is not None and self._block_ran(original.orelse.body)
        # only one branch ran: that branch replaces the whole `if`
        if body_ran and not else_ran:
            return splice(body_statements(updated.body), original)
        if else_ran and not body_ran:
            return splice(body_statements(updated.orelse.body), original)
        return updated

    def on_leave(self, original, updated):
        if isinstance(original, cst.BaseCompoundStatement) and not isinstance(original, (cst.If, cst.FunctionDef)):
            # whole range: some headers (`try:`) compile to no instruction of their own
            if not self._ran(original, False):
                return cst.RemoveFromParent()
        return super().on_leave(original, updated)


def _cut_text(source: str, lines: set[int], aggressive: bool) -> str | None:
    """The cut rendered, not yet checked to parse."""
    try:
        module, positions = parse_with_positions(source)
        return render(module.visit(_Cut(lines, aggressive, positions)))
    except (cst.ParserSyntaxError, cst.CSTValidationError, ValueError):
        return None


def cut(source: str, lines: set[int], aggressive: bool) -> str | None:
    out = _cut_text(source, lines, aggressive)
    return out if out is not None and parses(out) else None


def first_cut(gate: Gate) -> None:
    """Offer the original minus every statement that never ran in the traced run (the
    aggressive cut first, then the plain one).

    Removes: every statement that never ran in the traced run.
    Never changes: a statement that ran (its line is in the trace), nor a block header whose body
    ran; without a trace it offers nothing."""
    trace = gate.trace
    if trace is None or not trace.lines or gate.best != trace.source:
        return      # nothing recorded (or the best is no longer the traced text): nothing to cut
    for aggressive in (True, False):
        candidate = _cut_text(trace.source, trace.lines, aggressive)
        if candidate == gate.best:
            # Everything ran (the usual case): no candidate, and the plain cut, which removes a
            # part of what the aggressive one removes, cuts nothing either. Checking that the
            # text parses would cost several parses' worth on a long script.
            return
        if candidate is not None and parses(candidate) and gate.consider(candidate):
            return
