"""Warm starts give what a cold run gives: the same Outcome and Signature, real subprocesses.

Each case runs the same script warm (forked from a zygote that imported its leading imports)
and cold (`python script.py`), and compares what reprobot reads from the run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reducer.failure.signature import MatchOptions, distinct_failures, signature_of
from reducer.run.runner import Runner, RunSpec
from reducer.run.zygote import ZygotePool, warm_imports

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "bench" / "corpus"


def _pool(runner: Runner, source: str) -> ZygotePool:
    return ZygotePool(runner.python, warm_imports(source, runner.script_dir), runner.base_environment())


def both(script: Path, args: tuple[str, ...] = (), env: dict | None = None):
    source = script.read_text()
    runner = Runner(RunSpec(script=script, args=args, timeout=60, env=env or {}))
    runner.zygotes = _pool(runner, source)
    try:
        warm = runner.run(source)
        cold = runner.run(source, warm=False)
        assert runner.warm_runs == 1 and runner.warm_fallbacks == 0
    finally:
        runner.zygotes.stop()
    return warm, cold


def same(warm, cold) -> None:
    assert warm.returncode == cold.returncode
    assert warm.stdout == cold.stdout
    sig = lambda o: [s.id for s, _ in distinct_failures(o, MatchOptions())]  # noqa: E731
    assert sig(warm) == sig(cold)
    assert [r.text for r in warm.tracebacks] == [r.text for r in cold.tracebacks]
    assert [r.origin for r in warm.tracebacks] == [r.origin for r in cold.tracebacks]


def write(path: Path, code: str) -> Path:
    path.write_text(textwrap.dedent(code))
    return path


@pytest.mark.parametrize("entry", json.loads((CORPUS / "MANIFEST.json").read_text())["scripts"],
                         ids=lambda e: e["file"])
def test_corpus_scripts_fail_the_same_way_warm_and_cold(entry):
    warm, cold = both(CORPUS / entry["file"], tuple(entry["args"]))
    if entry.get("issue") == 29:
        # Two ranks fail at once: which one's traceback is printed first differs run to run,
        # warm or cold; the same failures must be there.
        assert sorted(map(str, (signature_of(r) for r in warm.tracebacks))) == \
            sorted(map(str, (signature_of(r) for r in cold.tracebacks)))
    else:
        same(warm, cold)
    assert distinct_failures(warm, MatchOptions()), "the corpus script did not fail"


CASES = {
    "spawn": """
        import multiprocessing as mp
        import json

        def work(x):
            return json.loads(x)

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            with ctx.Pool(1) as pool:
                pool.map(work, ['{"a": 1,}'])
    """,
    "exit3": """
        import sys
        print("about to exit")
        sys.exit(3)
    """,
    "swallowed": """
        import json
        import logging
        logging.basicConfig()
        log = logging.getLogger("worker")
        try:
            json.loads("{bad")
        except ValueError:
            log.exception("job failed")
        print("still alive")
    """,
    "main_guard": """
        import json
        print(__name__)
        if __name__ == "__main__":
            json.loads("[1, 2,]")
    """,
    "argv": """
        import sys
        import json
        print(sys.argv)
        json.loads(sys.argv[1])
    """,
    "atexit_thread": """
        import atexit
        import threading
        import json
        atexit.register(lambda: print("atexit ran"))
        t = threading.Thread(target=lambda: print("thread ran"))
        t.start()
        json.loads("nope")
    """,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_script_shapes_behave_the_same_warm_and_cold(tmp_path, name):
    script = write(tmp_path / f"{name}.py", CASES[name])
    args = ('{"k": 1,}',) if name == "argv" else ()
    warm, cold = both(script, args)
    same(warm, cold)
    if name == "exit3":
        assert warm.returncode == 3
    if name == "swallowed":
        assert warm.returncode == 0 and warm.tracebacks
    if name == "main_guard":
        assert warm.stdout.strip() == "__main__"
    if name == "spawn":
        assert any("JSONDecodeError" in r.exc_type for r in warm.tracebacks)


def _site_package(tmp_path: Path, name: str, body: str) -> Path:
    site = tmp_path / "site"
    (site / name).mkdir(parents=True)
    write(site / name / "__init__.py", body)
    return site


def test_import_time_side_effects_match(tmp_path):
    """A module that prints and reads the environment when imported: the zygote imports it once,
    but what the child prints and sees is what a cold run prints and sees."""
    site = _site_package(tmp_path, "noisy", """
        import os
        print("noisy imported")
        LEVEL = os.environ.get("NOISY_LEVEL", "unset")
    """)
    work = tmp_path / "work"
    work.mkdir()
    script = write(work / "uses_noisy.py", """
        import noisy
        import os
        print("level", noisy.LEVEL, os.environ.get("NOISY_LEVEL"))
        raise RuntimeError("level was " + noisy.LEVEL)
    """)
    warm, cold = both(script, env={"PYTHONPATH": str(site), "NOISY_LEVEL": "3"})
    assert "noisy imported" in cold.stdout
    assert warm.stdout.count("noisy imported") == cold.stdout.count("noisy imported") - 1 or warm.stdout == cold.stdout
    assert [r.message for r in warm.tracebacks] == [r.message for r in cold.tracebacks] == ["level was 3"]


def test_a_script_that_behaves_differently_warm_is_caught_and_runs_cold(tmp_path):
    """A module that captures the run's TMPDIR at import: warm, it captured the zygote's. The
    reduction notices before trusting any warm run, says so, and reduces cold."""
    site = _site_package(tmp_path, "tmpcache", """
        import os
        TMP = os.environ.get("TMPDIR")
    """)
    work = tmp_path / "work"
    work.mkdir()
    write(work / "stale.py", """
        import tmpcache
        import os
        import json
        if tmpcache.TMP != os.environ.get("TMPDIR"):
            raise AssertionError("stale temporary directory")
        unused = 1
        json.loads("{oops")
    """)
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "stale.py", "--out", str(tmp_path / "r"),
                           "--no-env", "--max-time", "120"], cwd=work, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "COLUMNS": "200"},
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cold runs:" in proc.stdout and "does not fail the same way when started warm" in proc.stdout
    (folder,) = (tmp_path / "r").iterdir()
    data = json.loads((folder / "reduction.json").read_text())
    # the one warm run is the check of the original itself; every candidate ran cold
    assert data["warm"]["enabled"] is False and data["warm"]["runs_warm"] == 1


def test_a_zygote_that_dies_costs_a_cold_run_not_a_verdict(tmp_path):
    """The zygote is killed while its child runs: the child dies with it (no orphan), and the
    candidate is run again cold, so the verdict is still a real one."""
    import threading
    script = write(tmp_path / "s.py", """
        import json
        import time
        time.sleep(1.5)
        json.loads("{x")
    """)
    source = script.read_text()
    runner = Runner(RunSpec(script=script, timeout=60))
    runner.zygotes = _pool(runner, source)
    try:
        z = runner.zygotes.acquire()
        runner.zygotes.release(z)
        threading.Timer(0.5, lambda: os.killpg(z._proc.pid, 9)).start()
        outcome = runner.run(source)
        assert [r.exc_type for r in outcome.tracebacks] == ["json.decoder.JSONDecodeError"]
        assert runner.warm_fallbacks == 1 and runner.warm_runs == 0
    finally:
        runner.zygotes.stop()


def _zygotes_alive() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            # this checkout's own (other checkouts on the machine run zygotes of their own)
            if str(ROOT / "reducer" / "run" / "zygote_server.py").encode() in cmd:
                pids.append(int(entry))
    return pids


def test_reduce_warm_end_to_end_leaves_no_zygote(tmp_path):
    script = write(tmp_path / "job.py", """
        import json
        import os

        def helper(n):
            return n + 1

        print(helper(2), os.sep)
        json.loads('{"a": 1,}')
    """)
    before = set(_zygotes_alive())
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", script.name, "--out", "r", "--no-env"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warm start:" in proc.stdout
    (folder,) = (tmp_path / "r").iterdir()
    data = json.loads((folder / "reduction.json").read_text())
    assert data["warm"]["enabled"] and data["warm"]["runs_warm"] > 0 and 0 < data["slot_utilisation"] <= 1
    assert (folder / "repro.py").read_text().count("\n") <= 3
    assert set(_zygotes_alive()) - before == set()


def test_max_time_bounds_the_confirmation_runs(tmp_path):
    write(tmp_path / "slow.py", """
        import time
        time.sleep(60)
        raise ValueError("late")
    """)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "slow.py", "--max-time", "3", "--no-env"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    took = time.monotonic() - t0
    assert proc.returncode == 14, proc.stdout + proc.stderr
    assert "time limit" in proc.stderr
    assert took < 3 + 8, took


def test_max_time_stops_a_reduction_and_resume_continues(tmp_path):
    write(tmp_path / "steps.py", """
        import json
        import time
        time.sleep(1.5)
        a = 1
        b = 2
        c = 3
        d = 4
        e = 5
        f = 6
        json.loads("{broken")
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    first = subprocess.run([sys.executable, "-m", "bot", "reduce", "steps.py", "--out", "r", "--no-env",
                            "--cold", "--no-trace", "--max-time", "4.5"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, env=env)
    (folder,) = (tmp_path / "r").iterdir()
    data = json.loads((folder / "reduction.json").read_text())
    if data["status"] == "done":
        pytest.skip("finished inside the time limit on this machine")
    assert first.returncode == 14, first.stdout + first.stderr
    assert data["status"] == "stopped: time limit"
    assert "run again with --resume to continue" in first.stdout
    second = subprocess.run([sys.executable, "-m", "bot", "reduce", "steps.py", "--out", "r", "--no-env",
                             "--cold", "--no-trace", "--resume"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "not confirmed again" in second.stdout
    done = json.loads((folder / "reduction.json").read_text())
    assert done["status"] == "done" and done["runs"] > data["runs"]


def test_from_imports_resolve_lazy_attributes_in_the_zygote(tmp_path):
    """`from pkg import Name` on a lazy package (transformers' style: the class's module loads
    on attribute access) is resolved once in the zygote, not in every child."""
    site = tmp_path / "site"
    (site / "lazypkg").mkdir(parents=True)
    write(site / "lazypkg" / "__init__.py", """
        def __getattr__(name):
            if name == "Heavy":
                from lazypkg.heavy import Heavy
                return Heavy
            raise AttributeError(name)
    """)
    write(site / "lazypkg" / "heavy.py", """
        import os
        class Heavy:
            loaded_in = os.getpid()
    """)
    script = write(tmp_path / "job.py", """
        from lazypkg import Heavy
        import os
        raise RuntimeError("loaded here" if Heavy.loaded_in == os.getpid() else "loaded ahead")
    """)
    assert warm_imports(script.read_text(), tmp_path) == ["lazypkg:Heavy", "os"]
    warm, cold = both(script, env={"PYTHONPATH": str(site)})
    assert "RuntimeError: loaded ahead" in warm.stderr
    assert "RuntimeError: loaded here" in cold.stderr


@pytest.mark.parametrize("name", ["worker_swallow.py", "device_map_entry.py", "classes_metrics.py"])
def test_a_traced_run_records_the_same_warm_and_cold(name):
    # Re-traces of the best are forked from the zygote: what they record must be what a cold
    # traced run records (only the lines and values of the script's own frames count).
    from reducer.analysis.trace import runner_run_fn, trace_run
    script = CORPUS / name
    source = script.read_text()
    runner = Runner(RunSpec(script=script, timeout=60))
    runner.zygotes = _pool(runner, source)
    try:
        warm = trace_run(source, runner_run_fn(runner, warm=True))
        assert runner.warm_runs == 1
        cold = trace_run(source, runner_run_fn(runner))
        assert runner.warm_runs == 1        # a launcher run is cold unless asked for warm
    finally:
        runner.zygotes.stop()
    assert warm.lines == cold.lines and warm.lines
    assert warm.binding_sites() == cold.binding_sites()
    assert warm.literal_sites() == cold.literal_sites()
    assert warm.dispatch_choices() == cold.dispatch_choices()
