"""The boundary call first: the one call in the script's own code that entered the library where
the failure was raised, written out with the values its arguments had when it failed, as a whole
program — the imports it needs and that call:

    import textwrap
    textwrap.shorten('Summarise the release notes for 2.3', width=4, placeholder=' [truncated]')

Offered in the prelude, before the first cut: if it fails the same way, the search goes on from
it (usually nothing is left to do); if not, one run is lost.

Where the call needs something that cannot be written as a value (an object of the script's own
class, a parser or a tokenizer built at run time), a second candidate keeps the backward slice
that builds it and only that: the statements that bind the names the unwritten parts read (a
local assignment before the call, hoisted; the top-level definitions they read, transitively)
and the imports.

A failure in one rank of a launched job (torchrun, accelerate launch) is written for every rank:
the launcher recorded the same call as each rank entered it (``reducer.analysis.boundary.peer_calls``), the
values that differ between ranks become ``(r0, r1)[<the rank>]`` at the smallest part that
differs, and the process-wide state the call ran in (a process group, from the target's
``process_state`` recipe) is set up before it.

What it must never change: the callee (a library function or method, spelled through the
script's own import, or imported by its module when the script reached it through a variable),
the arguments' order, keywords and values. A value the static provenance check says may come
from the environment or a file, or that spells a secret, is never written (the call's own
expression stays, and with it the slice that computes it). Values come from
``reducer.analysis.boundary``: the failing call's own, not the latest call at that line.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from reducer.passes.base import Gate

_BUILTINS = frozenset(dir(builtins))


@dataclass
class _Parts:
    imports: list[str] = field(default_factory=list)    # import statements, in the script's order
    unresolved: set[str] = field(default_factory=set)    # script names the call still reads
    setup: list[str] = field(default_factory=list)      # a recipe's statements, run before the call
    ok: bool = True

    def take(self, recipe: dict) -> str:
        """A value's recipe (reducer/analysis/recipes.py): its imports and setup joined to these; its text."""
        for line in recipe.get("imports") or []:
            if line not in self.imports:
                self.imports.append(line)
        for line in recipe.get("setup") or []:
            if line not in self.setup:
                self.setup.append(line)
        return str(recipe["expr"])

    def absorb(self, other: _Parts) -> None:
        """A part written on its own (kept only if it was written whole) joined to these."""
        self.imports += [i for i in other.imports if i not in self.imports]
        self.setup += [s for s in other.setup if s not in self.setup]
        self.unresolved |= other.unresolved


# A library function that only passes its arguments on (torch.no_grad's ``decorate_context``, a
# module's ``__call__``): what it received is what the call site gave, its first one the receiver.
_WRAPPERS = frozenset({"decorate_context", "wrapper", "wrapped", "inner", "_wrapped_call_impl", "_call_impl",
                       "__call__", "wrapped_func", "new_func", "_fn"})


# What an object's own call enters (``obj(...)``), unlike a decorator's wrapper around a method,
# whose first argument is the method's receiver.
_CALLED = frozenset({"__call__", "_wrapped_call_impl", "_call_impl"})


def _primary(text: str) -> bool:
    """``text`` can take ``.attr`` or ``(...)`` after it without parentheses."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return isinstance(node, (ast.Call, ast.Attribute, ast.Name, ast.Subscript, ast.List, ast.Dict, ast.Tuple))


@dataclass
class _Received:
    """What the callee the failing line entered received, laid out as a call site reads it."""
    positional: list[dict]          # descriptions, the receiver first where there is one
    keywords: dict[str, dict]       # by name: named parameters, then **kwargs entries
    defaults: set[str]              # named parameters that held their default
    receiver: bool                  # positional[0] is the receiver (self / cls)
    named: list[str]                # the callee's named parameters, in order
    name: str = ""                  # the callee's own name (``__call__`` for an object called)


def _spelled(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else (
        call.func.id if isinstance(call.func, ast.Name) else None)


def _received(callee: dict | None, call: ast.Call) -> _Received | None:
    """The callee's record matched to ``call``: by name, or through a pass-through wrapper."""
    if not callee:
        return None
    name = callee.get("name", "")
    spelled = _spelled(call)
    wrapper = name in _WRAPPERS or name.startswith("_wrapped")
    if name != spelled and not wrapper:
        return None
    params = [(str(p[0]), p[1]) for p in callee.get("params", []) if isinstance(p, list) and len(p) == 2]
    varargs = [d for d in callee.get("varargs", []) if isinstance(d, dict)]
    varkw = {str(k): d for k, d in (callee.get("varkw") or []) if isinstance(d, dict)}
    positional = [d for _, d in params] + varargs
    keywords = {n: d for n, d in params}
    keywords.update(varkw)
    defaults = {n for n, d in params if d.get("default")}
    first = params[0][0] if params else None
    # the receiver: ``self``/``cls`` by name, or a classmethod's first parameter by what it held
    # (a class, for ``Model.from_pretrained(...)`` however the parameter is called)
    receiver = first in ("self", "cls") or (
        isinstance(call.func, ast.Attribute) and name == spelled and bool(params)
        and params[0][1].get("type") == "builtins:type") or (not params and wrapper and (
        isinstance(call.func, ast.Attribute) or isinstance(call.func, ast.Name)) and bool(varargs)
        and len(varargs) > len(call.args))
    return _Received(positional, keywords, defaults, receiver, [n for n, _ in params], name)


