"""No list of the stack's packages outside bot/targets/, regexes included.

tests/test_targets_registry.py reads every string and literal collection of bot/ and reducer/ for
a repository or a list of the stack's packages (commas, slashes, "and", "or"). A regex lists them
with "|": ``(?:transformers|peft|accelerate)``, as reducer/failure/normalize.py's editable-checkout rule
did, where a new target silently lost its checkout's frames. This reads the same strings for two
of the stack's packages as alternatives of one pattern.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_targets_registry import _assigned_name, _docstrings, _names, _sources

ROOT = Path(__file__).resolve().parents[1]

# The one that stays, and why: the engine used without the bot (nothing registered with
# reducer/stack.py) keeps the editable-checkout rule it always had; the bot registers the targets'
# own knowledge at start-up, and tests/test_engine_stack.py checks this equals it.
EXCEPTIONS = {("reducer/stack.py", "ENGINE_ALONE_CHECKOUTS")}


def alternations(source: str, names: frozenset[str]) -> list[tuple[int, str | None, str]]:
    """(line, the module-level name it is assigned to, what) for every string, docstrings aside,
    in which two different names of ``names`` are alternatives of a pattern (``a|b``), however
    many alternatives stand between them."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    word = "|".join(map(re.escape, sorted(names)))
    # Two names in one run of alternatives: between them only other alternatives (words, "_",
    # ".", "-", escapes) and the bars that separate them.
    listed = re.compile(rf"(?<![\w.-])({word})(?:\|[\w.\\-]*)*?\|({word})(?![\w.-])")
    found = []
    for stmt in tree.body:
        owner = _assigned_name(stmt)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                for m in listed.finditer(node.value):
                    if m.group(1) != m.group(2):
                        found.append((node.lineno, owner, f"alternatives of a pattern: {m.group(0)[:60]!r}"))
                        break
    return found


def test_the_check_finds_what_it_looks_for() -> None:
    names, _ = _names()
    bad = ('import re\n'
           '_CHECKOUT = re.compile(r"[\\\\/]src[\\\\/](?=(?:transformers|peft|huggingface_hub|"\n'
           '                       r"safetensors|trl)[\\\\/])")\n'
           'def f(text):\n    return re.search(r"\\b(?:peft|numpy|accelerate)\\.", text)\n')
    assert [(line, owner) for line, owner, _ in alternations(bad, names)] == [(2, "_CHECKOUT"), (5, None)]
    fine = ('"""A docstring may say (?:transformers|peft)."""\n'
            'ONE = r"(?:transformers|numpy)"\nFORK = r"transformers-fork|peft-lite"\n'
            'PATHS = r"^transformers/models/(?P<family>\\w+)/"\nHUB = r"(RepositoryNotFound|GatedRepo)Error$"\n')
    assert alternations(fine, names) == []


def test_no_pattern_lists_the_stack_outside_bot_targets() -> None:
    names, _ = _names()
    problems, excepted = [], set()
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for line, owner, what in alternations(path.read_text(encoding="utf-8"), names):
            if (rel, owner) in EXCEPTIONS:
                excepted.add((rel, owner))
                continue
            problems.append(f"{rel}:{line}: {what}")
    assert problems == [], "derive these from bot.targets instead (reducer/: through reducer/stack.py):\n" + \
        "\n".join(problems)
    assert excepted == EXCEPTIONS        # the exception is still needed, else it goes from the list
