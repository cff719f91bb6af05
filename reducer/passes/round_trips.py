"""A value saved to a path and loaded back from it, read as the value itself.

    enc.save_pretrained(ckpt)                         enc.save_pretrained(ckpt)
    model = Wrapper(AutoModel.from_pretrained(ckpt))  ->  model = Wrapper(enc)

Scripts that train or build a model in one place and load it in another (a parent that writes the
checkpoint its spawned child reads, brought home by ``bring_home``; a save/load "to be safe")
keep the save, the load and the folder's path alive, and with them a config, a tokenizer and the
helpers that built them: the loaded object is a copy of the saved one. Where the same block saves
a name's value to a path and a later statement of that block loads from the same path (the same
text: ``option_defaults`` and ``temp_folders`` make the parent's and the child's spelling agree),
the load becomes the name. The save is left to the statement passes, which drop it when nothing
needs the folder any more.

Savers and loaders are matched by their method's name, as a person reads them
(``save_pretrained``/``save_model``/``torch.save`` … ``from_pretrained``/``torch.load``); what the
load did beyond copying (another dtype, new labels, a device map) the candidate drops, and the run
decides whether the failure needed it. Site by site: every load at once first, then one by one.
"""
from __future__ import annotations

import libcst as cst

from reducer.analysis.cst import body_statements, called_name, collect, replace_many, safe
from reducer.passes.base import Gate
from reducer.passes.loops import together_then_each

_SAVERS = {"save_pretrained", "save_model", "save"}
_LOADERS = {"from_pretrained", "load"}


def _path_of_load(call: cst.Call) -> cst.BaseExpression | None:
    """The path a loader call reads: its first positional argument, or the keyword Hugging Face
    and torch name it by."""
    for a in call.args:
        if a.keyword is None and not a.star:
            return a.value
        if a.keyword is not None and a.keyword.value in ("pretrained_model_name_or_path", "f"):
            return a.value
    return None


def _saved(stmt: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """``name.save_pretrained(path, ...)`` or ``torch.save(name, path)`` as a statement: (name, path)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    if not isinstance(call, cst.Call) or called_name(call.func) not in _SAVERS:
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    f = call.func
    if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.attr.value in ("save_pretrained", "save_model"):
        return (f.value.value, positional[0]) if positional else None
    if isinstance(f, cst.Attribute) and f.attr.value == "save" and len(positional) >= 2 \
            and isinstance(positional[0], cst.Name):
        return positional[0].value, positional[1]
    return None


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    targets = [t.target for a in collect(stmt, lambda n: isinstance(n, cst.Assign)) for t in a.targets]
    targets += [n.target for n in collect(stmt, lambda n: isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For)))]
    return any(isinstance(n, cst.Name) and n.value == name for t in targets for n in collect(t, lambda x: True))


def _blocks(module: cst.Module) -> list[list[cst.CSTNode]]:
    out = [list(module.body)]
    for node in collect(module, lambda n: isinstance(n, (cst.FunctionDef, cst.If, cst.With, cst.For, cst.While))):
        out.append(body_statements(node.body))
    return out


def sites(module: cst.Module) -> list[tuple[cst.Call, str]]:
    """(a load of a path the same block saved a name's value to before it, that name)."""
    out: list[tuple[cst.Call, str]] = []
    for block in _blocks(module):
        saved: dict[str, str] = {}     # path's text -> the name whose value was saved there
        for stmt in block:
            for key, name in list(saved.items()):
                if _binds(stmt, name):
                    del saved[key]          # the name holds another value from here on
            for call in collect(stmt, lambda n: isinstance(n, cst.Call) and called_name(n.func) in _LOADERS):
                path = _path_of_load(call)
                key = module.code_for_node(path) if path is not None else None
                if key in saved:
                    out.append((call, saved[key]))
            found = _saved(stmt)
            if found is not None:
                saved[module.code_for_node(found[1])] = found[0]
    return out


def _candidate(module: cst.Module, chosen: list[tuple[cst.Call, str]]) -> str | None:
    if not chosen:
        return None
    return safe(lambda: replace_many(module, [(call, cst.Name(name)) for call, name in chosen]))


def round_trips(gate: Gate) -> None:
    """Every load of a path the script saved to, read as the saved value (all at once, then one by one).

    Removes: the load (and with the next passes the path, the save and what only they needed).
    Never changes: a load from a path no earlier statement of its block saved to, or one whose
    saved name was bound again in between."""
    calls = lambda module: [c for c, _ in sites(module)]           # noqa: E731
    names = lambda module: {id(c): n for c, n in sites(module)}     # noqa: E731
    together_then_each(gate, calls, lambda module, call: [_candidate(module, [(call, names(module)[id(call)])])],
                       lambda module: _candidate(module, sites(module)))
