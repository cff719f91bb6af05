"""Clean-up transformations: comments and docstrings, print/logging calls, unused imports, dead
definitions and assignments, redundant ``pass``. Dead code and empty ``if``s are removed by
reducer/passes/rewrites.py's ``drop_dead_code`` and ``drop_empty_ifs``, which other families run
on their own candidates too.

``bulk`` offers each as ONE candidate over the whole script (all comments at once, all unused
imports at once, ...): a single run that usually succeeds and saves dozens of single deletions.
``cleanup`` then removes unused names from multi-name imports one by one (runs of them).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from reducer.analysis.cst import StatementTransformer, body_statements, collect, collect_statements, parse, parses, render
from reducer.analysis.names import USES, Census, bound_name, uses
from reducer.passes.base import Gate
from reducer.passes.loops import delete_runs
from reducer.passes.rewrites import (chain_root, dead_code_removed, drop_dead_code, drop_empty_ifs, empty_ifs_removed,
                                     harmless_test, is_dead, is_string_statement, spread_kwargs, store_only_lines)

# Calls that only emit output. The ones that print a traceback are left to statement deletion:
# in a worker loop that logs and swallows, they ARE the failure.
_LOG_ROOTS = {"logging", "logger", "log", "LOGGER", "LOG", "_logger", "_log", "warnings"}
_LOG_METHODS = {"debug", "info", "warning", "warn", "error", "critical", "log", "fatal"}
_TRACEBACK_CALLS = {"exception", "print_exc", "print_exception", "format_exc", "print_stack"}


class _StripComments(cst.CSTTransformer):
    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine):
        return cst.RemoveFromParent() if updated.comment is not None else updated

    def leave_TrailingWhitespace(self, original, updated: cst.TrailingWhitespace):
        if updated.comment is not None:
            return updated.with_changes(comment=None, whitespace=cst.SimpleWhitespace(""))
        return updated


def _is_output_call(stmt: cst.CSTNode) -> bool:
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call)):
        return False
    call: cst.Call = stmt.body[0].value
    if any(a.keyword is not None and a.keyword.value in ("exc_info", "stack_info") for a in call.args):
        return False
    if isinstance(call.func, cst.Name):
        return call.func.value == "print"
    if isinstance(call.func, cst.Attribute):
        attr = call.func.attr.value
        if attr in _TRACEBACK_CALLS:
            return False
        return attr in _LOG_METHODS and chain_root(call.func.value) in _LOG_ROOTS
    return False


class _DropStatements(StatementTransformer):
    def __init__(self, drop: Callable[[cst.CSTNode], bool]) -> None:
        self.drop = drop

    def leave_SimpleStatementLine(self, original, updated):
        return cst.RemoveFromParent() if self.drop(original) else updated


# Each clean-up works on the tree (``_<name>(module, text)``; rewrites.py's ``dead_code_removed``
# and ``empty_ifs_removed`` likewise), so that the bulk chain parses once and renders once;
# ``text`` is the source the chain started from. No step adds a comment or a ``**``, so what that
# text lacks, the module lacks too: a cheap reason to skip a whole-tree rewrite. The public
# ``<name>(source)`` is the same step from text to text.

def _strip_comments_and_docstrings(module: cst.Module, text: str) -> cst.Module:
    if "#" in text:         # no '#', no comment: a long script is spared a whole-tree rewrite
        module = module.visit(_StripComments())
    # `description=__doc__` is common in argparse mains: then docstrings are data, and only
    # statement deletion (one run each) may take them
    if collect_statements(module, is_string_statement) and "__doc__" not in uses(module):
        module = module.visit(_DropStatements(is_string_statement))
    return module.with_changes(header=[h for h in module.header if h.comment is None],
                               footer=[f for f in module.footer if f.comment is None])


def strip_comments_and_docstrings(source: str) -> str:
    return render(_strip_comments_and_docstrings(parse(source), source))


def _drop_output_calls(module: cst.Module, text: str) -> cst.Module:
    return module.visit(_DropStatements(_is_output_call))


def drop_output_calls(source: str) -> str:
    return render(_drop_output_calls(parse(source), source))


class _DropRedundantPass(StatementTransformer):
    def _clean(self, updated):
        body = [s for s in updated.body if not (isinstance(s, cst.SimpleStatementLine)
                and all(isinstance(x, cst.Pass) for x in s.body))]
        return updated.with_changes(body=body) if body else updated

    def leave_IndentedBlock(self, original, updated):
        return self._clean(updated)

    def leave_Module(self, original, updated):
        return self._clean(updated)


def _drop_redundant_pass(module: cst.Module, text: str) -> cst.Module:
    return module.visit(_DropRedundantPass())


def drop_redundant_pass(source: str) -> str:
    return render(_drop_redundant_pass(parse(source), source))


class _SpreadKwargs(cst.CSTTransformer):
    def leave_Call(self, original, updated):
        arg = spread_literal_kwargs_of(updated)
        return updated if arg is None else spread_kwargs(updated, arg, arg.value)


def _spread_literal_kwargs(module: cst.Module, text: str) -> cst.Module:
    # the only rewrite that walks into expressions: with no '**' there is nothing to spread
    return module.visit(_SpreadKwargs()) if "**" in text else module


def spread_literal_kwargs(source: str) -> str:
    """``f(**{"hidden_size": 64})`` → ``f(hidden_size=64)``: the same call, as a person writes it
    (what is left once a registry entry is folded into the call)."""
    return render(_spread_literal_kwargs(parse(source), source))


def spread_literal_kwargs_of(call: cst.Call) -> cst.Arg | None:
    """The first ``**{"key": value}`` argument that can be written as keywords, if any."""
    for arg in call.args:
        if arg.star == "**" and isinstance(arg.value, cst.Dict) and all(
                isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) for e in arg.value.elements):
            explicit = {a.keyword.value for a in call.args if a.keyword is not None}
            keys = [e.key.evaluated_value for e in arg.value.elements]
            if len(set(keys)) == len(keys) and not explicit & set(keys):
                return arg
    return None


class _PruneImports(StatementTransformer):
    def __init__(self, used: dict[str, int]) -> None:
        self.used = used

    def leave_Import(self, original, updated):
        return self._prune(updated)

    def leave_ImportFrom(self, original, updated):
        if isinstance(updated.names, cst.ImportStar):
            return updated
        if isinstance(updated.module, cst.Name) and updated.module.value == "__future__":
            return updated
        return self._prune(updated)

    def _prune(self, updated):
        keep = [a for a in updated.names if self.used.get(bound_name(a), 0) > 0]
        if not keep:
            return cst.RemoveFromParent()
        if len(keep) == len(updated.names):
            return updated
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if isinstance(updated, cst.ImportFrom) and updated.rpar is not None and len(keep) == 1:
            return updated.with_changes(names=keep, lpar=None, rpar=None)
        return updated.with_changes(names=keep)

    def leave_SimpleStatementLine(self, original, updated):
        return updated if updated.body else cst.RemoveFromParent()


def _drop_unused_imports(module: cst.Module, text: str) -> cst.Module:
    return module.visit(_PruneImports(uses(module)))


def drop_unused_imports(source: str) -> str:
    return render(_drop_unused_imports(parse(source), source))


# ---- the passes -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One bulk clean-up: ``on_text`` from source to source, ``on_module`` the same on the tree.
    ``reparse``: in a chain, parse its rendered output again when the text has comments.
    Deleting a comment can leave blank lines at the end of a block that parsing gives to the
    statement after the block instead, and a later step may delete either one."""
    on_text: Callable[[str], str]
    on_module: Callable[[cst.Module, str], cst.Module]
    reparse: bool = False


