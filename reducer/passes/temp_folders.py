"""A temporary folder the script makes, written as a relative folder a maintainer's run creates.

Scripts that save a checkpoint and load it back wrap the pair in ``with
tempfile.TemporaryDirectory() as d:`` (or bind ``d = tempfile.mkdtemp()``). A person writing the
repro by hand writes ``model.save_pretrained("tiny")``: every run of a candidate (and the final
check, alone in an empty folder) starts in a fresh folder of its own, so a relative name is as
clean as a temporary one, and the ``with``, its indentation and ``import tempfile`` go.

- ``with tempfile.TemporaryDirectory() as d: BODY`` → ``BODY`` with every read of ``d`` written
  ``'reprobot_d'`` (the ``reprobot_`` prefix, as the value recipes name the folders they write,
  reducer/analysis/recipes.py), for code that creates the folder itself (``save_pretrained``); else
  ``d = tempfile.mkdtemp()`` and ``BODY`` (the folder made, one level less);
- ``d = tempfile.mkdtemp()`` → ``d = 'reprobot_d'`` (the value passes then carry it to its uses);
- ``tempfile.gettempdir()`` → ``'.'``: the folder exists already, and a run's own folder is as
  much its own as the system's temporary one (an argparse default of ``--ckpt-dir`` written out
  by ``option_defaults`` lands here).

Every site at once first, then one by one.
"""
from __future__ import annotations

import libcst as cst

from reducer.analysis.cst import body_statements, collect, render
from reducer.analysis.names import BINDINGS, Role, Roles
from reducer.passes.base import Gate
from reducer.passes.loops import together_then_each

_MAKERS = {"TemporaryDirectory", "mkdtemp", "gettempdir"}


def _tempfile_names(module: cst.Module) -> tuple[set[str], set[str]]:
    """(names the tempfile module is bound to, maker functions imported from it by their own name)."""
    modules, makers = set(), set()
    for imp in collect(module, lambda n: isinstance(n, (cst.Import, cst.ImportFrom))):
        if isinstance(imp, cst.Import):
            for a in imp.names:
                if isinstance(a.name, cst.Name) and a.name.value == "tempfile":
                    modules.add(a.asname.name.value if a.asname else "tempfile")
        elif (isinstance(imp.module, cst.Name) and imp.module.value == "tempfile" and not imp.relative
              and not isinstance(imp.names, cst.ImportStar)):
            for a in imp.names:
                if isinstance(a.name, cst.Name) and a.name.value in _MAKERS and a.asname is None:
                    makers.add(a.name.value)
    return modules, makers


def _maker(call: cst.BaseExpression, modules: set[str], makers: set[str]) -> str | None:
    """``TemporaryDirectory`` / ``mkdtemp`` / ``gettempdir`` when ``call`` is one of them reached
    through tempfile."""
    if not isinstance(call, cst.Call):
        return None
    f = call.func
    if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value in modules \
            and f.attr.value in _MAKERS:
        return f.attr.value
    if isinstance(f, cst.Name) and f.value in makers:
        return f.value
    return None


class _Binds(cst.CSTVisitor):
    """Whether ``name`` is bound (assigned, a loop or ``as`` target, a parameter) below a node."""

    def __init__(self, name: str) -> None:
        self.name, self.roles, self.bound = name, Roles(), False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Name:
            if node.value == self.name and self.roles.of(node) in BINDINGS:
                self.bound = True
        else:
            self.roles.decide(node)
        return True


def _rebinds(nodes, name: str) -> bool:
    v = _Binds(name)
    for n in nodes:
        n.visit(v)
    return v.bound


class _ReadsAsLiteral(cst.CSTTransformer):
    """Every read of ``name`` below the node → the string literal."""

    def __init__(self, name: str, literal: str) -> None:
        self.name, self.literal, self.roles = name, literal, Roles()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is not cst.Name:
            self.roles.decide(node)
        return True

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if original.value == self.name and self.roles.of(original) is Role.READ:
            return cst.SimpleString(repr(self.literal))
        return updated


