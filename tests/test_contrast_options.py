"""`contrast` sets the failing call's own options the other way (bot/rerun/options.py), and the
classifier reads a pass that way as the answer a maintainer gives a usage error: "pass the option
made for this". On a real run: a state dict of meta tensors loaded into a real module fails, and
passes with `load_state_dict(..., assign=True)` (pytorch#105963's answer)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bot.cli import main
from bot.rerun.contrast import changes
from bot.rerun.options import call_options, description, entered_call
from bot.store import ReproDir
from bot.upstream.kind import BUG, USAGE, Evidence, classify, classify_repro, kind_line
from reducer.failure.outcome import Frame, TracebackRecord
from tests.test_contrast_runs import make_repro

FAKE_LIB = '''\
class Store:
    def load(self, data, strict=True, assign=False, *, verbose: bool = False, _fast=False, mode="a"):
        if not assign:
            raise RuntimeError("cannot copy")

    def other(self, flag=False):
        pass


def linear(x, weight, bias=None):
    raise RuntimeError("mat1 and mat2 must have the same dtype")
'''


def _lib(tmp_path: Path) -> Path:
    path = tmp_path / "site-packages" / "fakelib" / "ops.py"
    path.parent.mkdir(parents=True)
    path.write_text(FAKE_LIB)
    return path


def _record(*frames: tuple[str, int, str]) -> TracebackRecord:
    return TracebackRecord("RuntimeError", "cannot copy", [Frame(p, n, f, "") for p, n, f in frames], "")


def test_the_options_are_the_boolean_keywords_of_the_function_the_user_called_into(tmp_path: Path) -> None:
    lib = str(_lib(tmp_path))
    opts = call_options(_record(("repro.py", 3, "<module>"), (lib, 4, "load")))
    assert opts is not None and opts.func == "load"
    # booleans only, public only, keyword-only ones too, in the definition's order
    assert opts.options == {"strict": True, "assign": False, "verbose": False}
    assert opts.positional == ("data", "strict", "assign")
    # a private entry point (torch's _call_impl) or a function with no boolean option gives none
    assert call_options(_record(("repro.py", 3, "<module>"), (lib, 11, "linear"))) is None


def test_the_call_is_the_innermost_one_from_the_users_code(tmp_path: Path) -> None:
    """A user's forward called back by the library is the user's code: its call is the failing one."""
    lib = str(_lib(tmp_path))
    record = _record(("repro.py", 9, "<module>"), (lib, 4, "load"), ("repro.py", 5, "forward"), (lib, 11, "linear"))
    assert entered_call(record) == ("linear", lib, 11)
    assert entered_call(_record(("repro.py", 9, "<module>"))) is None


def test_each_option_the_call_left_unset_is_one_change(tmp_path: Path) -> None:
    opts = call_options(_record(("repro.py", 3, "<module>"), (str(_lib(tmp_path)), 4, "load")))
    source = "from fakelib.ops import Store\n\nStore().load({'w': 1}, True, verbose=False)\n"
    added = [c for c in changes(source, opts) if c.description.startswith("with `")]
    # strict is given by position, verbose by keyword: only assign is left
    assert [c.description for c in added] == [description("assign", True, "load")]
    assert added[0].source.endswith("Store().load({'w': 1}, True, verbose=False, assign=True)\n")
    # no options without the failing call's definition; none on a call that spreads its arguments
    assert not [c for c in changes(source) if c.description.startswith("with `")]
    spread = "from fakelib.ops import Store\n\nStore().load(**{'data': 1})\n"
    assert not [c for c in changes(spread, opts) if c.description.startswith("with `")]


def test_the_classifier_reads_the_description_contrast_writes() -> None:
    """The two modules share the wording only: a pass with the option is usage, with the fix named; an
    option that only switches a check off (strict=False) is no answer."""
    error = "Error(s) in loading state_dict for Linear:\n\tCannot copy out of meta tensor; no data!"
    assert classify(Evidence("RuntimeError", error)).kind == BUG
    k = classify(Evidence("RuntimeError", error, passes_with=[description("assign", True, "load_state_dict")]))
    assert k.kind == USAGE and "`assign=True`" in k.reason and "load_state_dict()" in k.reason
    assert "It passes with: `assign=True` (an option of load_state_dict() the call did not set)." in kind_line(k)
    quiet = classify(Evidence("RuntimeError", error, passes_with=[description("strict", False, "load_state_dict")]))
    assert quiet.kind == BUG


META_LOAD = '''\
import torch

skeleton = torch.nn.Linear(4, 3, device="meta").state_dict()
model = torch.nn.Linear(4, 3)
model.load_state_dict(skeleton)
'''


def test_a_state_dict_of_meta_tensors_passes_with_assign_and_reads_as_usage(tmp_path: Path) -> None:
    folder = make_repro(tmp_path / "meta", META_LOAD)
    assert classify_repro(ReproDir.open(folder)).kind == BUG          # the error alone: internals
    assert main(["contrast", str(folder), "--python", sys.executable, "--json"]) == 0
    kinds = {c["change"]: c["verdict"]["kind"] for c in json.loads((folder / "contrast.json").read_text())["changes"]}
    assert kinds[description("assign", True, "load_state_dict")] == "PASS"
    assert kinds[description("strict", False, "load_state_dict")] == "same failure"
    k = classify_repro(ReproDir.open(folder))
    assert k.kind == USAGE and "assign=True" in (k.fix or "")


def test_a_path_that_is_gone_is_looked_up_under_this_interpreters_packages(tmp_path: Path, monkeypatch) -> None:
    """A repro folder moved to another machine, or a traceback scrubbed to ``<env>/...``: the same
    package path under sys.path is read instead."""
    lib = _lib(tmp_path)
    monkeypatch.syspath_prepend(str(lib.parent.parent))
    for gone in ("<env>/fakelib/ops.py", "/elsewhere/lib/python3.11/site-packages/fakelib/ops.py"):
        opts = call_options(_record(("repro.py", 3, "<module>"), (gone, 4, "load")))
        assert opts is not None and opts.options == {"strict": True, "assign": False, "verbose": False}, gone
