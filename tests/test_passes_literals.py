"""Container and literal shrinking, expression simplification: exact output sources."""
from __future__ import annotations

from reducer.passes.literals import shorter_strings, smaller_ints
from tests.reducer_support import raises, reduce_with
import libcst as cst


def test_drops_dict_and_list_entries_that_do_not_matter() -> None:
    src = ('device_map = {"embed": 0, "layers": "meta", "head": 0}\n'
           'mods = ["q_proj", "v_proj", "o_proj"]\n'
           'if "meta" in device_map.values() and "v_proj" in mods:\n    raise KeyError("meta")\n')
    out = reduce_with(src, raises(KeyError), "shrink_containers")
    assert out == ('device_map = {"layers": "meta"}\nmods = ["v_proj"]\n'
                   'if "meta" in device_map.values() and "v_proj" in mods:\n    raise KeyError("meta")\n')


def test_numbers_become_small_and_strings_short() -> None:
    src = 'max_new_tokens = 512\nname = "tiny-gemma"\nif max_new_tokens > 0:\n    raise KeyError(name)\n'
    out = reduce_with(src, raises(KeyError), "shrink_literals")
    assert out == 'max_new_tokens = 1\nname = ""\nif max_new_tokens > 0:\n    raise KeyError(name)\n'


def test_expressions_collapse_to_a_part() -> None:
    src = "import sys\nx = 1 + 2\nsys.exit(int(str(x)) if x else 0)\n"
    out = reduce_with(src, lambda s: "sys.exit" in s and compile(s, "c", "exec") is not None, "shrink_literals")
    assert out == "import sys\nx = 0\nsys.exit(x)\n"   # the oracle only asks for sys.exit
    tuple_src = "t = (1, 2)\nraise KeyError(len(t))\n"
    assert reduce_with(tuple_src, raises(KeyError, "1"), "shrink_containers") == "t = (1,)\nraise KeyError(len(t))\n"


def test_value_ladders() -> None:
    assert smaller_ints("512") == ["0", "1", "256"]
    assert smaller_ints("3") == ["0", "1"]
    assert shorter_strings(cst.SimpleString("'abcd'")) == ["''", "'ab'", "'a'"]
    assert shorter_strings(cst.SimpleString('"""ab"""')) == ['""""""', '"""a"""', '"""a"""', '"ab"']


def test_a_number_keeps_halving_while_it_may() -> None:
    src = "n = 512\nif n >= 40:\n    raise KeyError(n)\n"
    def oracle(s: str) -> bool:         # the bound 40 itself must stay
        return "40" in s and raises(KeyError)(s)
    assert reduce_with(src, oracle, "shrink_literals") == "n = 64\nif n >= 40:\n    raise KeyError(n)\n"


def test_values_the_failure_message_shows_are_kept() -> None:
    """`num_beams=2` must not become `num_beams=0`: the message would then read "num_beams (0)",
    a different report for a maintainer, though the signature (numbers normalised) is the same."""
    import libcst as cst

    from reducer.analysis.cst import parse
    from reducer.passes.literals import _shrinkable, message_values
    src = ("from lib import GenerationConfig\n"
           "GenerationConfig(num_beams=2, num_return_sequences=3, max_new_tokens=512)\n")
    message = "num_return_sequences (3) has to be smaller or equal to num_beams (2)"
    keep = message_values(message)
    assert {"2", "3"} <= keep
    shown = [n.value for n in _shrinkable(parse(src), keep) if isinstance(n, cst.Integer)]
    assert shown == ["512"]
    assert message_values("KeyError: 'model.layers.0'") >= {"model.layers.0"}


def test_a_string_the_message_quotes_part_of_is_kept() -> None:
    from reducer.analysis.cst import parse
    from reducer.passes.literals import _shrinkable, message_values
    src = "hosts = ['10.0.300.7:8080', 'db.internal:5432', 'x']\n"
    keep = message_values("'10.0.300.7' does not appear to be an IPv4 or IPv6 address")
    strings = [n.value for n in _shrinkable(parse(src), keep) if n.value.startswith("'")]
    assert strings == ["'db.internal:5432'", "'x'"]
    # a number the message shows is not enough to keep every string that happens to contain it
    assert "'db.internal:5432'" in [n.value for n in _shrinkable(parse(src), message_values("port 5432 (2)"))]


def test_a_generator_taken_out_of_its_call_keeps_its_parentheses() -> None:
    """`sum(2 + f(v) for v in xs)` shrunk to its argument: the generator needs the parentheses the
    call gave it (`1 + 2 + f(v) for v in xs` does not parse). Every proposal must parse."""
    import libcst as cst

    from reducer.passes import BY_NAME
    from reducer.search.driver import Reducer

    proposed: list[str] = []

    class Recording(Reducer):
        def consider(self, source: str) -> bool:
            proposed.append(source)
            return super().consider(source)

    src = ("def weight(node):\n"
           "    fields = [v for v in node.values if isinstance(v, int)]\n"
           "    return 1 + sum(2 + count(str(v.value)) for v in fields)\n")
    Recording(src, lambda s: False, passes=[BY_NAME["shrink_literals"]], prelude=[], format_result=False).run()
    assert any("for v in fields" in p and "sum(" not in p for p in proposed), "the shrink was never offered"
    for p in proposed:
        cst.parse_module(p)


def test_a_rendezvous_value_every_run_replaces_is_not_shrunk() -> None:
    """Each run gets its own port (reducer/run/rendezvous.py), so no run can tell "12355" from "1":
    shrunk, the repro would pass here and fail for a maintainer who may not listen on port 1."""
    from reducer.analysis.cst import parse
    from reducer.passes.literals import _shrinkable
    src = ('import os\nos.environ["MASTER_PORT"] = "12355"\nos.environ.setdefault("MASTER_PORT", "29500")\n'
           'url = "tcp://localhost:12355"\nraise ValueError(int("42") + 7)\n')
    module = parse(src)
    texts = [module.code_for_node(n) for n in _shrinkable(module)]
    assert '"12355"' not in texts and '"29500"' not in texts and '"tcp://localhost:12355"' not in texts
    assert '"42"' in texts and "7" in texts                    # other literals still shrink


def test_a_display_given_as_a_keyword_keeps_an_entry() -> None:
    # the same error comes back from an empty list by another path (all() of nothing is True):
    # emptied, it would be another setting, as transformers-31435's stop strings were
    src = ('STOPS = [".", "\\n"]\n\n\n'
           'def generate(stop_strings=None):\n'
           '    if all(len(s) == 1 for s in stop_strings):\n'
           '        raise ValueError("max() arg is an empty sequence")\n\n\n'
           'generate(stop_strings=STOPS)\n'
           'generate(stop_strings=[".", "!"])\n')
    out = reduce_with(src, raises(ValueError, "empty sequence"), "shrink_containers")
    assert 'STOPS = ["."]' in out and 'stop_strings=["."]' in out, out
    # a positional display of a plain call may still be emptied
    plain = src.replace("def generate(stop_strings=None)", "def generate(stop_strings)") \
               .replace('generate(stop_strings=[".", "!"])', 'generate([".", "!"])')
    assert "generate([])" in reduce_with(plain, raises(ValueError, "empty sequence"), "shrink_containers")
