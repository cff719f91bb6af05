"""class_defaults: a config class's literal defaults in place of its attributes' reads; exact
outputs, verdicts from exec of each candidate."""
from __future__ import annotations

from tests.reducer_support import RecordingOracle, raises, reduce_with

CONFIG = '''\
import dataclasses


@dataclasses.dataclass
class Config:
    width: int = 4
    name: str = "x"
    depth = 2


def build(cfg):
    return int(cfg.name * cfg.width)


def work(rank, cfg):
    for _ in range(cfg.depth):
        build(cfg)


work(0, Config())
'''


def test_reads_of_a_config_object_become_the_class_defaults_and_the_class_goes() -> None:
    out = reduce_with(CONFIG, raises(ValueError, "'xxxx'"), "class_defaults")
    # every read at once, in one run; the object that carried them is the parameter passes' to drop,
    # and with it the class
    assert out == CONFIG.replace("cfg.name * cfg.width", '"x" * 4').replace("range(cfg.depth)", "range(2)")


def test_a_construction_with_its_own_literal_gives_that_value() -> None:
    src = CONFIG.replace("work(0, Config())", "work(0, Config(width=3))")
    out = reduce_with(src, raises(ValueError, "'xxx'"), "class_defaults")
    assert 'int("x" * 3)' in out and "cfg.width" not in out


def test_names_that_could_hold_another_value_are_left_alone() -> None:
    stored = CONFIG.replace("work(0, Config())", "c = Config()\nc.width = 5\nwork(0, c)")
    positional = CONFIG.replace("work(0, Config())", "work(0, Config(5))")
    computed = CONFIG.replace("work(0, Config())", "n = 6\nwork(0, Config(width=n, name='y', depth=1))")
    for src, left in ((stored, "cfg.width"), (positional, "cfg.width"), (computed, "cfg.width")):
        oracle = RecordingOracle(raises(ValueError, "invalid literal"))
        out = reduce_with(src, oracle, "class_defaults")
        assert left in out, out
    # a name two classes define is ambiguous; a method's name is no default
    twice = CONFIG.replace("    depth = 2\n", "    depth = 2\n\n\nclass Other:\n    width = 9\n") + "print(Other)\n"
    out = reduce_with(twice, raises(ValueError, "invalid literal"), "class_defaults")
    assert "cfg.width" in out and "cfg.name" not in out


def test_a_candidate_that_loses_the_failure_is_refused() -> None:
    # the run decides: with the default the call no longer fails
    src = CONFIG.replace("work(0, Config())", "c = Config()\nwork(0, c)").replace('name: str = "x"', 'name: str = "7"')
    oracle = RecordingOracle(raises(ValueError, "'7777'"))
    out = reduce_with(src, oracle, "class_defaults")
    assert oracle.runs, "no candidate was run"
    assert "int(" in out
