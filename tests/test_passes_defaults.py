"""class_defaults: a config class's literal defaults in place of its attributes' reads; exact
outputs, verdicts from exec of each candidate."""
from __future__ import annotations

from tests.reducer_support import RecordingOracle, SubprocessOracle, raises, reduce_with

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


# ---- option_defaults: a parsed command line's defaults in place of its options' reads ----------
OPTIONS = '''\
import argparse
import tempfile


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default="3")
    p.add_argument("--work-dir", default=tempfile.gettempdir())
    p.add_argument("--fp16", action="store_true")
    return p.parse_args()


def train(opts):
    return {"x": 1}[str(opts.steps) + opts.work_dir[:0] + str(opts.fp16)]


args = parse_args()
train(args)
'''


def test_options_become_their_defaults() -> None:
    # a default converted by its type (argparse converts a string default), one whose value differs
    # between runs written as its expression, a flag's implied default
    out = reduce_with(OPTIONS, SubprocessOracle.for_source(OPTIONS), "option_defaults")
    assert out == OPTIONS.replace('str(opts.steps) + opts.work_dir[:0] + str(opts.fp16)',
                                  'str(3) + tempfile.gettempdir()[:0] + str(False)')


def test_an_unread_namespace_goes_with_its_reads() -> None:
    # the defaults are longer than the reads here; the candidate is smaller only because nothing
    # reads the namespace afterwards, so its binding goes (the parser's helper is left to the
    # passes that remove unused definitions)
    src = OPTIONS.replace("train(args)\n", "int(args.work_dir + args.work_dir)\n")
    out = reduce_with(src, SubprocessOracle.for_source(src), "option_defaults")
    assert "args = parse_args()" not in out and "args." not in out, out
    assert "int(tempfile.gettempdir() + tempfile.gettempdir())" in out


def test_options_that_could_hold_another_value_are_left_alone() -> None:
    given = OPTIONS.replace("    return p.parse_args()", "    p.set_defaults(steps=7)\n    return p.parse_args()")
    stored = OPTIONS.replace("args = parse_args()\n", "args = parse_args()\nargs.fp16 = False\n")
    for src, left, gone in ((given, "opts.steps", "opts.fp16"), (stored, "opts.fp16", "opts.steps")):
        out = reduce_with(src, SubprocessOracle.for_source(src), "option_defaults")
        assert left in out and gone not in out, out
    # only a namespace's attributes: the same name read from another object stays
    other = OPTIONS.replace("str(opts.fp16)", "str(opts.fp16) + str(type('M', (), {'steps': 0}).steps)")
    out = reduce_with(other, SubprocessOracle.for_source(other), "option_defaults")
    assert "}).steps)" in out and "opts.steps" not in out, out


def test_a_default_that_loses_the_failure_is_refused() -> None:
    # the run decides: the failure needs the value the command line gave, not the default
    src = OPTIONS.replace("args = parse_args()", "import sys\nsys.argv[1:] = ['--steps', '4']\nargs = parse_args()")
    src = src.replace('{"x": 1}', '{"31False": 1, "3False": 1}')
    oracle = SubprocessOracle.for_source(src)
    out = reduce_with(src, oracle, "option_defaults")
    assert oracle.runs and "opts.steps" in out, out
