"""Names that only carry a value one line further, and imports another import already reaches.

- ``inline_variables``: ``x = expr`` followed at once by the one statement that reads ``x``
  (once) becomes that statement with ``expr`` in its place::

      out = model(input_ids=batch)
      loss = out.last_hidden_state.mean()     ->   model(input_ids=batch).last_hidden_state.mean().backward()
      loss.backward()

  Only the next statement of the same block, and only a name bound and read nowhere else in the
  script, or bound again (``model = Model.from_pretrained(p)``) before anything else reads it:
  the value is computed where it was, one statement later, nothing runs in between.
  A read further down the block is bindings.py's ``inline_single_use``: the two never propose
  the same site (``next_statement_bindings`` is the line between them).
- ``fold_imports``: ``import a.b as x`` / ``from a.b import c as x`` where the script also does
  ``import a``: ``x`` is written ``a.b`` / ``a.b.c`` at its uses and the import goes (a
  statement less; whether ``import a`` makes ``a.b`` reachable, the run decides).

- ``root_imports``: two or more imports from one package the script never imports as itself
  (``from torch.nn.parallel import DistributedDataParallel as DDP``, ``import torch.distributed
  as dist``) become one ``import torch``, their names written through it.

- ``inline_returns``: a function that only returns an expression and is called once, wherever
  (a loop's iterable, an argument: places the statement-level inlining cannot reach), becomes
  that expression with its parameters replaced by the call's arguments.

All the sites at once first, then site by site (``inline_returns``: function by function).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

import libcst as cst

from reducer.analysis.cst import collect, parse, render, replace_many
from reducer.analysis.names import BINDINGS, Role, Roles, census
from reducer.passes.base import Gate
from reducer.passes.loops import one_after_another, run_targets, together_then_each

_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString,
          cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)


# ---- inline_variables -------------------------------------------------------------------------
def _blocks(module: cst.Module) -> Iterable[Sequence[cst.BaseStatement]]:
    yield module.body
    for block in collect(module, lambda n: isinstance(n, cst.IndentedBlock)):
        yield block.body


def _single(line: cst.BaseStatement) -> cst.BaseSmallStatement | None:
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return line.body[0]
    return None


class _Reads(cst.CSTVisitor):
    """The ``Name`` nodes below a node that read ``name`` (not an attribute's or a keyword's name)."""

    def __init__(self, name: str) -> None:
        self.name, self.roles, self.found = name, Roles(), []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Name:
            if node.value == self.name and self.roles.of(node) is Role.READ:
                self.found.append(node)
        else:
            self.roles.decide(node)
        return True


def _name_nodes(node: cst.CSTNode, name: str) -> list[cst.Name]:
    v = _Reads(name)
    node.visit(v)
    return v.found


def _sites(module: cst.Module) -> list[tuple[cst.SimpleStatementLine, cst.Name, cst.BaseExpression]]:
    """(assignment line, the one read of its name in the next statement, the assigned value)."""
    names = census(module)
    bound = names.total(BINDINGS)
    reads = names.total({Role.READ, Role.AUG_ASSIGN})
    classes = {id(s) for c in collect(module, lambda n: isinstance(n, cst.ClassDef)) for s in c.body.body}
    out = []
    for body in _blocks(module):
        for line, after in zip(body, body[1:]):
            s = _single(line)
            if (id(line) in classes or not isinstance(s, cst.Assign) or len(s.targets) != 1
                    or not isinstance(s.targets[0].target, cst.Name)):
                continue
            name = s.targets[0].target.value
            nxt = _single(after)
            if (bound.get(name) != 1 or reads.get(name) != 1) and not _rebound_after(module, body, line, after, name):
                continue
            if nxt is None or isinstance(nxt, (cst.Global, cst.Nonlocal)):
                continue
            used = _name_nodes(nxt, name)
            # the read must not sit in a lambda or comprehension (evaluated later, or many times)
            deferred = [n for lam in collect(nxt, lambda n: isinstance(n, (cst.Lambda, cst.ListComp, cst.SetComp,
                                                                          cst.DictComp, cst.GeneratorExp)))
                        for n in _name_nodes(lam, name)]
            if len(used) == 1 and not deferred:
                out.append((line, used[0], s.value))
    return out


class _Mentions(cst.CSTVisitor):
    """Reads and bindings of ``name`` below a node; ``nested``: reads inside a def or a lambda."""

    def __init__(self, name: str) -> None:
        self.name, self.roles = name, Roles()
        self.reads = self.binds = self.nested = 0
        self._depth = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Name:
            if node.value == self.name:
                role = self.roles.of(node)
                if role is Role.READ:
                    self.reads += 1
                    self.nested += self._depth > 0
                elif role in BINDINGS:
                    self.binds += 1
        else:
            self.roles.decide(node)
            self._depth += isinstance(node, (cst.FunctionDef, cst.Lambda))
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        self._depth -= isinstance(node, (cst.FunctionDef, cst.Lambda))


def _mentions(node: cst.CSTNode, name: str) -> _Mentions:
    v = _Mentions(name)
    node.visit(v)
    return v


def _rebound_after(module: cst.Module, body: Sequence[cst.BaseStatement], line: cst.BaseStatement,
                   after: cst.BaseStatement, name: str) -> bool:
    """A name bound again before anything else reads it: ``model = Model(cfg)`` /
    ``model.save_pretrained(p)`` / ``model = Model.from_pretrained(p)``. The value bound at
    ``line`` is read only by ``after`` when ``after`` does not bind the name, the first later
    statement of the block that mentions it is a plain ``name = value`` whose value does not read
    it, and no function or lambda anywhere reads the name (``after`` could call one)."""
    if _mentions(module, name).nested or _mentions(after, name).binds:
        return False
    i = body.index(after)
    for later in body[i + 1:]:
        m = _mentions(later, name)
        if not m.reads and not m.binds:
            continue
        s = _single(later)
        return (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name)
                and s.targets[0].target.value == name and not _mentions(s.value, name).reads)
    return False


def _wrapped(value: cst.BaseExpression, atoms: tuple[type, ...] = _ATOMS) -> cst.BaseExpression:
    if isinstance(value, atoms) or value.lpar:
        return value
    return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


class _Inline(cst.CSTTransformer):
    def __init__(self, sites: list[tuple[cst.SimpleStatementLine, cst.Name, cst.BaseExpression]],
                 wrap: bool = True, atoms: tuple[type, ...] = _ATOMS) -> None:
        self.drop = {id(line) for line, _, _ in sites}
        self.put = {id(read): _wrapped(value, atoms) if wrap else value for _, read, value in sites}

    def on_leave(self, original: cst.CSTNode, updated):
        if id(original) in self.drop:
            return cst.RemoveFromParent()
        if id(original) in self.put:
            return self.put[id(original)]
        return updated


def _inline(module: cst.Module, sites) -> str | None:
    """The candidate; the value in parentheses only where the code means something else without."""
    try:
        wrapped = render(module.visit(_Inline(sites)))
        bare = render(module.visit(_Inline(sites, wrap=False)))
    except (cst.CSTValidationError, ValueError, TypeError):
        return None
    try:
        return bare if ast.dump(ast.parse(bare)) == ast.dump(ast.parse(wrapped)) else wrapped
    except (SyntaxError, ValueError):
        pass
    try:
        ast.parse(wrapped)
        return wrapped
    except (SyntaxError, ValueError):
        # a set or dict first in an f-string's field reads as an escaped brace (`{{...}.pop()}`):
        # in parentheses too, it is a value again
        return render(module.visit(_Inline(sites, atoms=())))


def next_statement_bindings(module: cst.Module) -> list[cst.SimpleStatementLine]:
    """The binding lines ``inline_variables`` moves into the next statement; what
    ``inline_single_use`` (reducer/passes/bindings.py) leaves to it."""
    return [line for line, _, _ in _sites(module)]


def _chained(module: cst.Module) -> str | None:
    """Every site, one after another (a value inlined into a line that is itself inlined next)."""
    def first(m: cst.Module) -> str | None:
        sites = _sites(m)
        return _inline(m, sites[:1]) if sites else None
    return one_after_another(module.code, first, 50)


def inline_variables(gate: Gate) -> None:
    """A value bound to a name and read once, in the next statement, moves into that statement.

    Removes: the binding statement (``loss = out.loss`` / ``loss.backward()`` → ``out.loss.backward()``).
    Never changes: a name read twice or read later than the next statement, nor the order in which
    the statements' own calls run."""
    def alternatives(module: cst.Module, line: cst.CSTNode) -> Iterable[str | None]:
        yield _inline(module, [s for s in _sites(module) if s[0] is line])

    together_then_each(gate, next_statement_bindings, alternatives, _chained)


