"""Call arguments: delete positional and keyword arguments (runs of them, find_integer), and put
a parameter's default in place of an argument passed to one of the script's own functions."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

from reducer.analysis.cst import collect, replace, safe
from reducer.passes.base import Gate
from reducer.passes.loops import delete_runs, run_targets
from reducer.passes.rewrites import SIZE_WORDS, parameter_slots, without_trailing_comma


def calls(module: cst.Module) -> list[cst.Call]:
    return collect(module, lambda n: isinstance(n, cst.Call) and len(n.args) > 0)


_CONTAINERS = (cst.List, cst.Tuple, cst.Set, cst.Dict)


def _calls_to_shorten(module: cst.Module) -> list[cst.Call]:
    """``calls``, less those inside an entry of a container of several entries: shrink_containers
    (FINE) may drop the whole entry in one run, and a rebuilt dataset of 16 rows of 3 tensors
    each would otherwise cost a run per ``dtype=`` before that (trainer_callback: 290 of 320
    runs). Once the container is down to one entry, its calls are offered here again."""
    inside: set[int] = set()
    for box in collect(module, lambda n: isinstance(n, _CONTAINERS)):
        entries = box.elements
        if len(entries) > 1:
            for entry in entries:
                inside.update(id(c) for c in collect(entry, lambda n: isinstance(n, cst.Call)))
    return [c for c in calls(module) if id(c) not in inside]


def _args(call: cst.CSTNode) -> Sequence[cst.Arg]:
    return call.args


def _set_args(call: cst.CSTNode, items: list) -> cst.CSTNode:
    return call.with_changes(args=without_trailing_comma(items))


def _sizes_kept(call: cst.CSTNode, items: list) -> cst.CSTNode:
    """``_set_args``, refusing (a ValueError, which ``safe`` turns into no candidate) to drop a
    size-like keyword of a config class: ``GPT2Config(n_layer=2, vocab_size=96)`` without them is
    the library's default model (12 layers, 50257 tokens), a heavier repro, not a simpler one."""
    if _is_config(call):
        kept = {id(a) for a in items}
        if any(id(a) not in kept and a.keyword is not None and SIZE_WORDS.search(a.keyword.value)
               for a in call.args):
            raise ValueError("a config's size stays; shrink_literals makes it small")
    return _set_args(call, items)


def _is_config(call: cst.CSTNode) -> bool:
    name = callee_name(call) if isinstance(call, cst.Call) else None
    return bool(name) and name.endswith("Config") and name[:1].isupper()


def remove_arguments(gate: Gate) -> None:
    """Delete runs of arguments from every call.

    Removes: call arguments, positional and keyword, runs of them at a time (find_integer), calls
    in pre-order.
    Never changes: the callee or the arguments that stay (a positional argument's deletion shifts
    the rest: the gate's run judges it); a size-like keyword of a ``...Config`` class (layers,
    hidden size, vocabulary: without it the model is the library's default size); a call inside
    one entry of a container of several (the entries go first, whole, in shrink_containers)."""
    delete_runs(gate, _calls_to_shorten, _args, _sizes_kept)


def _defs(module: cst.Module) -> dict[str, cst.FunctionDef]:
    """The script's own functions and methods by name; a name defined twice is ambiguous."""
    out: dict[str, cst.FunctionDef] = {}
    dup: set[str] = set()
    for d in collect(module, lambda n: isinstance(n, cst.FunctionDef)):
        name = d.name.value
        if name in out:
            dup.add(name)
        out[name] = d
    return {k: v for k, v in out.items() if k not in dup}


def callee_name(call: cst.Call) -> str | None:
    if isinstance(call.func, cst.Name):
        return call.func.value
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def _targets(module: cst.Module) -> list[cst.Arg]:
    defs = _defs(module)
    out: list[cst.Arg] = []
    for call in collect(module, lambda n: isinstance(n, cst.Call)):
        fn = defs.get(callee_name(call) or "")
        if fn is None:
            continue
        for arg, param in parameter_slots(call, fn):
            if param.default is not None and arg.keyword is None:
                out.append(arg)
    return out


def _to_default(module: cst.Module, arg: cst.Arg) -> Iterable[str | None]:
    defs = _defs(module)
    for call in collect(module, lambda n: isinstance(n, cst.Call) and any(a is arg for a in n.args)):
        fn = defs.get(callee_name(call) or "")
        for a, param in parameter_slots(call, fn) if fn else []:
            if a is arg and param.default is not None:
                if module.code_for_node(param.default) != module.code_for_node(arg.value):
                    yield safe(lambda: replace(module, arg.value, param.default))
                return


def arguments_to_defaults(gate: Gate) -> None:
    """A positional argument cannot be deleted without shifting the rest; its default can
    take its place instead (keyword arguments are simply deleted by ``remove_arguments``).

    Removes: an argument passed to one of the script's own functions, replaced by the parameter's
    default.
    Never changes: the arguments before it, or a call to a function that is not the script's own."""
    run_targets(gate, _targets, _to_default)