def _sites(module: cst.Module) -> list[cst.CSTNode]:
    modules, makers = _tempfile_names(module)
    if not modules and not makers:
        return []
    out: list[cst.CSTNode] = []
    for node in collect(module, lambda n: isinstance(n, (cst.With, cst.SimpleStatementLine))):
        if isinstance(node, cst.With):
            if (len(node.items) == 1 and node.asynchronous is None and node.items[0].asname is not None
                    and isinstance(node.items[0].asname.name, cst.Name)
                    and _maker(node.items[0].item, modules, makers) == "TemporaryDirectory"
                    and not _rebinds(body_statements(node.body), node.items[0].asname.name.value)):
                out.append(node)
        elif (len(node.body) == 1 and isinstance(node.body[0], cst.Assign) and len(node.body[0].targets) == 1
              and isinstance(node.body[0].targets[0].target, cst.Name)
              and _maker(node.body[0].value, modules, makers) == "mkdtemp"):
            out.append(node)
    out += [c for c in collect(module, lambda n: isinstance(n, cst.Call))
            if not c.args and _maker(c, modules, makers) == "gettempdir"]
    return out


def _mkdtemp(call: cst.Call) -> cst.Call:
    """``tempfile.mkdtemp()`` spelled as the script reached ``TemporaryDirectory``."""
    if isinstance(call.func, cst.Attribute):
        return cst.Call(call.func.with_changes(attr=cst.Name("mkdtemp")))
    return cst.Call(cst.Name("mkdtemp"))


def _rewritten(node: cst.CSTNode, made: bool) -> cst.CSTNode | cst.FlattenSentinel:
    """The site as a relative literal (``made``: the folder made first, with mkdtemp, for code
    that writes into it rather than creating it)."""
    if isinstance(node, cst.Call):                      # gettempdir(): there is nothing to make
        return node if made else cst.SimpleString("'.'")
    if isinstance(node, cst.With):
        item = node.items[0]
        name = item.asname.name.value
        if made:
            if isinstance(item.item.func, cst.Name):     # `from tempfile import TemporaryDirectory`
                return node
            body = [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], _mkdtemp(item.item))])]
            body += body_statements(node.body)
        else:
            body = [s.visit(_ReadsAsLiteral(name, f"reprobot_{name}")) for s in body_statements(node.body)]
        if body:
            body[0] = body[0].with_changes(leading_lines=node.leading_lines)
        return cst.FlattenSentinel(body)
    if made:
        return node
    assign = node.body[0]
    name = assign.targets[0].target.value
    return node.with_changes(body=[assign.with_changes(value=cst.SimpleString(repr(f"reprobot_{name}")))])


class _Rewrite(cst.CSTTransformer):
    def __init__(self, targets: list[cst.CSTNode], made: bool) -> None:
        self.targets, self.made = {id(t) for t in targets}, made

    def on_leave(self, original: cst.CSTNode, updated):
        # the inner sites first: a with inside a with is rewritten on the way out
        if id(original) in self.targets:
            return _rewritten(updated, self.made)
        return updated


def _candidate(module: cst.Module, targets: list[cst.CSTNode], made: bool = False) -> str | None:
    try:
        out = render(module.visit(_Rewrite(targets, made)))
    except (cst.CSTValidationError, ValueError, TypeError):
        return None
    return None if out == module.code else out


def temp_folders(gate: Gate) -> None:
    """Every temporary folder at once first, then one by one (see the module docstring).

    Removes: the ``with`` of a temporary folder (a statement and a level), and with the last of
    them the tempfile import (cleanup).
    Never changes: a ``with`` holding other items, a name the body binds again, a temporary *file*
    (``NamedTemporaryFile``: its handle is read, not only its name), a call not reached through
    ``tempfile``."""
    together_then_each(gate, _sites, lambda module, node: [_candidate(module, [node]),
                                                          _candidate(module, [node], made=True)],
                       lambda module: _candidate(module, _sites(module)) if _sites(module) else None)
