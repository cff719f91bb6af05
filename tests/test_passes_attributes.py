"""drop_middle_attributes: a wrapper's attribute stepped over; verdicts from exec of each candidate."""
from __future__ import annotations

from tests.reducer_support import RecordingOracle, raises, reduce_with

# a wrapper that forwards what it does not have to what it wraps, as PEFT's layers and DDP do
WRAPPED = '''\
import os.path


class Layer:
    weight = None


class Wrapper:
    def __init__(self, inner):
        self.base_layer = inner

    def __getattr__(self, name):
        return getattr(self.__dict__["base_layer"], name)


w = Wrapper(Layer())
here = os.path.join("a", "b")
w.base_layer.weight.shape
'''


def test_a_wrappers_attribute_is_stepped_over() -> None:
    out = reduce_with(WRAPPED, raises(AttributeError, "'NoneType' object has no attribute 'shape'"),
                      "drop_middle_attributes")
    assert out.endswith('here = os.path.join("a", "b")\nw.weight.shape\n')


def test_a_chain_on_a_module_a_call_or_a_store_is_left_alone() -> None:
    # os.path.join: a module's; f().a.b: a call's result; w.base_layer.weight = ...: a store
    src = ("import os.path\nclass A:\n    b = None\nclass F:\n    a = A()\n"
           "def f():\n    return F()\nhere = os.path.join('a', 'b')\nf().a.b.shape\n")
    stored = WRAPPED.replace("w.base_layer.weight.shape\n", "w.base_layer.weight = None\nw.base_layer.weight.shape\n")
    oracle = RecordingOracle(raises(AttributeError, "'NoneType' object has no attribute 'shape'"))
    assert reduce_with(src, oracle, "drop_middle_attributes") == src
    assert oracle.runs == []
    oracle = RecordingOracle(raises(AttributeError, "'NoneType' object has no attribute 'shape'"))
    reduce_with(stored, oracle, "drop_middle_attributes")
    assert all("w.weight = None" not in run for run in oracle.runs)
