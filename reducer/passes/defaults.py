"""Class defaults in place of attribute reads: ``cfg.hidden_size`` becomes ``16`` where a class of
the script says ``hidden_size: int = 16``.

Training scripts carry their settings in a config class (a dataclass, or a class of plain class
attributes) built once and handed around: ``train(rank, cfg)`` through ``mp.spawn``,
``make_batches(cfg)``, ``torch.randint(0, cfg.vocab_size, ...)``. The traced run cannot always
say what such a read gave (the value goes to a builtin, or the object crossed into another
process), yet the class body spells it. Once every read is its literal, the class, the object and
the parameters that carried it are dead code.

Which object an attribute is read from is not known here, so this is a guess the run decides,
made only where it cannot be told wrong from the text alone: the name is given a literal by exactly
one class of the script (and is nothing else in any class), no attribute of that name is ever
assigned (``obj.x = ...``), and no construction of the class gives it another value
(``Config(x=3)`` gives 3 instead; a non-literal keyword, positional arguments or ``**kwargs`` at a
construction leave the name, or the class, alone). All the names at once first, then name by name.

The same for a script's command-line options (``option_defaults``): ``args.ckpt_dir`` becomes
``tempfile.gettempdir()`` where ``parser.add_argument("--ckpt-dir", default=tempfile.gettempdir())``
says so. The trace writes an option's value where it was recorded and the same in every run; what
it leaves is an option whose value differs between runs (a temporary folder, a free port) or was
read where nothing is recorded (inside a spawned child), and then the namespace, its parser and the
helper that built it all stay for one read. Read from a namespace only: a name bound to what
``parse_args`` returned (directly, or through a function of the script that returns it), or a
parameter that receives one; an option given twice, stored to, given by ``set_defaults``,
required or positional is left alone. The default the run gets when the option is not given on
the command line: a run given it there may fail otherwise, and then the run refuses the candidate.
"""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from reducer.analysis.artefacts import dotted, option_dest, string_value
from reducer.analysis.cst import collect, is_literal, parse, replace_many, safe
from reducer.passes.base import Gate
from reducer.passes.rewrites import drop_dead_code, drop_unread_bindings

_DYNAMIC = ("setattr", "__dict__", "vars(")


def _class_literals(cls: cst.ClassDef) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """(name, literal or None) for every name the class body binds; None: not a literal."""
    for stmt in cls.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name):
                    yield s.target.value, (s.value if s.value is not None and is_literal(s.value) else None)
                elif isinstance(s, cst.Assign):
                    for t in s.targets:
                        if isinstance(t.target, cst.Name):
                            yield t.target.value, (s.value if len(s.targets) == 1 and is_literal(s.value) else None)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            yield stmt.name.value, None


def _stored(module: cst.Module) -> set[str]:
    """Attribute names assigned anywhere (``x.name = ...``, ``x.name += ...``, ``for x.name in``)."""
    targets: list[cst.BaseExpression] = []
    for node in collect(module, lambda n: isinstance(n, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For,
                                                          cst.Del, cst.AsName))):
        if isinstance(node, cst.Assign):
            targets += [t.target for t in node.targets]
        elif isinstance(node, cst.AsName):
            targets.append(node.name)
        else:
            targets.append(node.target)
    out: set[str] = set()
    for t in targets:
        for a in collect(t, lambda n: isinstance(n, cst.Attribute)):
            out.add(a.attr.value)
    return out


def defaults(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """The attribute names this pass may replace, each with its literal."""
    if any(word in module.code for word in _DYNAMIC):
        return {}
    given: dict[str, list[cst.BaseExpression | None]] = {}
    owner: dict[str, str] = {}
    for cls in collect(module, lambda n: isinstance(n, cst.ClassDef)):
        for name, value in _class_literals(cls):
            given.setdefault(name, []).append(value)
            owner[name] = cls.name.value
    found = {name: values[0] for name, values in given.items() if len(values) == 1 and values[0] is not None}
    for name in _stored(module):
        found.pop(name, None)
    # constructions of a class that hold values of their own
    override: dict[str, cst.BaseExpression] = {}
    for call in collect(module, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Name)):
        mine = [name for name in found if owner.get(name) == call.func.value]
        if not mine:
            continue
        if any(a.keyword is None for a in call.args):      # positional or */** arguments
            for name in mine:
                found.pop(name, None)
            continue
        for a in call.args:
            name = a.keyword.value
            if name not in found:
                continue
            if not is_literal(a.value) or (name in override and not override[name].deep_equals(a.value)):
                found.pop(name)
                override.pop(name, None)
            else:
                override[name] = a.value
    found.update(override)
    return found


# ---- argparse options --------------------------------------------------------------------------
_PARSE = ("parse_args", "parse_known_args", "parse_intermixed_args")
# argparse converts a string default with ``type`` (and only a string default): these we can do here
_CONVERT = {"int": int, "float": float, "str": str}


def _keywords(call: cst.Call) -> dict[str, cst.BaseExpression]:
    return {a.keyword.value: a.value for a in call.args if a.keyword is not None}


def _string(node: cst.BaseExpression | None) -> str | None:
    return None if node is None else string_value(node)


