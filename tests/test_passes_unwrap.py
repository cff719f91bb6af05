"""Unwrapping compound statements, checked on exact output sources."""
from __future__ import annotations

from tests.reducer_support import raises, reduce_with


def test_if_to_body_and_try_to_body() -> None:
    src = ("x = 1\nif x:\n    y = 2\n    raise KeyError('k')\nelse:\n    pass\n"
           "try:\n    z = 3\nexcept Exception:\n    pass\n")
    assert reduce_with(src, raises(KeyError), "unwrap") == "x = 1\ny = 2\nraise KeyError('k')\nz = 3\n"


def test_if_to_else_and_elif_becomes_if() -> None:
    src = "v = 0\nif v:\n    pass\nelif v == 0:\n    raise KeyError('k')\nelse:\n    pass\n"
    assert reduce_with(src, raises(KeyError), "unwrap") == "v = 0\nraise KeyError('k')\n"
    src2 = "v = 0\nif v:\n    pass\nelse:\n    raise KeyError('k')\n"
    assert reduce_with(src2, raises(KeyError), "unwrap") == "v = 0\nraise KeyError('k')\n"


def test_main_guard_goes_to_top_level() -> None:
    src = 'def main():\n    raise KeyError(1)\n\nif __name__ == "__main__":\n    main()\n'
    assert reduce_with(src, raises(KeyError), "unwrap") == "def main():\n    raise KeyError(1)\n\nmain()\n"


def test_with_keeps_its_binding_when_needed() -> None:
    box = "class Box:\n    def __enter__(self):\n        return self\n    def __exit__(self, *a):\n        return False\n"
    src = box + "with Box() as b:\n    raise KeyError(type(b).__name__)\n"
    out = reduce_with(src, raises(KeyError, "Box"), "unwrap")
    # the body alone would leave `b` unbound; the binding form reproduces
    assert out == box + "b = Box()\nraise KeyError(type(b).__name__)\n"


def test_with_to_body() -> None:
    src = "import contextlib\nwith contextlib.suppress(OSError):\n    raise KeyError(1)\n"
    assert reduce_with(src, raises(KeyError), "unwrap") == "import contextlib\nraise KeyError(1)\n"


def test_loop_to_one_iteration_and_handler_body() -> None:
    src = "for i in range(3):\n    raise KeyError('k')\n"
    assert reduce_with(src, raises(KeyError), "unwrap") == "raise KeyError('k')\n"
    src2 = "try:\n    pass\nexcept Exception:\n    pass\nfinally:\n    raise KeyError('k')\n"
    assert reduce_with(src2, raises(KeyError), "unwrap") == "raise KeyError('k')\n"
    src3 = "while True:\n    raise KeyError('k')\n"
    assert reduce_with(src3, raises(KeyError), "unwrap") == "raise KeyError('k')\n"


def test_statement_reduced_to_its_expression() -> None:
    src = "def main():\n    raise KeyError('k')\nraise SystemExit(main())\nm = main()\n"
    out = reduce_with(src, raises(KeyError), "statement_to_expression")
    assert out == "def main():\n    raise KeyError('k')\nSystemExit(main())\nmain()\n"
    # the raise that IS the failure stays
    assert reduce_with("raise KeyError('k')\n", raises(KeyError), "statement_to_expression") == "raise KeyError('k')\n"


def test_the_one_call_a_display_holds_is_the_statement():
    """heldout4's title generator kept ``futures = {generate_titles(batch): 0}``: the task held in a
    dict for later, the dict never read again; inlining never reached the call inside it."""
    src = "def main():\n    raise KeyError('k')\nfutures = {main(): 0}\nfound = [1, main()]\n"
    out = reduce_with(src, raises(KeyError), "statement_to_expression")
    assert out == "def main():\n    raise KeyError('k')\nmain()\nmain()\n", out
    # two calls, or a starred part: which one matters is not this pass's to say
    for kept in ("pair = (main(), main())\n", "both = {**other(), 1: main()}\n"):
        assert reduce_with("def main():\n    raise KeyError('k')\n" + kept, raises(KeyError),
                           "statement_to_expression").endswith(kept)
