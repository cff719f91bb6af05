"""Shrink values: drop entries from list/tuple/set/dict displays (a ``device_map`` entry), make
numbers 0/1/small (``max_new_tokens=512`` → ``1``), shorten strings, and replace a compound
expression by one of its parts (``a + b``, ``a or b``, ``x if c else y``, a call by one of its
arguments or its receiver, ``{...}[key]`` by one of the dict's values)."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

import libcst as cst

from reducer.analysis.cst import collect, replace, safe
from reducer.passes.base import Gate
from reducer.passes.loops import delete_runs, run_targets
from reducer.passes.rewrites import SIZE_WORDS, without_trailing_comma

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


# ``dist``: torch.distributed as every tutorial imports it
_FACTORIES = ("torch", "nn", "np", "numpy", "F", "dist")


def _sized(call: cst.Call) -> bool:
    """A call that builds something sized from its arguments: a class (a layer, a config, a
    model; not an exception), or a function of torch/numpy (``torch.randn(2, 3)``)."""
    func = call.func
    names = []
    while isinstance(func, cst.Attribute):
        names.append(func.attr.value)
        func = func.value
    if isinstance(func, cst.Name):
        names.append(func.value)
    if not names:
        return False
    last, root = names[0], names[-1]
    if last.endswith(("Error", "Exception", "Warning", "Exit")):
        return False
    return last[:1].isupper() or root in _FACTORIES


class _CallArguments(cst.CSTVisitor):
    """Ids of the integer literals and displays inside the arguments of a call that builds
    something sized (reducer/passes/literals.py's ``_sized``), or given to a size-like keyword:
    ``nn.Linear(8, 4)``, ``torch.randn((2, 3))``, ``torch.tensor([[1, 2]])``, ``hidden_size=8``."""

    def __init__(self) -> None:
        self.calls: list[bool] = []
        self.marks: list[bool] = []
        self.found: set[int] = set()

    def visit_Call(self, node: cst.Call) -> bool:
        self.calls.append(_sized(node))
        return True

    def leave_Call(self, original: cst.Call) -> None:
        self.calls.pop()

    def visit_Arg(self, node: cst.Arg) -> bool:
        keyword = node.keyword.value if node.keyword is not None else ""
        self.marks.append(bool(self.calls and self.calls[-1]) or bool(keyword and SIZE_WORDS.search(keyword)))
        return True

    def leave_Arg(self, original: cst.Arg) -> None:
        self.marks.pop()

    def visit_DictElement(self, node: cst.DictElement) -> bool:
        # a config written as a dict (``{"num_hidden_layers": 2}``, json.dump'ed and read back by
        # ``Config.from_dict``): its size-like entries are sizes all the same (heldout8's CLIP
        # ranks reached ``intermediate_size: 0, num_hidden_layers: 0`` through a JSON file)
        word = node.key.evaluated_value if isinstance(node.key, cst.SimpleString) else None
        self.marks.append(isinstance(word, str) and bool(SIZE_WORDS.search(word)))
        return True

    def leave_DictElement(self, original: cst.DictElement) -> None:
        self.marks.pop()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if any(self.marks) and isinstance(node, (cst.Integer, *_CONTAINERS)):
            self.found.add(id(node))
        return super().on_visit(node)


def call_arguments(module: cst.Module) -> set[int]:
    v = _CallArguments()
    module.visit(v)
    return v.found


def keyword_displays(module: cst.Module) -> set[int]:
    """Ids of the displays given whole as a keyword argument (``stop_strings=[".", "\\n"]``), or
    bound once to a name given whole as one (``STOPS = [...]`` … ``stop_strings=STOPS``): a setting
    the call reads. Emptied, it is usually another setting (no stop strings, no target modules, an
    empty device map) that a library treats apart: transformers-31435's ``max() arg is an empty
    sequence`` came back from an empty list by another path than the user's."""
    out: set[int] = set()
    given: set[str] = set()
    for call in collect(module, lambda n: isinstance(n, cst.Call)):
        for a in call.args:
            if a.keyword is None or a.star:
                continue
            if isinstance(a.value, _CONTAINERS):
                out.add(id(a.value))
            elif isinstance(a.value, cst.Name):
                given.add(a.value.value)
    if given:
        bound: dict[str, list[cst.BaseExpression]] = {}
        for node in collect(module, lambda n: isinstance(n, cst.Assign) and len(n.targets) == 1
                            and isinstance(n.targets[0].target, cst.Name)):
            bound.setdefault(node.targets[0].target.value, []).append(node.value)
        out |= {id(values[0]) for name, values in bound.items()
                if name in given and len(values) == 1 and isinstance(values[0], _CONTAINERS)}
    return out


def shrink_containers(gate: Gate) -> None:
    """Delete runs of entries from every container display.

    Removes: entries of list, tuple, set and dict displays (a ``device_map`` entry), runs of them
    at a time.
    Never changes: the entries that stay, or their order; an entry whose value the failure's
    message shows; a display handed to a call is never
    emptied (``torch.tensor([])``, a shape ``()``-less of its sizes: a zero-element tensor or
    layer takes other code paths than the user's, and a maintainer cannot trust it), nor one
    given as a keyword argument, directly or through a name bound once (``stop_strings=[]``)."""
    handed: set[int] = set()
    keep = message_values(gate.failure_message)

    def owners(module: cst.Module) -> list[cst.CSTNode]:
        handed.clear()
        handed.update(call_arguments(module) | keyword_displays(module))
        return containers(module)

    def set_items(node: cst.CSTNode, items: list) -> cst.CSTNode:
        if not items and id(node) in handed:
            raise ValueError("a display handed to a call keeps one entry")
        kept = {id(i) for i in items}
        if any(id(e) not in kept and _in_message(getattr(e, "value", e), keep) for e in _elements(node)):
            # a config entry whose value the message shows (`out_features=32` from
            # `intermediate_size: 32`): dropping it would change what a maintainer compares
            raise ValueError("an entry the failure's message shows stays")
        return _set_elements(node, items)
    delete_runs(gate, owners, _elements, set_items)


# ---- scalar literals -------------------------------------------------------------------------
_SCALARS = (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString)
_COMPOUND_EXPRESSIONS = (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp, cst.Call, cst.Subscript)




def smaller_ints(text: str) -> list[str]:
    """0, 1, then half. A run on a GPU is expensive, so a number that must stay costs at most
    three runs; one that may shrink keeps halving, since the target is offered again."""
    try:
        n = int(text.replace("_", ""), 0)
    except ValueError:
        return ["0", "1"]
    return ["0", "1"] + ([str(n // 2)] if n > 3 else [])


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
        return [cst.Integer("0"), cst.Integer("1")]
    if isinstance(node, cst.SimpleString):
        return [cst.SimpleString(v) for v in shorter_strings(node)]
    if isinstance(node, cst.FormattedString):
        # `f"mean {report.mean():.1f}"` → `report.mean()`: the call may be what fails
        parts = [p.expression for p in node.parts if isinstance(p, cst.FormattedStringExpression)]
        return [cst.SimpleString('""'), *parts]
    if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
        return [node.left, node.right]
    if isinstance(node, cst.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, cst.Call):
        # hoist a child into its parent: `sys.exit(main())` → `main()`, `s.replace(a, b)` → `s`
        out = [a.value for a in node.args if not a.star]
        if isinstance(node.func, cst.Attribute):
            out.append(node.func.value)
        return out
    if isinstance(node, cst.Subscript) and isinstance(node.value, (cst.Dict, cst.List, cst.Tuple)):
        # `{"a": x, "b": y}[key]` → one of the values, whatever the key
        return [e.value for e in node.value.elements if isinstance(e, (cst.DictElement, cst.Element))]
    return []


def _alternatives(module: cst.Module, node: cst.CSTNode, handed: set[int] = frozenset()) -> Iterable[str | None]:
    for value in _values(node):
        if id(node) in handed and isinstance(value, cst.Integer) and _below_one(value.value, node):
            continue        # a size handed to a call never shrinks to zero elements
        if not isinstance(node, _SCALARS):
            # keep the outer parentheses the operation had, so precedence cannot change
            if node.lpar and not value.lpar:
                value = value.with_changes(lpar=node.lpar, rpar=node.rpar)
        yield safe(lambda value=value: replace(module, node, value))


def _is_string(node: cst.CSTNode, value: str | None = None, prefix: str | None = None) -> bool:
    if not isinstance(node, cst.SimpleString):
        return False
    try:
        text = ast.literal_eval(node.value)
    except (ValueError, SyntaxError):
        return False
    return isinstance(text, str) and (value is None or text == value) and (prefix is None or text.startswith(prefix))


def rendezvous_values(module: cst.Module) -> set[int]:
    """Literals a run never sees: every run has a rendezvous of its own (reducer/run/rendezvous.py),
    so ``os.environ["MASTER_PORT"] = "12355"`` / ``setdefault("MASTER_PORT", ...)`` and a
    ``tcp://``/``file://`` init_method are replaced at run time. Shrunk, they would pass every run
    and fail for a maintainer (``"1"``: a port only root may listen on)."""
    out: set[int] = set()
    for node in collect(module, lambda n: isinstance(n, (cst.Assign, cst.Call, cst.SimpleString))):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                sub = t.target
                if isinstance(sub, cst.Subscript) and len(sub.slice) == 1 and isinstance(
                        sub.slice[0].slice, cst.Index) and _is_string(sub.slice[0].slice.value, "MASTER_PORT"):
                    out.add(id(node.value))
        elif isinstance(node, cst.Call):
            if (isinstance(node.func, cst.Attribute) and node.func.attr.value == "setdefault" and len(node.args) == 2
                    and _is_string(node.args[0].value, "MASTER_PORT")):
                out.add(id(node.args[1].value))
        elif _is_string(node, prefix="tcp://") or _is_string(node, prefix="file://"):
            out.add(id(node))
    return out


def _shrinkable(module: cst.Module, keep: frozenset[str] = frozenset()) -> list[cst.CSTNode]:
    # a dict key is a name, not a value (`"num_hidden_layers": 4`): shortening it only turns a
    # config entry into noise like `"": 4`; dropping the entry is shrink_containers' job
    keys = {id(e.key) for e in collect(module, lambda n: isinstance(n, cst.DictElement))}
    keys |= rendezvous_values(module)
    return collect(module, lambda n: isinstance(n, _SCALARS + _COMPOUND_EXPRESSIONS) and id(n) not in keys
                   and not _in_message(n, keep))


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def message_values(message: str) -> frozenset[str]:
    """The numbers and quoted words of the failure's own message."""
    numbers = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", message)
    quoted = re.findall(r"""['"`]([^'"`\n]{2,80})['"`]""", message)
    return frozenset(numbers) | frozenset(quoted)


def _in_message(node: cst.CSTNode, keep: frozenset[str]) -> bool:
    """A value the failure's message shows (`num_beams (2)`): shrinking it would change what a
    maintainer reads (`num_beams (0)` is a different report), even where the signature, which
    normalises numbers, stays the same."""
    if not keep:
        return False
    try:
        if isinstance(node, (cst.Integer, cst.Float)):
            value = ast.literal_eval(node.value.replace("_", ""))
            return str(value) in keep or node.value in keep
        if isinstance(node, cst.SimpleString):
            value = ast.literal_eval(node.value)
            # also a string the message quotes a part of: `'10.0.300.7' does not appear to be an
            # IPv4 address` comes from "10.0.300.7:8080" split at the colon
            return isinstance(value, str) and (value in keep or any(
                len(k) >= 3 and not _NUMBER.fullmatch(k) and k in value for k in keep))
    except (ValueError, SyntaxError):
        return False
    return False


def _below_one(text: str, node: cst.CSTNode) -> bool:
    try:
        new, old = int(text.replace("_", ""), 0), int(node.value.replace("_", ""), 0)  # type: ignore[attr-defined]
    except (ValueError, AttributeError):
        return False
    return new < 1 <= old


def shrink_literals(gate: Gate) -> None:
    """Numbers to 0/1/half, strings shorter, compound expressions to a part, all in one
    pre-order walk (measured: fewer runs than two separate passes on tests/data/reducer).
    Values the failure's message shows are kept.

    Removes: size from values: numbers to 0/1/half, strings shorter, a compound expression replaced
    by one of its parts.
    Never changes: a value the failure's message shows (``failure_message``): a maintainer compares
    the repro's message with the report's; a positive integer handed to a call never goes below 1
    (a size or a shape: a zero-element layer or tensor is another code path)."""
    keep = message_values(gate.failure_message)
    handed: set[int] = set()

    def targets(module: cst.Module) -> list[cst.CSTNode]:
        handed.clear()
        handed.update(call_arguments(module))
        return _shrinkable(module, keep)
    run_targets(gate, targets, lambda module, node: _alternatives(module, node, handed))