def _wrapped_receiver(b, callee: dict | None, call: ast.Call, source: str) -> bool:
    """False when a pass-through wrapper (``torch.no_grad``'s ``decorate_context`` around
    ``generate``) received, as its first argument, an object of another type than the receiver
    of ``call``: that method call is not the one the wrapper ran (``req.get`` beside
    ``model.generate`` on one line)."""
    if not callee or callee.get("name") not in _WRAPPERS or not isinstance(call.func, ast.Attribute):
        return True
    varargs = [d for d in callee.get("varargs") or [] if isinstance(d, dict)]
    want = varargs[0].get("type") if varargs else None
    text = _segment(source, call.func.value)
    have = b.type_of(text) if text is not None else None
    if have is None and text is not None and b.value(text) is not None:
        try:        # a receiver recorded as a literal (a dict): the literal's type
            have = "builtins:" + type(ast.literal_eval(b.value(text))).__name__
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            have = None
    return not want or not have or want == have


def _callee_for(b, call: ast.Call, source: str) -> dict | None:
    """The callee record ``call`` entered: a constructor call entered its class's ``__init__``,
    whose ``self`` is of the class the call spells (``DDP(model)`` with DDP imported as an alias),
    so the record is renamed to the spelling, as ``_Builder.constructed`` does for a made object."""
    callee = getattr(b, "callee", None)
    if not callee or callee.get("name") != "__init__" or _spelled(call) is None:
        return callee
    params = [p for p in callee.get("params", []) if isinstance(p, list) and len(p) == 2]
    kind = params[0][1].get("type") if params and params[0][0] == "self" and isinstance(params[0][1], dict) else None
    text = _segment(source, call.func)
    if not kind or text is None:
        return callee
    if b.object_of(text) == kind or kind.rsplit(":", 1)[-1].rsplit(".", 1)[-1] == _spelled(call):
        return {**callee, "name": _spelled(call)}
    return callee


