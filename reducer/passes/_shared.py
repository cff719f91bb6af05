"""Helpers more than one pass family uses. They live here, below both, so that cleanup and
constants do not import each other (constants uses cleanup's ``drop_dead_code``; cleanup uses
``spread_kwargs``, which used to live in constants)."""
from __future__ import annotations

import re

import libcst as cst


def spread_kwargs(call: cst.Call, arg: cst.Arg, value: cst.Dict) -> cst.Call:
    """``f(**helper())`` with the recorded ``{'max_memory': {...}}`` → ``f(max_memory={...})``."""
    keys = [e.key.evaluated_value if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
            else None for e in value.elements]
    if not all(isinstance(k, str) and k.isidentifier() for k in keys):
        return call.with_changes(args=[a.with_changes(value=value) if a is arg else a for a in call.args])
    spelled = [cst.Arg(e.value, keyword=cst.Name(k), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
        for k, e in zip(keys, value.elements)]
    args: list[cst.Arg] = []
    for a in call.args:
        args.extend(spelled if a is arg else [a])
    args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]] + \
        [args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)] if args else []
    return call.with_changes(args=args)


# A keyword that gives a size (layers, widths, vocabulary, shapes): never shrunk to zero
# (passes/literals.py) and, on a config class, never dropped back to the library's full-size
# default (passes/arguments.py).
SIZE_WORDS = re.compile(r"size|dim|num_|^n_|_n$|features|layers|heads|vocab|len|shape|channels|width|height|"
                        r"length|experts|positions|rank|^r$|batch", re.IGNORECASE)
