"""round_trips: a load of a path the script saved a value to, read as that value; verdicts from real
runs in a fresh folder each (tests/reducer_support.py:SubprocessOracle)."""
from __future__ import annotations

from tests.reducer_support import RecordingOracle, SubprocessOracle, reduce_with

# a model-like class with the save/load pair of a Hugging Face model, written with json
SAVED = '''\
import json
import os


class Tiny:
    def __init__(self, width):
        self.width = width

    def save_pretrained(self, folder):
        os.makedirs(folder, exist_ok=True)
        json.dump({"width": self.width}, open(os.path.join(folder, "c.json"), "w"))

    @classmethod
    def from_pretrained(cls, folder, scale=1):
        return cls(json.load(open(os.path.join(folder, "c.json")))["width"] * scale)


def run(model):
    return [0] * 2 + [1][model.width]


enc = Tiny(3)
enc.save_pretrained("ckpt")
run(Tiny.from_pretrained("ckpt"))
'''


def test_a_load_of_what_the_script_saved_becomes_the_saved_value() -> None:
    out = reduce_with(SAVED, SubprocessOracle.for_source(SAVED), "round_trips")
    assert out == SAVED.replace('run(Tiny.from_pretrained("ckpt"))', "run(enc)")


def test_a_load_that_changes_the_value_is_refused_by_the_run() -> None:
    # the failure needs what the load did beyond copying: scale=2 makes the width 2, out of range;
    # the saved model's width 1 is not
    src = SAVED.replace("enc = Tiny(3)", "enc = Tiny(1)").replace("[1][model.width]", "[1, 2][model.width]") \
               .replace('Tiny.from_pretrained("ckpt")', 'Tiny.from_pretrained("ckpt", scale=2)')
    oracle = RecordingOracle(SubprocessOracle.for_source(src))
    assert reduce_with(src, oracle, "round_trips") == src
    assert len(oracle.runs) == 1 and "run(enc)" in oracle.runs[0]


def test_other_paths_and_rebound_names_are_left_alone() -> None:
    other = SAVED.replace('run(Tiny.from_pretrained("ckpt"))', 'Tiny(5).save_pretrained("b")\nrun(Tiny.from_pretrained("b"))')
    other = other.replace('Tiny(5).save_pretrained("b")', 'os.makedirs("b")\njson.dump({"width": 5}, open("b/c.json", "w"))')
    rebound = SAVED.replace('enc.save_pretrained("ckpt")\n', 'enc.save_pretrained("ckpt")\nenc = None\n')
    for src in (other, rebound):
        oracle = RecordingOracle(SubprocessOracle.for_source(src))
        assert reduce_with(src, oracle, "round_trips") == src
        assert oracle.runs == []
