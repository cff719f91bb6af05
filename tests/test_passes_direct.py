"""call_directly: the function a pool, executor, thread or process would run is called in place,
and the oracle keeps it only when the failure still shows (real runs)."""
from __future__ import annotations

import libcst as cst
import pytest

from reducer.passes.direct import direct_call
from tests.reducer_support import reduce_with


def shows(text: str):
    """A real run in a subprocess; interesting iff ``text`` is in its stderr (raised or logged)."""
    import subprocess
    import sys

    def predicate(source: str) -> bool:
        proc = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60)
        return text in proc.stderr
    return predicate


@pytest.mark.parametrize("before,after", [
    ("pool.submit(fn, a, b=1)", "fn(a, b=1)"),
    ("pool.apply_async(fn, (a, 2), {'b': 1})", "fn(a, 2, b=1)"),
    ("pool.apply(fn, args)", "fn(*args)"),
    ("loop.run_in_executor(None, fn, a)", "fn(a)"),
    ("threading.Thread(target=fn, args=(a,), kwargs=opts)", "fn(a, **opts)"),
    ("mp.get_context('spawn').Process(target=work)", "work()"),
])
def test_hand_offs_become_direct_calls(before: str, after: str) -> None:
    call = cst.parse_expression(before)
    assert isinstance(call, cst.Call)
    new = direct_call(call)
    assert new is not None and cst.Module([]).code_for_node(new) == after


def test_a_failure_logged_by_a_thread_pool_worker_is_raised_directly() -> None:
    src = '''
import logging
from concurrent.futures import ThreadPoolExecutor

def handle(n):
    try:
        raise ValueError(f"num_return_sequences ({n}) has to be smaller or equal to num_beams (2)")
    except ValueError:
        logging.exception("request failed")

with ThreadPoolExecutor(2) as pool:
    pool.submit(handle, 3).result()
'''
    out = reduce_with(src, shows("ValueError: num_return_sequences (3)"), "call_directly")
    assert "handle(3)" in out and "submit" not in out


def test_a_failure_that_needs_the_worker_keeps_it() -> None:
    # Raised only when running in a worker thread: calling it directly passes, so it stays.
    src = '''
import threading

def work():
    if threading.current_thread() is not threading.main_thread():
        raise KeyError("in a worker")

t = threading.Thread(target=work)
t.start()
t.join()
'''
    out = reduce_with(src, shows("KeyError: 'in a worker'"), "call_directly")
    assert "threading.Thread(target=work)" in out
