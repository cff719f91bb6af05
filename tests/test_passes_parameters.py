"""drop_unused_parameters: a parameter the body never reads goes with its argument at every
call and hand-off; exact outputs, verdicts from exec of each candidate."""
from __future__ import annotations

from tests.reducer_support import RecordingOracle, raises, reduce_with


def test_a_worker_tuple_loses_the_argument_of_an_unused_parameter() -> None:
    src = ("import threading\nimport tempfile\n\n\ndef probe(index, entries, out_dir):\n"
           "    for e in entries:\n        int(e)\n\n\nout_dir = tempfile\n"
           "t = threading.Thread(target=probe, args=(0, ['x'], out_dir))\nt.run()\n")
    out = reduce_with(src, raises(ValueError, "'x'"), "drop_unused_parameters")
    # the value passed for it is dead now (its import is the clean-up's to drop)
    assert out == ("import threading\nimport tempfile\n\n\ndef probe(entries):\n"
                   "    for e in entries:\n        int(e)\n"
                   "t = threading.Thread(target=probe, args=(['x'],))\nt.run()\n")


def test_direct_and_submitted_calls_lose_positional_and_keyword_arguments() -> None:
    src = ("def f(a, b, c=1, *, d=2):\n    return int(b)\n\n\n"
           "f(1, 'x', 3, d=4)\nf(0, b='y')\n")
    out = reduce_with(src, raises(ValueError, "'x'"), "drop_unused_parameters")
    assert out == "def f(b):\n    return int(b)\n\n\nf('x')\nf(b='y')\n"
    submitted = ("from concurrent.futures import ThreadPoolExecutor\n\n\ndef f(a, b):\n    return int(b)\n\n\n"
                 "ThreadPoolExecutor(1).submit(f, 1, 'x').result()\n")
    out = reduce_with(submitted, raises(ValueError, "'x'"), "drop_unused_parameters")
    assert out == ("from concurrent.futures import ThreadPoolExecutor\n\n\ndef f(b):\n    return int(b)\n\n\n"
                   "ThreadPoolExecutor(1).submit(f, 'x').result()\n")


def test_a_function_used_any_other_way_keeps_its_parameters() -> None:
    stored = "def f(a, b):\n    return int(b)\n\n\nHANDLERS = {'f': f}\nHANDLERS['f'](1, 'x')\n"
    forwarded = "def f(a, b):\n    return int(b)\n\n\nargs = (1, 'x')\nf(*args)\n"
    method = "class C:\n    def m(self, a, b):\n        return int(b)\n\n\nC().m(1, 'x')\n"
    for src in (stored, forwarded, method):
        oracle = RecordingOracle(raises(ValueError, "'x'"))
        assert reduce_with(src, oracle, "drop_unused_parameters") == src
        assert oracle.runs == []