# ---- fold_imports -----------------------------------------------------------------------------
def _dotted(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return f"{_dotted(expr.value)}.{expr.attr.value}"
    return ""


def _plain_imports(module: cst.Module) -> set[str]:
    """Top packages the script imports as themselves (``import torch``)."""
    out = set()
    for imp in collect(module, lambda n: isinstance(n, cst.Import)):
        for alias in imp.names:
            if alias.asname is None and isinstance(alias.name, cst.Name):
                out.add(alias.name.value)
    return out


def _foldable(module: cst.Module, tops: set[str] | None = None) -> list[tuple[cst.SimpleStatementLine, str, str]]:
    """(the import's line, the name it binds, the dotted path that replaces it), for the packages
    in ``tops`` (default: those the script imports as themselves)."""
    tops = _plain_imports(module) if tops is None else tops
    if not tops:
        return []
    bound = census(module).total(BINDINGS)
    out = []
    for line in module.body:
        s = _single(line)
        if isinstance(s, cst.Import) and len(s.names) == 1 and s.names[0].asname is not None:
            path = _dotted(s.names[0].name)
            name = s.names[0].asname.name
        elif (isinstance(s, cst.ImportFrom) and not s.relative and s.module is not None
              and not isinstance(s.names, cst.ImportStar) and len(s.names) == 1):
            alias = s.names[0]
            path = f"{_dotted(s.module)}.{_dotted(alias.name)}"
            name = alias.asname.name if alias.asname is not None else alias.name
        else:
            continue
        if (isinstance(name, cst.Name) and path.split(".")[0] in tops and "." in path
                and bound.get(name.value) == 1 and name.value not in tops):
            out.append((line, name.value, path))
    return out


class _Fold(cst.CSTTransformer):
    """The import ``line`` goes (or becomes ``instead``); each read of ``name`` becomes ``path``."""
    def __init__(self, line: cst.CSTNode, name: str, path: str, instead: cst.CSTNode | None = None) -> None:
        self.line, self.name, self.path, self.instead = line, name, cst.parse_expression(path), instead
        self.roles = Roles()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self.line:
            return False
        self.roles.decide(node)
        return True

    def on_leave(self, original: cst.CSTNode, updated):
        if original is self.line:
            return self.instead if self.instead is not None else cst.RemoveFromParent()
        if type(original) is cst.Name and original.value == self.name and self.roles.of(original) is Role.READ:
            return self.path.deep_clone()
        return updated


def _fold(module: cst.Module, line: cst.CSTNode) -> str | None:
    for site, name, path in _foldable(module):
        if site is line:
            try:
                return render(module.visit(_Fold(line, name, path)))
            except (cst.CSTValidationError, ValueError, TypeError, cst.ParserSyntaxError):
                return None
    return None


def _rooted(module: cst.Module, top: str) -> str | None:
    """Every import of ``top``'s submodules and names folded into one ``import top``, put where
    the first of them was; None when fewer than two would go (no statement saved)."""
    if top in _plain_imports(module):
        return None
    sites = _foldable(module, {top})
    if len(sites) < 2:
        return None
    line, name, path = sites[0]
    try:
        code = render(module.visit(_Fold(line, name, path, cst.parse_statement(f"import {top}\n"))))
    except (cst.CSTValidationError, ValueError, TypeError, cst.ParserSyntaxError):
        return None
    for _ in sites[1:]:     # the others now fold as they would under a plain `import top`
        m = cst.parse_module(code)
        rest = _foldable(m, {top})
        code = _fold(m, rest[0][0]) if rest else None
        if code is None:
            return None
    return code


def _roots(module: cst.Module) -> list[str]:
    """Packages two or more of whose imports one ``import pkg`` could replace: the sites
    ``_foldable`` finds for every package the script imports from but never as itself."""
    named = {_dotted(a.name).split(".")[0] for imp in collect(module, lambda n: isinstance(n, cst.Import))
             for a in imp.names}
    named |= {_dotted(imp.module).split(".")[0] for imp in collect(module, lambda n: isinstance(n, cst.ImportFrom))
              if imp.module is not None and not imp.relative}
    counts: dict[str, int] = {}
    for _, _, path in _foldable(module, named - _plain_imports(module)):
        top = path.split(".")[0]
        counts[top] = counts.get(top, 0) + 1
    return [top for top, n in counts.items() if n >= 2]


def root_imports(gate: Gate) -> None:
    """Several imports from one package with no ``import pkg`` of its own: one ``import pkg``
    takes their place, and each name they bound is written through it.

    Removes: ``from torch.nn.parallel import DistributedDataParallel as DDP`` and
    ``import torch.distributed as dist`` → ``import torch`` (their uses become
    ``torch.nn.parallel.DistributedDataParallel`` and ``torch.distributed``).
    Never changes: a package imported once (no statement saved), a name bound again elsewhere;
    whether ``import pkg`` makes each submodule reachable, the run decides."""
    for top in _roots(parse(gate.best)):
        candidate = _rooted(parse(gate.best), top)
        if candidate is not None:
            gate.consider(candidate)


def _fold_all(module: cst.Module) -> str | None:
    def first(m: cst.Module) -> str | None:
        sites = _foldable(m)
        return _fold(m, sites[0][0]) if sites else None
    return one_after_another(module.code, first, 20)


def fold_imports(gate: Gate) -> None:
    """An alias import that a plain ``import pkg`` of the script already reaches: its uses are spelled
    through ``pkg``.

    Removes: ``import torch.distributed as dist`` when ``import torch`` is there (its uses
    become ``torch.distributed``).
    Never changes: an import no plain ``import pkg`` of the script covers; whether ``pkg`` makes
    the submodule reachable, the run decides."""
    together_then_each(gate, lambda m: [line for line, _, _ in _foldable(m)],
                       lambda m, line: [_fold(m, line)], _fold_all)


# ---- inline_returns ---------------------------------------------------------------------------
def _returned(fn: cst.FunctionDef) -> cst.BaseExpression | None:
    """The expression a function does nothing but return (a docstring aside), or None."""
    body = [s for s in fn.body.body if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                                             and isinstance(s.body[0], cst.Expr)
                                             and isinstance(s.body[0].value, cst.SimpleString))]
    if len(body) != 1:
        return None
    s = _single(body[0])
    return s.value if isinstance(s, cst.Return) and s.value is not None else None