def _imports(tree: ast.Module) -> dict[str, tuple[int, str]]:
    """bound name -> (order, the import statement that binds only it), over every import of the
    script (a guard's, a function's too): the candidate is one flat module."""
    out: dict[str, tuple[int, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                bound = a.asname or a.name.split(".")[0]
                text = f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
                out.setdefault(bound, (node.lineno, text))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            mod = "." * node.level + (node.module or "")
            for a in node.names:
                if a.name == "*":
                    continue
                bound = a.asname or a.name
                text = f"from {mod} import {a.name}" + (f" as {a.asname}" if a.asname else "")
                out.setdefault(bound, (node.lineno, text))
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _segment(source: str, node: ast.AST) -> str | None:
    return ast.get_source_segment(source, node)


def _calls_at(tree: ast.Module, line: int) -> list[ast.Call]:
    """The calls whose text covers ``line``, innermost (latest start, shortest) first."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return sorted(calls, key=lambda c: ((c.end_lineno or c.lineno) - c.lineno,
                                        (c.end_col_offset or 0) - c.col_offset))


def _importable(obj: str | None) -> tuple[str, str] | None:
    """("textwrap", "shorten") for "textwrap:shorten": a module-level function or class of a
    library module, spelled ``module.name`` after ``import module``."""
    if not obj or ":" not in obj:
        return None
    mod, qual = obj.split(":", 1)
    if not mod or mod in ("__main__", "builtins") or mod.startswith("_") or "<" in qual:
        return None
    if not all(p.isidentifier() for p in mod.split(".")) or not all(p.isidentifier() for p in qual.split(".")):
        return None
    return mod, qual


class _Builder:
    def __init__(self, source: str, tree: ast.Module, boundary, allowed) -> None:
        self.source, self.tree, self.b, self.allowed = source, tree, boundary, allowed
        self.imports = _imports(tree)
        from reducer.analysis.provenance import secret_values
        self._secrets = secret_values()
        self.received: _Received | None = None     # set per call by ``call``
        # a receiver held by a global of the script written as that global (its constructor call
        # would lose what the script did to it after building it)
        self.aliases = False
        self._depth = 0                              # constructor calls written inside one another

    def rebuilt(self, description: dict | None, parts: _Parts) -> str | None:
        """A recorded description as text: its literal, or its recipe (never one spelling a secret)."""
        if not description:
            return None
        from reducer.analysis.provenance import leaked
        value = description.get("value")
        if isinstance(value, str):
            try:
                ast.literal_eval(value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                value = None
            if value is not None and leaked(value, self._secrets) is None:
                return value
        recipe = description.get("recipe")
        if isinstance(recipe, dict) and isinstance(recipe.get("expr"), str):
            whole = "\n".join([*recipe.get("imports", []), *recipe.get("setup", []), recipe["expr"]])
            if leaked(whole, self._secrets) is None:
                return parts.take(recipe)
        return None

    def closed(self, node: ast.AST) -> bool:
        """Reads only imported names and builtins (and binds none): it can stand alone."""
        if any(isinstance(n, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom,
                              ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) for n in ast.walk(node)):
            return False
        return all(n in self.imports or (n in _BUILTINS and not self._rebound(n)) for n in _names(node))

    def _rebound(self, name: str) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(self.tree)) \
            or any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
                   for n in ast.walk(self.tree))

    def value(self, node: ast.AST) -> str | None:
        """The recorded value of this expression, where it may be written into the repro."""
        text = _segment(self.source, node)
        if text is None:
            return None
        value = self.b.value(text)
        if value is None or not self.allowed(text, [value]):
            return None
        # the script's own enum members are written as they are, and need their class: not here
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
        return value

    def expr(self, node: ast.AST, parts: _Parts, literal_only: bool) -> str | None:
        """The text that stands for ``node`` in the candidate."""
        text = _segment(self.source, node)
        if text is None:
            return None
        recipe = self.b.recipe_of(text) if hasattr(self.b, "recipe_of") else None
        if recipe is not None and recipe.get("setup"):
            # a path the script wrote (its own text, or a constant): the save that writes it, first
            return self.rebuilt({"recipe": recipe}, parts)
        if self.closed(node):
            self._need(_names(node), parts)
            return text
        value = self.value(node)
        if value is not None:
            return value
        member = _importable(self.b.member_of(text))
        if member is not None and member[0] != "__main__":
            mod, qual = member
            if f"import {mod}" not in parts.imports:
                parts.imports.append(f"import {mod}")
            return f"{mod}.{qual}"
        own = self.own_members(node)
        if own is not None:
            parts.unresolved |= own[1]
            return own[0]
        # a recipe is judged by what it spells at run time (the launcher drops one carrying an
        # environment value or a file's content), not by the static taint: a model or a tensor
        # flows through every helper of the script, and that taint would keep them all
        recipe = self.b.recipe_of(text) if hasattr(self.b, "recipe_of") else None
        if recipe is not None:
            return self.rebuilt({"recipe": recipe}, parts)
        if literal_only:
            return None
        alias = self._alias(text, parts)
        if alias is not None:       # the object a global holds (a worker's ``self.tok``): from it
            return alias
        parts.unresolved |= {n for n in _names(node) if n not in self.imports and n not in _BUILTINS}
        self._need(_names(node) & set(self.imports), parts)
        return text

    def _alias(self, text: str, parts: _Parts) -> str | None:
        """The script's global that held the object ``text`` stood for, unless the failing function
        binds that name itself (there it is not the global); taken into ``parts`` as a name the
        slice builds."""
        alias = self.b.alias_of(text) if hasattr(self.b, "alias_of") else None
        if alias is None:
            return None
        holder = self._holder(self.b.line)
        if holder is not None and alias in {n.id for n in ast.walk(holder)
                                            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}:
            return None
        parts.unresolved.add(alias)
        return alias

    def argument(self, node: ast.AST, parts: _Parts, literal_only: bool, position: int | None,
                 keyword: str | None) -> str | None:
        """An argument of the failing call: as ``expr`` writes it, else what the callee received
        in its place (a call in the argument, such as ``build(n)``, is never run again here)."""
        got = self.expr(node, parts, True)
        if got is not None:
            return got
        r = self.received
        if r is not None:
            if keyword is not None:
                desc = r.keywords.get(keyword)
            else:
                i = (position or 0) + (1 if r.receiver else 0)
                desc = r.positional[i] if i < len(r.positional) else None
            trial = _Parts()
            out = self.rebuilt(desc, trial)
            if out is not None:     # what the callee received (the launcher dropped what came from outside)
                parts.absorb(trial)
                return out
            if desc is not None:
                out = self.constructed(desc.get("made"), desc.get("type"), parts, literal_only)
                if out is not None:
                    return out
        return None if literal_only else self.expr(node, parts, False)

    def spread(self, call: ast.Call, parts: _Parts) -> list[str] | None:
        """``**expr`` at the call site written as the keywords the callee received through it:
        its ``**kwargs`` entries and named parameters that the call did not give and that did not
        hold their default. None when they are not known."""
        r = self.received
        if r is None or len([k for k in call.keywords if k.arg is None]) != 1:
            return None
        given = {k.arg for k in call.keywords if k.arg}
        taken = set(r.named[:len([a for a in call.args if not isinstance(a, ast.Starred)]) + (1 if r.receiver else 0)])
        out = []
        for name, desc in r.keywords.items():
            if name in given or name in taken or name in r.defaults or name in ("self", "cls"):
                continue
            if name in r.named and not self.b.callee.get("known_defaults"):
                continue        # a named parameter with no defaults known: it may be its default
            if not name.isidentifier():
                return None
            text = self.rebuilt(desc, parts)
            if text is None:
                return None
            out.append(f"{name}={text}")
        return out

    def own_members(self, node: ast.AST) -> tuple[str, set[str]] | None:
        """A recorded value that spells members of the script's own enums (``{"dtype": DType.F16}``):
        written as it is, with the classes it names kept (their definitions are the slice)."""
        text = _segment(self.source, node)
        value = self.b.value(text) if text is not None else None
        if value is None or not self.allowed(text, [value]):
            return None
        try:
            tree = ast.parse(value, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        names = _names(tree)
        classes = {s.name for s in self.tree.body if isinstance(s, ast.ClassDef)}
        if not names or not names <= classes:
            return None
        return value, names

    def _need(self, names: set[str], parts: _Parts) -> None:
        for n in sorted(names, key=lambda n: self.imports[n][0] if n in self.imports else 0):
            if n in self.imports and self.imports[n][1] not in parts.imports:
                parts.imports.append(self.imports[n][1])

    def func(self, call: ast.Call, parts: _Parts, literal_only: bool) -> str | None:
        func = call.func
        text = _segment(self.source, func)
        if text is None:
            return None
        if self.closed(func):
            self._need(_names(func), parts)
            return text
        # a library function reached through a variable: spelled through its module
        found = _importable(self.b.object_of(text))
        if found is not None and "." not in found[1] and not self.b.type_of(text) in ("builtins:method",):
            mod, qual = found
            stmt = f"import {mod}"
            if stmt not in parts.imports:
                parts.imports.append(stmt)
            return f"{mod}.{qual}"
        r = self.received
        if isinstance(func, ast.Attribute) and r is not None and r.receiver and r.name in _CALLED:
            # an attribute called (``self.inner(batch)`` entering the collator's ``__call__``): the
            # callee's ``self`` is the whole ``self.inner``, not ``self``
            built = self._built(text, parts, literal_only)
            if built is not None:
                return built
        if isinstance(func, ast.Attribute):
            receiver = func.value
            rtext = _segment(self.source, receiver)
            if rtext is None:
                return None
            if self.closed(receiver):
                self._need(_names(receiver), parts)
                return text
            value = self.value(receiver)
            if value is not None:
                return f"({value}).{func.attr}"
            # the global that holds the receiver, with what the script did to it (``slice``)
            alias = self._alias(rtext, parts) if self.aliases and not literal_only else None
            if alias is not None:
                return f"{alias}.{func.attr}"
            built = self._built(rtext, parts, literal_only)
            if built is not None:
                return f"{built}.{func.attr}"
            if literal_only:
                return None
            parts.unresolved |= {n for n in _names(receiver) if n not in self.imports and n not in _BUILTINS}
            self._need(_names(receiver) & set(self.imports), parts)
            return text
        built = self._built(text, parts, literal_only) if isinstance(func, ast.Name) else None
        if built is not None:       # an object called: a model's forward
            return built
        if literal_only:
            return None
        parts.unresolved |= {n for n in _names(func) if n not in self.imports and n not in _BUILTINS}
        return text

    def _built(self, text: str, parts: _Parts, literal_only: bool) -> str | None:
        """The receiver (or called object) rebuilt by its recipe: recorded at the line, else what
        the callee received as ``self``; else the library constructor call that built it."""
        recipe = self.b.recipe_of(text) if hasattr(self.b, "recipe_of") else None
        out = None
        mine = self.received.positional[0] if self.received is not None and self.received.receiver \
            and self.received.positional else None
        if recipe is not None:
            out = self.rebuilt({"recipe": recipe}, parts)
        elif mine is not None:
            out = self.rebuilt(mine, parts)
        if out is None:
            made = (self.b.made_of(text) if hasattr(self.b, "made_of") else None) or (mine or {}).get("made")
            kind = self.b.type_of(text) or (mine or {}).get("type")
            out = self.constructed(made, kind, parts, literal_only)
        if out is None:
            return None
        return out if _primary(out) else f"({out})"

    def constructed(self, made: dict | None, kind: str | None, parts: _Parts, literal_only: bool) -> str | None:
        """A library object the script built with a constructor call and no recipe rebuilds (a
        Trainer, a DataLoader): that call, written as the failing call is, from what its
        ``__init__`` received; an argument nothing rebuilds keeps its text and its slice, where
        that call is in the failing function (its names are that function's)."""
        if not isinstance(made, dict) or not isinstance(made.get("callee"), dict) or not kind:
            return None
        line = made.get("line")
        name = kind.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
        nodes = [c for c in _calls_at(self.tree, line) if _spelled(c) == name] if isinstance(line, int) else []
        if not nodes or self._depth > 1:
            return None
        if not literal_only and self._holder(line) is not self._holder(self.b.line):
            literal_only = True
        saved = self.received
        self.received = _received({**made["callee"], "name": name}, nodes[0])
        self._depth += 1
        try:
            trial = _Parts()
            text = self.written(nodes[0], trial, literal_only)
        finally:
            self.received = saved
            self._depth -= 1
        if text is None:
            return None
        parts.absorb(trial)
        return text

    def call(self, call: ast.Call, literal_only: bool) -> tuple[str, _Parts] | None:
        parts = _Parts()
        self.received = _received(_callee_for(self.b, call, self.source), call)
        text = self.written(call, parts, literal_only)
        return None if text is None else (text, parts)

    def written(self, call: ast.Call, parts: _Parts, literal_only: bool) -> str | None:
        """``call`` as text, for what ``self.received`` says its callee received."""
        func = self.func(call, parts, literal_only)
        if func is None:
            return None
        args: list[str] = []
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                t = self.expr(a.value, parts, literal_only)
                if t is None:
                    return None
                args.append("*" + t)
                continue
            t = self.argument(a, parts, literal_only, i, None)
            if t is None:
                return None
            args.append(t)
        for k in call.keywords:
            if k.arg is None:
                t = self.expr(k.value, parts, True)
                if t is not None:
                    args.append(f"**{t}")
                    continue
                spread = self.spread(call, parts)
                if spread is not None:
                    args.extend(spread)
                    continue
                t = None if literal_only else self.expr(k.value, parts, False)
                if t is None:
                    return None
                args.append(f"**{t}")
                continue
            t = self.argument(k.value, parts, literal_only, None, k.arg)
            if t is None:
                return None
            args.append(f"{k.arg}={t}")
        return f"{func}({', '.join(args)})"

    def receiver_guess(self, call: ast.Call) -> str | None:
        """``module.Class().method(values)`` where the receiver is a library object built with no
        arguments we know of: a guess the oracle checks (a ConfigParser, a JSONDecoder)."""
        if not isinstance(call.func, ast.Attribute):
            return None
        rtext = _segment(self.source, call.func.value)
        found = _importable(self.b.type_of(rtext or ""))
        if found is None or "." in found[1]:
            return None
        parts = _Parts()
        args: list[str] = []
        for a in call.args:
            inner = a.value if isinstance(a, ast.Starred) else a
            t = self.expr(inner, parts, True)
            if t is None:
                return None
            args.append(("*" if isinstance(a, ast.Starred) else "") + t)
        for k in call.keywords:
            t = self.expr(k.value, parts, True)
            if t is None:
                return None
            args.append(f"{k.arg}={t}" if k.arg else f"**{t}")
        mod, qual = found
        imports = parts.imports + ([f"import {mod}"] if f"import {mod}" not in parts.imports else [])
        return "\n".join(imports + [f"{mod}.{qual}().{call.func.attr}({', '.join(args)})"]) + "\n"

    # ---- the slice: what builds the parts that cannot be written as values --------------------
    def slice(self, call_text: str, parts: _Parts, line: int, mutations: bool = False) -> str | None:
        """Imports + the statements that bind ``parts.unresolved`` (transitively) + the call.

        A name the call reads is looked up in the failing function first: a plain assignment
        before the call (hoisted), a value the launcher recorded, a parameter (the argument of
        the function's one call site, when that is at the top level); then at the top level. A
        name a top-level definition reads is looked up at the top level only (or it is that
        definition's own local). A name the call needs that none of these binds: no slice.

        ``mutations``: a top-level name taken comes with the top-level statements that change
        the object it holds (``tok.chat_template = {...}``, ``model.resize_token_embeddings(n)``,
        ``cfg["k"] = v``): before the call's line when the call is at the top level; all of them
        when it is in a function, which the top level may call after them."""
        top = {}    # name -> top-level statement binding it
        for stmt in self.tree.body:
            for n in _binds(stmt):
                if n not in _mutated(stmt):
                    top.setdefault(n, stmt)
        changes: dict[str, list[ast.stmt]] = {}
        if mutations:
            in_function = self._holder(line) is not None
            for stmt in self.tree.body:
                if in_function or stmt.lineno < line:
                    for n in _mutated(stmt):
                        changes.setdefault(n, []).append(stmt)
        local = self._local_bindings(line)
        params = self._parameters(line)
        chosen: list[ast.stmt] = []
        hoisted: list[ast.stmt] = []
        todo: list[tuple[str, bool]] = [(n, True) for n in sorted(parts.unresolved)]
        done: set[tuple[str, bool]] = set()
        imports = list(parts.imports)
        assigned: list[str] = []
        while todo:
            name, in_function = todo.pop()
            if (name, in_function) in done:
                continue
            done.add((name, in_function))
            reads: set[str] = set()
            top_reads: set[str] = set()
            if in_function and self._recorded(name) is not None:
                # the value the failing frame held: better than the code that computed it
                assigned.append(f"{name} = {self._recorded(name)}")
                continue
            elif in_function and name in local:
                stmt = local[name]
                if stmt not in hoisted:
                    hoisted.append(stmt)
                reads = _free(stmt)
            elif in_function and name in params:
                if params[name] is None:
                    return None
                text, names = params[name]
                assigned.append(f"{name} = {text}")
                top_reads = names
            elif name in top and not isinstance(top[name], (ast.Import, ast.ImportFrom)):
                for stmt in [top[name], *(c for c in changes.get(name, []) if c.lineno > top[name].lineno)]:
                    if stmt not in chosen:
                        chosen.append(stmt)
                    top_reads |= _free(stmt)
            elif name in self.imports:
                if self.imports[name][1] not in imports:
                    imports.append(self.imports[name][1])
                continue
            elif name in _BUILTINS:
                continue
            elif in_function:
                return None         # a loop variable, a name we have no value for
            else:
                continue            # a top-level definition's own local
            for n in sorted(reads, reverse=True):
                todo.append((n, True))
            for n in sorted(top_reads, reverse=True):
                todo.append((n, False))
        chosen.sort(key=lambda s: s.lineno)
        hoisted.sort(key=lambda s: s.lineno)
        body = [self._text(s) for s in chosen]
        hoist = [_dedent(self._text(s)) for s in hoisted]
        if any(t is None for t in body + hoist):
            return None
        order = {text: (line, text) for line, text in self.imports.values()}
        imports.sort(key=lambda t: order.get(t, (0, t)))
        return "\n".join(_merged(imports) + body + assigned[::-1] + hoist + parts.setup + [call_text]) + "\n"   # type: ignore[operator]

    def _text(self, stmt: ast.stmt) -> str | None:
        """A statement's whole lines, its decorators included (a dataclass stays one)."""
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        end = stmt.end_lineno or stmt.lineno
        lines = self.source.splitlines()
        if start < 1 or end > len(lines):
            return None
        return "\n".join(lines[start - 1:end])

    def _holder(self, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        holder = None
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
                if holder is None or node.lineno > holder.lineno:
                    holder = node
        return holder

    def _parameters(self, line: int) -> dict[str, tuple[str, set[str]] | None]:
        """parameter -> (the argument's text at the function's one call site, the names it
        reads), when that call is a statement of the top level; None when it is not known."""
        holder = self._holder(line)
        if holder is None:
            return {}
        a = holder.args
        names = [p.arg for p in [*a.posonlyargs, *a.args]]
        out: dict[str, tuple[str, set[str]] | None] = {n: None for n in names + [p.arg for p in a.kwonlyargs]}
        calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id == holder.name]
        top_calls = [c for c in _module_level(self.tree) if c in calls]
        if len(calls) != 1 or len(top_calls) != 1:
            return out
        call = calls[0]
        if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords):
            return out
        given = dict(zip(names, call.args))
        given.update({k.arg: k.value for k in call.keywords if k.arg})
        for n, node in given.items():
            text = ast.get_source_segment(self.source, node)
            if text is not None and n in out:
                out[n] = (text, _names(node))
        return out

    def _recorded(self, name: str) -> str | None:
        """A variable of the failing frame whose value was recorded and may be written."""
        value = self.b.value(name)
        if value is None or not self.allowed(name, [value]):
            return None
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
        return value

    def _local_bindings(self, line: int) -> dict[str, ast.stmt]:
        """In the function that holds ``line``: name -> the one plain assignment before it that
        binds the name (not in a loop or a branch: hoisted as it is)."""
        holder = None
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
                if holder is None or node.lineno > holder.lineno:
                    holder = node
        if holder is None:
            return {}
        out: dict[str, ast.stmt] = {}
        counts: dict[str, int] = {}
        for node in ast.walk(holder):
            for n in _binds(node) if isinstance(node, ast.stmt) else ():
                counts[n] = counts.get(n, 0) + 1
        for stmt in holder.body:
            if stmt.lineno >= line:
                break
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and getattr(stmt, "value", None) is not None:
                for n in _binds(stmt):
                    if counts.get(n) == 1:
                        out[n] = stmt
        return out


def _merged(imports: list[str]) -> list[str]:
    """``from m import a`` and ``from m import b`` as ``from m import a, b`` (where the first one
    stood): a recipe brings its classes one import each, a person writes one line per module."""
    out: list[str] = []
    names: dict[str, list[str]] = {}
    for line in imports:
        head, sep, name = line.partition(" import ")
        if head.startswith("from ") and sep and "," not in name and "(" not in name:
            if head not in names:
                names[head] = []
                out.append(head)
            if name not in names[head]:
                names[head].append(name)
        elif line not in out:
            out.append(line)
    return [f"{line} import {', '.join(names[line])}" if line in names else line for line in out]


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """The nodes the module itself runs: not inside a function, a class or a lambda."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _binds(stmt: ast.AST) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in stmt.names]
    return []


def _mutated(stmt: ast.stmt) -> set[str]:
    """Names whose object a top-level statement changes without binding the name: an attribute
    or item assigned (``tok.pad_token = ...``, ``cfg["k"] += 1``) or a method called on it as a
    statement (``model.resize_token_embeddings(n)``)."""
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        targets = [stmt.value.func]
    out = set()
    for t in targets:
        if isinstance(t, (ast.Attribute, ast.Subscript)):
            root = t
            while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                root = root.func if isinstance(root, ast.Call) else root.value
            if isinstance(root, ast.Name):
                out.add(root.id)
    return out


def _free(stmt: ast.stmt) -> set[str]:
    """Names a statement reads from outside (an over-approximation: every name it loads but
    those it binds itself, parameters included)."""
    loads = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    stores = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    params = {a.arg for n in ast.walk(stmt) if isinstance(n, ast.arguments)
              for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, *([n.vararg] if n.vararg else []),
                        *([n.kwarg] if n.kwarg else [])]}
    inner = {n.name for n in ast.walk(stmt) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return loads - stores - params - inner - set(_binds(stmt))


def _dedent(text: str | None) -> str | None:
    if text is None:
        return None
    import textwrap
    return textwrap.dedent(text)


def _peers(b, boundaries) -> list:
    """The same call's records in the other ranks of a launched job (one per rank, a watched
    entry first), when ``b`` is a rank's failure."""
    if getattr(b, "rank", None) is None:
        return []
    name = (b.callee or {}).get("name")
    qualname = (b.callee or {}).get("qualname")
    by_rank: dict[int, object] = {}
    for o in sorted(boundaries, key=lambda o: not getattr(o, "entry", False)):
        r = getattr(o, "rank", None)
        if r is None or r == b.rank or r in by_rank or o.line != b.line:
            continue
        if name and (o.callee or {}).get("name") not in (None, name):
            continue
        if qualname and (o.callee or {}).get("qualname") not in (None, qualname):
            continue       # another class's __init__ entered on the same line
        by_rank[r] = o
    return [by_rank[r] for r in sorted(by_rank)]


def _per_rank(b, own: tuple[str, _Parts],
              others: list[tuple[int, tuple[str, _Parts] | None]]) -> tuple[str, _Parts] | None:
    """One call for every rank: where the ranks' values differ, each differing part written per
    rank and indexed by the candidate's own rank (``vocab_size=(26, 25)[dist.get_rank()]``).
    The failing rank's call alone when another rank's cannot be written or not every rank of the
    job was seen (no tuple to index)."""
    calls = {b.rank: own, **{r: got for r, got in others}}
    if any(got is None for got in calls.values()) or sorted(calls) != list(range(len(calls))):
        return own
    texts = [calls[r][0] for r in sorted(calls)]           # type: ignore[index]
    if len(set(texts)) == 1:
        return own
    state = b.state if isinstance(b.state, dict) else {}
    rank = state.get("rank") if isinstance(state.get("rank"), dict) else \
        {"expr": 'int(os.environ["RANK"])', "imports": ["import os"]}
    try:
        trees = [ast.parse(t, mode="eval").body for t in texts]
        index = ast.parse(str(rank["expr"]), mode="eval").body
        text = ast.unparse(_merge_nodes(trees, index))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return own
    parts = _Parts()
    for got in calls.values():
        parts.absorb(got[1])                                # type: ignore[index]
    for line in rank.get("imports") or []:
        if line not in parts.imports:
            parts.imports.append(line)
    return text, parts


def _merge_nodes(nodes: list[ast.AST], index: ast.expr) -> ast.AST:
    """The nodes as one: equal parts once, a differing part as ``(r0, r1, ...)[index]`` at the
    smallest node where the ranks differ."""
    first = nodes[0]
    if all(ast.dump(n) == ast.dump(first) for n in nodes[1:]):
        return first
    same_shape = all(type(n) is type(first) for n in nodes) and all(
        (isinstance(getattr(n, f), list) and len(getattr(n, f)) == len(getattr(first, f)))
        or (isinstance(getattr(n, f), ast.AST) and isinstance(getattr(first, f), ast.AST))
        or getattr(n, f) == getattr(first, f)
        for n in nodes for f in first._fields)
    if not same_shape or isinstance(first, ast.Constant):
        return ast.Subscript(value=ast.Tuple(elts=list(nodes), ctx=ast.Load()), slice=index, ctx=ast.Load())
    out = type(first)()
    for f in first._fields:
        value = getattr(first, f)
        if isinstance(value, list):
            setattr(out, f, [_merge_nodes([getattr(n, f)[i] for n in nodes], index)
                             if isinstance(value[i], ast.AST) else value[i] for i in range(len(value))])
        elif isinstance(value, ast.AST):
            setattr(out, f, _merge_nodes([getattr(n, f) for n in nodes], index))
        else:
            setattr(out, f, value)
    return out


def _with_state(b, parts: _Parts) -> None:
    """The process-wide state the call ran in (a process group), set up before everything else."""
    state = getattr(b, "state", None)
    if not isinstance(state, dict) or not state.get("setup"):
        return
    for line in state.get("imports") or []:
        if line not in parts.imports:
            parts.imports.append(line)
    parts.setup[:0] = [line for line in state["setup"] if line not in parts.setup]


def _started(b) -> bool:
    """The call ran in a rank the script started itself (``process_state``'s ``start``)."""
    state = getattr(b, "state", None)
    start = state.get("start") if isinstance(state, dict) else None
    return isinstance(start, dict) and isinstance(start.get("call"), str) \
        and str(start.get("param", "")).isidentifier()


def _ranks_program(start: dict, parts: _Parts, text: str) -> str | None:
    """The call and its setup as the body of a rank's function, which the program starts in every
    rank (``start``'s call, its ``{target}`` the function):

        def run_rank(rank):
            dist.init_process_group('gloo', init_method=..., rank=rank, world_size=2)
            torch.distributed.all_gather(..., torch.zeros((3, 2)[rank]))

        torch.multiprocessing.start_processes(run_rank, nprocs=2, start_method='fork')"""
    import textwrap
    imports = parts.imports + [i for i in start.get("imports") or [] if i not in parts.imports]
    body = "\n".join(parts.setup + [text])
    try:
        trees = [ast.parse(t) for t in [*imports, body]]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    taken = {n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)} | {
        a.asname or a.name.split(".")[0] for t in trees for n in ast.walk(t)
        if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    target = next((n for n in ("run_rank", "rank_main", "reprobot_rank") if n not in taken), None)
    if target is None:
        return None
    return "\n".join(_merged(imports) + ["", "", f"def {target}({start['param']}):", textwrap.indent(body, "    "),
                                          "", "", str(start["call"]).format(target=target)]) + "\n"


def candidates(source: str, boundaries, allowed) -> list[str]:
    """Whole-program candidates, most promising first: per boundary of the target failure, the
    calls on its line with every part written as a value (innermost first), then a library
    receiver built with no arguments, then the slices that keep what cannot be written."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    literal: list[str] = []
    guesses: list[str] = []
    slices: list[str] = []
    for b in [b for b in boundaries if not getattr(b, "entry", False)][:2]:
        builder = _Builder(source, tree, b, allowed)
        peers = [_Builder(source, tree, p, allowed) for p in _peers(b, boundaries)]
        calls = _calls_at(tree, b.line)
        # the call that entered the recorded callee first: the one the failure went through; where
        # only a pass-through wrapper was seen, the outermost call (its arguments' calls had ended)
        entered = {id(c): _callee_for(b, c, source) for c in calls}
        matched = [c for c in calls if _spelled(c) == (entered[id(c)] or {}).get("name")]
        # Where a call on the line is spelled as the recorded callee, the others are its
        # arguments' calls, which had returned (``req.get("params", {})`` in
        # ``model.generate(**enc, **req.get("params", {}))``): never the failing call.
        received = [c for c in reversed(calls) if _received(entered[id(c)], c) is not None
                    and _wrapped_receiver(b, entered[id(c)], c, source)]
        calls = matched or received or calls
        for call in calls:
            got = builder.call(call, literal_only=True)
            if got is not None and peers:
                got = _per_rank(b, got, [(p.b.rank, p.call(call, literal_only=True)) for p in peers])
            if got is not None:
                text, parts = got
                _with_state(b, parts)
                if _started(b):
                    # ranks the candidate starts itself: only a call written whole runs in them
                    program = None if parts.unresolved else _ranks_program(b.state["start"], parts, text)
                    if program is not None:
                        literal.append(program)
                elif not parts.unresolved:
                    literal.append("\n".join(_merged(parts.imports) + parts.setup + [text]) + "\n")
                else:       # values that name the script's own classes: with their definitions
                    for changes in (True, False):
                        sliced = builder.slice(text, parts, b.line, mutations=changes)
                        if sliced is not None and sliced not in literal:
                            literal.append(sliced)
            guess = builder.receiver_guess(call)
            if guess is not None:
                guesses.append(guess)
            if _started(b):
                continue
            aliased = None
            if any("global" in v for v in getattr(b, "values", {}).values() if isinstance(v, dict)):
                builder.aliases = True
                aliased = builder.call(call, literal_only=False)
                builder.aliases = False
            if aliased is not None and aliased[1].unresolved:
                _with_state(b, aliased[1])
                sliced = builder.slice(aliased[0], aliased[1], b.line, mutations=True)
                if sliced is not None and sliced not in slices:
                    slices.append(sliced)
            got = builder.call(call, literal_only=False)
            if got is not None:
                _with_state(b, got[1])
            if got is not None and got[1].unresolved:
                for changes in (True, False):
                    sliced = builder.slice(got[0], got[1], b.line, mutations=changes)
                    if sliced is not None and sliced not in slices:
                        slices.append(sliced)
    out: list[str] = []
    for c in literal + guesses + slices:
        if c not in out and c.strip() != source.strip():
            out.append(c)
    return out


def boundary_call(gate: Gate) -> None:
    """Offer the boundary call (see the module's docstring) before anything else is tried.

    Removes: everything but the imports and the boundary call written out with its recorded
    arguments (or, for arguments that have no source form, the backward slice that builds them);
    accepted when it has fewer statements, even with more tokens (values written out).
    Never changes: the call's callee or the values it received in the traced run; a value that
    varied between runs or has no source form is never written as a literal."""
    trace = gate.trace
    boundaries = getattr(trace, "boundary", None)
    if not boundaries or gate.best != trace.source:
        return
    from reducer.analysis.boundary import matching
    exc_type = getattr(trace, "target_exc_type", "") or ""
    ranked = matching(list(boundaries), exc_type, gate.failure_message)
    allowed = trace._allowed() if hasattr(trace, "_allowed") else (lambda expr, values: True)
    found = candidates(gate.best, ranked, allowed)
    if found:
        # a few statements whose rebuilt values may be long (a dataset's items): fewer statements
        # is smaller here; the value passes shrink the values next
        with gate.whole_programs():
            gate.first([(i, c) for i, c in enumerate(found)])
