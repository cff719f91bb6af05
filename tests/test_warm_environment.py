"""A script that sets environment variables before its stack imports still runs warm: the warm
interpreter imports those modules with the settings in force, and a candidate whose settings
differ gets a zygote of its own (reducer/run/zygote.py: leading_environment, ZygotePool.acquire)."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

from reducer.run.runner import Runner, RunSpec
from reducer.run.zygote import EnvSetting, ZygotePool, leading_environment, warm_imports

SCRIPT = '''\
"""doc"""
import os
os.environ.setdefault("FAKESTACK_MODE", "fast")
import fakestack
fakestack.check()
'''


def _stack(tmp_path: Path) -> Path:
    """A fake library that reads its mode at import time (as HF_HUB_OFFLINE is read) and says
    which process imported it."""
    lib = tmp_path / "lib"
    (lib / "fakestack").mkdir(parents=True)
    (lib / "fakestack" / "__init__.py").write_text(textwrap.dedent('''
        import os
        MODE = os.environ.get("FAKESTACK_MODE")
        IMPORTED_BY = os.getpid()

        def check():
            raise ValueError(f"mode={MODE} imported_ahead={IMPORTED_BY != os.getpid()}")
    '''))
    return lib


def test_the_leading_block_reads_settings_then_the_imports_after_them() -> None:
    src = ('import os\nfrom os import environ as E\nos.environ["A"] = "1"\nE.update({"B": "2"}, C="3")\n'
           'os.environ.setdefault("D", "4")\nimport json\nprint(1)\nimport csv\n')
    assert leading_environment(src) == (EnvSetting("A", "1"), EnvSetting("B", "2"), EnvSetting("C", "3"),
                                        EnvSetting("D", "4", only_if_unset=True))
    assert warm_imports(src, Path("/nonexistent")) == ["os", "os:environ"]
    assert warm_imports(src, Path("/nonexistent"), through_environment=True) == ["os", "os:environ", "json"]
    # no import after the settings, a computed value, or no `import os` first: nothing to carry
    assert leading_environment('import os\nos.environ["A"] = "1"\n') == ()
    assert leading_environment('import os\nos.environ["A"] = str(1)\nimport json\n') == ()
    assert leading_environment('os.environ["A"] = "1"\nimport json\n') == ()


def test_a_script_that_sets_the_environment_first_runs_warm_with_it(tmp_path: Path) -> None:
    lib = _stack(tmp_path)
    script = tmp_path / "job" / "train.py"
    script.parent.mkdir()
    script.write_text(SCRIPT)
    runner = Runner(RunSpec(script=script, timeout=60, env={"PYTHONPATH": str(lib)}))
    runner.zygotes = ZygotePool(runner.python, warm_imports(SCRIPT, script.parent), runner.base_environment())
    try:
        cold = runner.run(SCRIPT, warm=False)
        warm = runner.run(SCRIPT)
        # a candidate without the setting: a zygote of its own, whose imports ran without it
        dropped = SCRIPT.replace('os.environ.setdefault("FAKESTACK_MODE", "fast")\n', "")
        without = runner.run(dropped)
        again = runner.run(SCRIPT)
    finally:
        runner.zygotes.stop()
    assert "ValueError: mode=fast imported_ahead=False" in cold.stderr
    assert "ValueError: mode=fast imported_ahead=True" in warm.stderr, warm.stderr[-1500:]
    assert "ValueError: mode=None imported_ahead=True" in without.stderr, without.stderr[-1500:]
    assert "ValueError: mode=fast imported_ahead=True" in again.stderr
    assert "fakestack" in runner.zygotes.info.imported
    assert runner.warm_runs == 3 and not runner.warm_fallbacks
    assert os.environ.get("FAKESTACK_MODE") is None


def test_a_zygote_is_reused_for_the_packages_it_imported_and_settings_it_had(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("import json\n")
    runner = Runner(RunSpec(script=tmp_path / "s.py", timeout=30))
    pool = ZygotePool(runner.python, ["json"], runner.base_environment())
    try:
        first = pool.acquire((), ["json"])
        pool.release(first)
        assert pool.acquire((), ["json:loads"]) is first        # the same package: reused
        pool.release(first)
        other = pool.acquire((), ["csv"])                        # a package it never imported
        assert other is not first and "csv" in other.info.imported and first.alive
        pool.release(other)
        setting = (EnvSetting("A", "1"),)
        third = pool.acquire(setting, ["json"])                  # other settings: another zygote
        assert third not in (first, other) and third.env["A"] == "1"
        pool.release(third)
        # two per slot at the peak (one slot here): the oldest idle one went
        assert not first.alive and other.alive and third.alive
    finally:
        pool.stop()
