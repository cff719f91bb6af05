"""Argument removal and arguments-to-defaults: exact output sources."""
from __future__ import annotations

from tests.reducer_support import raises, reduce_with


def test_removes_every_argument_that_does_not_matter() -> None:
    src = "def f(a, b=1, *, c=2, d=3):\n    raise KeyError(a)\nf(7, 8, c=9, d=10,)\n"
    out = reduce_with(src, raises(KeyError, "7"), "remove_arguments")
    assert out == "def f(a, b=1, *, c=2, d=3):\n    raise KeyError(a)\nf(7)\n"


def test_keeps_the_argument_that_triggers_the_failure() -> None:
    src = "import json\njson.loads('{', parse_int=int, strict=False)\n"
    out = reduce_with(src, raises(ValueError, "Expecting property name"), "remove_arguments")
    assert out == "import json\njson.loads('{')\n"


def test_positional_argument_replaced_by_its_default() -> None:
    # `5` must stay, so `compute()` cannot simply be deleted (5 would shift into b)
    src = ("def compute():\n    return 4\n"
           "def f(a, b=0, c=None):\n    if c == 5:\n        raise KeyError(a)\nf(1, compute(), 5)\n")
    out = reduce_with(src, raises(KeyError, "1"), "remove_arguments", "arguments_to_defaults")
    assert out == ("def compute():\n    return 4\n"
                   "def f(a, b=0, c=None):\n    if c == 5:\n        raise KeyError(a)\nf(1, 0, 5)\n")


def test_a_configs_size_keywords_stay_and_its_other_keywords_go() -> None:
    # without n_layer and vocab_size the config is the library's default model (12 layers, 50257
    # tokens): a heavier repro; a non-size keyword (use_cache) goes as any argument does
    src = ("class GPT2Config:\n"
           "    def __init__(self, n_layer=12, vocab_size=50257, use_cache=True):\n"
           "        self.n_layer, self.vocab_size = n_layer, vocab_size\n"
           "raise KeyError(GPT2Config(n_layer=2, vocab_size=96, use_cache=False) and 'config')\n")
    out = reduce_with(src, raises(KeyError, "config"), "remove_arguments")
    assert "GPT2Config(n_layer=2, vocab_size=96)" in out
    # the same call to a function not named as a config loses them all
    plain = src.replace("GPT2Config", "make_model")
    assert "make_model() and" in reduce_with(plain, raises(KeyError, "config"), "remove_arguments")


def test_calls_inside_one_of_several_container_entries_wait_for_the_entries_to_go() -> None:
    # each row's `int(..., base=10)` would cost a run before shrink_containers drops the rows;
    # once one row is left, its call's arguments are shortened as any other's
    from tests.reducer_support import RecordingOracle
    rows = "[" + ", ".join(f"{{'x': int('{i}', base=10)}}" for i in range(6)) + "]"
    src = f"rows = {rows}\nraise KeyError(len(rows))\n"
    oracle = RecordingOracle(raises(KeyError, "6"))
    assert reduce_with(src, oracle, "remove_arguments") == src
    assert oracle.runs and all(run.startswith(f"rows = {rows}\n") for run in oracle.runs)
    one = "rows = [{'x': int('1', base=10)}]\nraise KeyError(len(rows))\n"
    assert reduce_with(one, raises(KeyError, "1"), "remove_arguments") == \
        "rows = [{'x': int()}]\nraise KeyError(len(rows))\n"