def _simple(expr: cst.BaseExpression) -> bool:
    """Evaluated twice it is still the same value, and cheap: a name, a literal, ``a.b``."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return True
    return isinstance(expr, cst.Attribute) and _simple(expr.value)


def _return_sites(module: cst.Module) -> list[tuple[cst.FunctionDef, cst.Call, dict[str, cst.BaseExpression]]]:
    """(function, its one call, the value each parameter takes there) for functions that only
    return an expression and are called once, as a plain call."""
    names = census(module)
    bound, reads = names.total(BINDINGS), names.total({Role.READ})
    in_class = {id(s) for c in collect(module, lambda n: isinstance(n, cst.ClassDef)) for s in c.body.body}
    calls: dict[str, list[cst.Call]] = {}
    for call in collect(module, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Name)):
        calls.setdefault(call.func.value, []).append(call)
    out = []
    for fn in collect(module, lambda n: isinstance(n, cst.FunctionDef)):
        name = fn.name.value
        value = _returned(fn)
        if (value is None or id(fn) in in_class or fn.decorators or fn.asynchronous is not None
                or bound.get(name) != 1 or reads.get(name) != 1 or len(calls.get(name, [])) != 1):
            continue
        p = fn.params
        if isinstance(p.star_arg, (cst.Param, cst.ParamStar)) or p.star_kwarg is not None or p.posonly_params \
                or p.kwonly_params:
            continue
        call = calls[name][0]
        if any(n is call for n in collect(fn, lambda n: isinstance(n, cst.Call))):
            continue        # recursive
        params = list(p.params)
        given: dict[str, cst.BaseExpression] = {}
        ok = True
        for i, arg in enumerate(call.args):
            if arg.star:
                ok = False
            elif arg.keyword is None:
                if i >= len(params):
                    ok = False
                else:
                    given[params[i].name.value] = arg.value
            else:
                given[arg.keyword.value] = arg.value
        for param in params:
            if param.name.value not in given:
                if param.default is None or not _simple(param.default):
                    ok = False
                else:
                    given[param.name.value] = param.default
        if not ok or set(given) != {q.name.value for q in params}:
            continue
        if any(len(_name_nodes(value, q)) > 1 and not _simple(e) for q, e in given.items()):
            continue
        out.append((fn, call, given))
    return out


class _Substitute(cst.CSTTransformer):
    def __init__(self, values: dict[str, cst.BaseExpression]) -> None:
        self.values, self.roles = values, Roles()

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.roles.decide(node)
        return not isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef))

    def on_leave(self, original: cst.CSTNode, updated):
        if (type(original) is cst.Name and original.value in self.values
                and self.roles.of(original) is Role.READ):
            return _wrapped(self.values[original.value].deep_clone())
        return updated


def _inline_return(module: cst.Module, fn: cst.FunctionDef) -> str | None:
    for site_fn, call, given in _return_sites(module):
        if site_fn is not fn:
            continue
        value = _returned(fn)
        try:
            body = cst.Module([cst.SimpleStatementLine([cst.Expr(value)])]).visit(_Substitute(given))
            expr = body.body[0].body[0].value
            pairs = [(fn, cst.RemoveFromParent()), (call, _wrapped(expr))]
            wrapped = replace_many(module, pairs)
            bare = replace_many(module, [(fn, cst.RemoveFromParent()), (call, expr)])
        except (cst.CSTValidationError, ValueError, TypeError):
            return None
        try:
            return bare if ast.dump(ast.parse(bare)) == ast.dump(ast.parse(wrapped)) else wrapped
        except (SyntaxError, ValueError):
            return wrapped
    return None


def inline_returns(gate: Gate) -> None:
    """A function that only returns an expression, called once anywhere (a loop's iterable, an
    argument): the expression, its parameters replaced by the arguments, in the call's place.

    Removes: the function and its call.
    Never changes: a function called twice, with a default or a star parameter, or a decorated one."""
    run_targets(gate, lambda m: [fn for fn, _, _ in _return_sites(m)], lambda m, fn: [_inline_return(m, fn)])