BULK: list[Step] = [Step(strip_comments_and_docstrings, _strip_comments_and_docstrings, reparse=True),
                    Step(drop_output_calls, _drop_output_calls),
                    Step(spread_literal_kwargs, _spread_literal_kwargs),
                    Step(drop_empty_ifs, empty_ifs_removed),
                    Step(drop_unused_imports, _drop_unused_imports),
                    Step(drop_dead_code, dead_code_removed),
                    Step(drop_redundant_pass, _drop_redundant_pass)]


class _CleanupFacts(cst.CSTVisitor):
    """One walk over the script that tells whether any bulk clean-up would change it: on a
    long script that is already clean, one visit instead of seven parse-transform-render steps.
    Each check mirrors the step it stands for, on the script as it is."""

    def __init__(self) -> None:
        self.names = Census()
        self.changes = False            # a step changes the script whatever the names' uses are
        self.string_statements = False
        self.imports: list[cst.Import | cst.ImportFrom] = []
        self.maybe_dead: list[cst.CSTNode] = []     # top-level-of-a-body statements (not in a class)
        self._class_depth = [0]

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.names.on_visit(node)
        return super().on_visit(node)

    def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
        self.changes = self.changes or node.comment is not None

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        self.changes = self.changes or node.comment is not None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self._class_depth[-1] == 0:
            self.maybe_dead.append(node)
        if is_string_statement(node):
            self.string_statements = True
        if _is_output_call(node) or not isinstance(node.body[-1].semicolon, cst.MaybeSentinel):
            self.changes = True     # an output call, or a dangling ';' that rendering drops

    def _pass_lines(self, body: Sequence[cst.CSTNode]) -> None:
        passes = [isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body)
                  for s in body]
        self.changes = self.changes or (any(passes) and not all(passes))

    def visit_Module(self, node: cst.Module) -> None:
        self._pass_lines(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._pass_lines(node.body)

    def visit_If(self, node: cst.If) -> None:
        empty = all(isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body)
                    for s in body_statements(node.body))
        self.changes = self.changes or (empty and node.orelse is None and harmless_test(node.test))

    def visit_Call(self, node: cst.Call) -> None:
        if spread_literal_kwargs_of(node) is not None:
            self.changes = True

    def visit_Import(self, node: cst.Import) -> None:
        self.imports.append(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.imports.append(node)       # and on inside: `from m import (a,  # ...` holds comments

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self._class_depth[-1] == 0:
            self.maybe_dead.append(node)
        self._class_depth[-1] += 1

    def leave_ClassDef(self, original: cst.ClassDef) -> None:
        self._class_depth[-1] -= 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._class_depth[-1] == 0:
            self.maybe_dead.append(node)
        self._class_depth.append(0)     # a function body is a fresh statement list, even in a class

    def leave_FunctionDef(self, original: cst.FunctionDef) -> None:
        self._class_depth.pop()


@functools.lru_cache(maxsize=16)
def could_clean(source: str) -> bool:
    """Whether ``_apply(source, BULK)`` could differ from ``source`` (never False when it would)."""
    module = parse(source)
    facts = _CleanupFacts()
    module.visit(facts)
    used = facts.names.total(USES)
    if facts.changes or (facts.string_statements and "__doc__" not in used):
        return True
    for imp in facts.imports:
        if isinstance(imp.names, cst.ImportStar) or (
                isinstance(imp, cst.ImportFrom) and isinstance(imp.module, cst.Name) and imp.module.value == "__future__"):
            continue
        if any(used.get(bound_name(a), 0) == 0 for a in imp.names):
            return True
    stores = store_only_lines(module, used)
    if stores:
        return True
    return any(is_dead(stmt, used) for stmt in facts.maybe_dead)


def _as_parsed(module: cst.Module) -> cst.Module:
    """The module as parsing its rendered text would give it, where a later step can tell the
    difference: the parser hands the lines above the first statement to the module header (so
    they outlive that statement), and with no statement left, the footer's lines too."""
    if module.body:
        first = module.body[0]
        if not first.leading_lines:
            return module
        return module.with_changes(header=[*module.header, *first.leading_lines],
                                   body=[first.with_changes(leading_lines=()), *module.body[1:]])
    if module.footer:
        return module.with_changes(header=[*module.header, *module.footer], footer=())
    return module


def _apply(source: str, steps: Sequence[Step]) -> str | None:
    """The steps one after the other, as one candidate (None if it does not parse)."""
    try:
        if "\r" in source or not source.endswith("\n"):
            # What parsing infers from the text can change as steps delete lines: the newline a
            # filled-in `pass` gets (the first line's, if some are '\r\n'), and whether the text
            # ends with one. Rare texts: they keep the parse and render between steps.
            for step in steps:
                source = step.on_text(source)
        else:
            module = parse(source)
            for i, step in enumerate(steps):
                module = step.on_module(module, source)
                if step.reparse and "#" in source and i + 1 < len(steps):
                    module = parse(render(module))
                else:
                    module = _as_parsed(module)
            source = render(module)
    except (cst.ParserSyntaxError, cst.CSTValidationError, ValueError, RecursionError):
        return None
    return source if parses(source) else None


def bulk(gate: Gate) -> None:
    """All clean-ups as one candidate; if that run fails, each clean-up on its own.

    Removes: comments and docstrings, print/logging calls, unused imports, dead definitions and
    assignments, redundant ``pass`` — each kind as one candidate over the whole script.
    Never changes: a call that prints a traceback (``log.exception``, ``traceback.print_exc``: in a
    worker that swallows, they are the failure), an assignment whose value may have effects, a name
    something still reads."""
    if not could_clean(gate.best):
        return      # one walk says no clean-up changes it
    together = _apply(gate.best, BULK)
    if together == gate.best:
        return      # nothing to clean: no clean-up changes it on its own either
    if together is not None and gate.consider(together):
        return
    for step in BULK:
        c = _apply(gate.best, [step])
        if c is not None and c != gate.best:
            gate.consider(c)


def _multi_imports(module: cst.Module) -> list[cst.CSTNode]:
    return collect(module, lambda n: isinstance(n, (cst.Import, cst.ImportFrom))
                   and not isinstance(n.names, cst.ImportStar) and len(n.names) > 1)


def _set_names(node: cst.CSTNode, names: list) -> cst.CSTNode:
    names = list(names)
    if names and not isinstance(names[-1].comma, cst.MaybeSentinel):
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(names=names)


def cleanup(gate: Gate) -> None:
    """The bulk clean-ups, then unused names from multi-name imports.

    Removes: what ``bulk`` removes (see ``cleanup_bulk``), then unused names of multi-name imports,
    runs of them at a time.
    Never changes: an imported name something reads, and what ``bulk`` keeps."""
    bulk(gate)
    delete_runs(gate, _multi_imports, lambda n: n.names, _set_names)