def _option_value(call: cst.Call) -> cst.BaseExpression | None:
    """What ``args.<dest>`` holds when the command line does not give the option; None when that
    is not for the text to say (positional or required, a count or an append, a type we cannot
    apply)."""
    names = [_string(a.value) for a in call.args if a.keyword is None]
    kw = _keywords(call)
    if not names or not all(n and n.startswith("-") for n in names):
        return None                     # positional: the command line gives it
    if isinstance(kw.get("required"), cst.Name) and kw["required"].value == "True":
        return None
    action = _string(kw.get("action"))
    if "default" not in kw:
        return {None: cst.Name("None"), "store": cst.Name("None"), "store_true": cst.Name("False"),
                "store_false": cst.Name("True")}.get(action)
    if action not in (None, "store", "store_true", "store_false", "store_const"):
        return None
    default, kind = kw["default"], kw.get("type")
    text = _string(default)
    if kind is None or text is None:
        return default
    convert = _CONVERT.get(kind.value) if isinstance(kind, cst.Name) else None
    if convert is None:
        return cst.Call(kind, [cst.Arg(default)])
    try:
        return cst.parse_expression(repr(convert(text)))
    except ValueError:
        return None                     # argparse itself would refuse the default


def _returns_namespace(fn: cst.FunctionDef) -> bool:
    return any(isinstance(r.value, cst.Call) and _parsing(r.value)
               for r in collect(fn, lambda n: isinstance(n, cst.Return) and n.value is not None))


def _parsing(call: cst.BaseExpression) -> bool:
    """``parser.parse_args(...)``, or ``parser.parse_known_args(...)[0]``."""
    if isinstance(call, cst.Subscript):
        call = call.value
    return isinstance(call, cst.Call) and (dotted(call.func) or "").rsplit(".", 1)[-1] in _PARSE


def namespaces(module: cst.Module) -> set[str]:
    """Names that hold a parsed namespace: bound to ``parse_args()`` (or a function of the script
    that returns it), and the parameters such a name is passed to in a direct call."""
    builders = {f.name.value for f in collect(module, lambda n: isinstance(n, cst.FunctionDef)) if _returns_namespace(f)}
    out: set[str] = set()
    for node in collect(module, lambda n: isinstance(n, cst.Assign)):
        value = node.value.value if isinstance(node.value, cst.Subscript) and _parsing(node.value) else node.value
        if _parsing(value) or (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
                               and value.func.value in builders):
            out |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
    params = {f.name.value: [p.name.value for p in f.params.params]
              for f in collect(module, lambda n: isinstance(n, cst.FunctionDef))}
    for _ in range(3):                  # a namespace handed down a few calls
        for call in collect(module, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Name)):
            names = params.get(call.func.value, [])
            for i, a in enumerate(call.args):
                if isinstance(a.value, cst.Name) and a.value.value in out and not a.star:
                    if a.keyword is not None and a.keyword.value in names:
                        out.add(a.keyword.value)
                    elif a.keyword is None and i < len(names):
                        out.add(names[i])
    return out


def options(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """The options ``option_defaults`` may write, each with the value a run without it gets."""
    if any(word in module.code for word in _DYNAMIC):
        return {}
    given: dict[str, list[cst.BaseExpression | None]] = {}
    for call in collect(module, lambda n: isinstance(n, cst.Call)):
        last = (dotted(call.func) or "").rsplit(".", 1)[-1]
        if last == "add_argument":
            dest = option_dest(call)
            if dest:
                given.setdefault(dest, []).append(_option_value(call))
        elif last == "set_defaults":
            for name in _keywords(call):
                given.setdefault(name, []).append(None)
    found = {name: values[0] for name, values in given.items() if len(values) == 1 and values[0] is not None}
    for name in _stored(module):
        found.pop(name, None)
    return found


def _reads(module: cst.Module, names: set[str], owners: set[str] | None = None) -> list[cst.Attribute]:
    """Loads of ``x.name`` (not a call's function, not an assignment target); with ``owners``,
    only where ``x`` is one of those names."""
    calls = {id(c.func) for c in collect(module, lambda n: isinstance(n, cst.Call))}
    return [a for a in collect(module, lambda n: isinstance(n, cst.Attribute))
            if a.attr.value in names and id(a) not in calls
            and (owners is None or (isinstance(a.value, cst.Name) and a.value.value in owners))]


def _candidate(module: cst.Module, values: dict[str, cst.BaseExpression], owners: set[str] | None = None) -> str | None:
    reads = _reads(module, set(values), owners)
    if not reads:
        return None

    def build() -> str:
        out = replace_many(module, [(a, values[a.attr.value].deep_clone()) for a in reads])
        return drop_dead_code(out if owners is None else drop_unread_bindings(module.code, out))
    return safe(build)


def _offer(gate: Gate, find) -> None:
    """``find(module) -> (values, owners)``: every name at once, then name by name."""
    module = parse(gate.best)
    found, owners = find(module)
    if not found:
        return
    together = _candidate(module, found, owners)
    if together is not None and gate.consider(together):
        return
    remaining = sorted(name for name in found if _reads(module, {name}, owners))
    while len(remaining) > 1 or (remaining and together is None):
        module = parse(gate.best)
        now, owners = find(module)
        offers = ((name, _candidate(module, {name: now[name]}, owners)) for name in remaining if name in now)
        hit = gate.first((name, source) for name, source in offers if source is not None)
        if hit is None:
            return
        remaining = remaining[remaining.index(hit) + 1:]


def class_defaults(gate: Gate) -> None:
    """A config class's literal defaults written where ``cfg.x`` is read (all at once, then one by one).

    Removes: the reads of the class's fields, so the class and its instance can go.
    Never changes: a name more than one class gives, an attribute the script assigns anywhere, or
    one a construction of the class gives another value."""
    _offer(gate, lambda module: (defaults(module), None))


def option_defaults(gate: Gate) -> None:
    """A command-line option's default written where ``args.x`` is read (all at once, then one by one).

    Removes: the reads of a parsed namespace's options, so the namespace, the parser and the
    function that built it can go.
    Never changes: an attribute of anything but a namespace, an option given twice, stored to,
    given by ``set_defaults``, required or positional."""
    def find(module: cst.Module):
        owners = namespaces(module)
        return (options(module) if owners else {}), owners
    _offer(gate, find)
