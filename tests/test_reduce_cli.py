"""`reprobot reduce` as a user runs it: the first step, bad input, exit codes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reducer.errors import ExitCode

ROOT = Path(__file__).resolve().parents[1]


def reprobot(*args: str, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT), **(env or {})},
                          timeout=timeout)


def write(path: Path, code: str) -> Path:
    path.write_text(textwrap.dedent(code))
    return path


def test_first_step_stores_the_failure(tmp_path):
    write(tmp_path / "worker.py", """
        import logging
        logging.basicConfig()
        def load(n):
            return {}[n]
        try:
            load(22)
        except Exception:
            logging.exception("Worker error")
    """)
    proc = reprobot("reduce", "worker.py", "--no-reduce", "--out", "store", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "KeyError: <N>" in proc.stdout
    (folder,) = (tmp_path / "store").iterdir()
    sig = json.loads((folder / "signature.json").read_text())
    assert folder.name == f"worker-{sig['signature']['id']}"
    assert sig["signature"]["exc_type"] == "KeyError"
    assert sig["record"]["message"] == "22"
    assert len(sig["runs"]) == 2
    assert (folder / "original.py").read_text() == (tmp_path / "worker.py").read_text()
    assert "KeyError: 22" in (folder / "traceback.txt").read_text()


def test_several_failures_listed_and_picked(tmp_path):
    write(tmp_path / "two.py", """
        import logging
        for exc in (KeyError(1), TypeError("bad kwarg 'x'")):
            try:
                raise exc
            except Exception:
                logging.exception("job failed")
    """)
    proc = reprobot("reduce", "two.py", "--no-reduce", "--pick", "2", "--out", "s", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "choose with --pick N" in proc.stdout
    (folder,) = (tmp_path / "s").iterdir()
    assert json.loads((folder / "signature.json").read_text())["signature"]["exc_type"] == "TypeError"


def test_script_arguments_pass_through(tmp_path):
    write(tmp_path / "a.py", """
        import sys
        if sys.argv[1:] == ["--model", "tiny"]:
            raise NotImplementedError("tiny")
    """)
    ok = reprobot("reduce", "a.py", "--no-reduce", "--out", "s", cwd=tmp_path)
    assert ok.returncode == ExitCode.NO_FAILURE
    proc = reprobot("reduce", "a.py", "--no-reduce", "--out", "s", "--", "--model", "tiny", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name,content,code,words", [
    ("missing.py", None, ExitCode.FILE_MISSING, "no such file"),
    ("bin.py", b"\x7fELF\x00\x00\x01", ExitCode.NOT_PYTHON, "not a Python script"),
    ("broken.py", b"def f(:\n    pass\n", ExitCode.NOT_PYTHON, "does not parse (line 1"),
    ("fine.py", b"print('ok')\n", ExitCode.NO_FAILURE, "nothing to reduce"),
    ("hang.py", b"import time\ntime.sleep(60)\n", ExitCode.TIMEOUT, "timed out"),
])
def test_bad_input_one_line_and_distinct_exit(tmp_path, name, content, code, words):
    if content is not None:
        (tmp_path / name).write_bytes(content)
    proc = reprobot("reduce", name, "--out", "s", "--timeout", "2", cwd=tmp_path)
    assert proc.returncode == code
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_interpreter(tmp_path):
    write(tmp_path / "a.py", "raise ValueError\n")
    proc = reprobot("reduce", "a.py", "--python", "/no/such/python", cwd=tmp_path)
    assert proc.returncode == ExitCode.NO_INTERPRETER
    assert proc.stderr.strip() == "reprobot: interpreter not found or not executable: /no/such/python"


def test_flaky_failure_is_measured(tmp_path):
    """Run 2 passes: no longer refused at once (#32) but measured to --flaky-runs, then fixed seeds
    are tried (each dropped after its first run that passes), and the rate is stored."""
    counter = tmp_path / "counter"
    write(tmp_path / "flaky.py", """
        import os, pathlib
        c = pathlib.Path(os.environ["FLAKY_COUNTER"])
        n = int(c.read_text()) if c.exists() else 0
        c.write_text(str(n + 1))
        if n % 2 == 0:
            raise ConnectionError("only sometimes")
    """)
    proc = reprobot("reduce", "flaky.py", "--out", "s", "--no-reduce", cwd=tmp_path,
                    env={"FLAKY_COUNTER": str(counter)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "flaky: fails in 5 of 10 runs" in " ".join(proc.stdout.split())
    # 10 measuring runs, then 4 seeds of which each fails once and then passes
    assert int(counter.read_text()) == 10 + 4 * 2
    [sig] = (tmp_path / "s").glob("*/signature.json")
    assert json.loads(sig.read_text())["rate"] == {"failed": 5, "runs": 10}


@pytest.mark.slow
def test_real_hf_stack_gemma4_clippable_linear(tmp_path):
    """A tiny Gemma4 from a config + get_peft_model: peft's real unsupported-module error."""
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    write(tmp_path / "lora.py", """
        from transformers import (Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration,
                                  Gemma4TextConfig, Gemma4VisionConfig)
        from peft import LoraConfig, get_peft_model
        text = Gemma4TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                                vocab_size_per_layer_input=128, hidden_size_per_layer_input=16,
                                layer_types=["sliding_attention", "full_attention"], sliding_window=32)
        vision = Gemma4VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                    num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                                    use_clipped_linears=True)
        audio = Gemma4AudioConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, output_proj_dims=32)
        model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=text, vision_config=vision, audio_config=audio))
        get_peft_model(model, LoraConfig(target_modules=["q_proj", "v_proj"]))
    """)
    proc = reprobot("reduce", "lora.py", "--no-reduce", "--out", "s", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (folder,) = (tmp_path / "s").iterdir()
    sig = json.loads((folder / "signature.json").read_text())["signature"]
    assert sig["exc_type"] == "ValueError"
    assert sig["message"].startswith("Target module Gemma4ClippableLinear(...) is not supported.")
    assert sig["frames"][0] == "peft/tuners/lora/model.py:_create_new_module"


def _interrupt_once(pattern: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Start `reprobot reduce`, and send it SIGINT as soon as a file matching ``pattern`` exists."""
    proc = subprocess.Popen([sys.executable, "-m", "bot", "reduce", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 120
    while not list(cwd.glob(pattern)) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_resume_keeps_the_traced_values(tmp_path):
    """A session interrupted right after its traced run, then --resume: the resumed search still
    has the traced run (first cut, recorded values), read back from the repro folder's trace.json,
    and the stored failure is trusted (no confirmation runs of the original)."""
    write(tmp_path / "job.py", """
        import time
        def budget(n):
            return {"k": n * 2}
        def unused():
            return 1
        def load(options):
            time.sleep(1.0)
            raise KeyError(options["k"])
        load(options=budget(21))
    """)
    first = _interrupt_once("store/*/trace.json", tmp_path, "job.py", "--out", "store", "--no-env", "--cold")
    (folder,) = (tmp_path / "store").iterdir()
    deadline = time.monotonic() + 5
    while not (folder / "trace.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    saved = json.loads((folder / "reduction.json").read_text()) if (folder / "reduction.json").exists() else {}
    if saved.get("status") == "done":
        pytest.skip("the first session finished before it could be interrupted (a very fast machine)")
    assert first.returncode == 130, first.stdout + first.stderr
    assert (folder / "trace.json").is_file()
    trace = json.loads((folder / "trace.json").read_text())
    assert any(c["func"] == "load" for c in trace["calls"])
    second = reprobot("reduce", "job.py", "--out", "store", "--resume", "--no-env", "--cold", cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "not confirmed again" in second.stdout
    repro = (folder / "repro.py").read_text()
    assert "budget" not in repro and "unused" not in repro
    done = json.loads((folder / "reduction.json").read_text())
    assert done["status"] == "done" and done["first_cut_done"]
    # both need the trace: without trace.json the resumed search would have neither
    assert done["passes"]["first_cut"]["accepted"] == 1 and done["passes"]["recorded_values"]["accepted"] >= 1


def test_a_memory_hog_is_stopped_and_reported_as_out_of_memory(tmp_path):
    write(tmp_path / "hog.py", """
        chunks = []
        while True:
            chunks.append(bytearray(32 * 1024 * 1024))
    """)
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "hog.py", "--out", "store", "--no-env"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "REPROBOT_MAX_RSS": "400M"})
    assert proc.returncode == 15, proc.stdout[-2000:] + proc.stderr[-2000:]
    err = " ".join(proc.stderr.split())
    assert "used more than 0.4 GiB of memory and was stopped" in err and "REPROBOT_MAX_RSS" in err
    assert not (tmp_path / "store").exists() or not list((tmp_path / "store").iterdir())


def test_a_sigkill_without_a_traceback_is_not_a_bug_to_report(tmp_path):
    write(tmp_path / "killed.py", """
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = reprobot("reduce", "killed.py", "--out", "store", "--no-env", cwd=tmp_path)
    assert proc.returncode == 15, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "killed by SIGKILL without a Python traceback" in " ".join(proc.stderr.split())


def test_a_slow_original_is_not_silent(monkeypatch):
    """While the original runs, a line every HEARTBEAT seconds says it is still going."""
    import reducer.failure.original as failure_mod
    from reducer.failure.original import FailureSpec, find_failure
    monkeypatch.setattr(failure_mod, "HEARTBEAT", 0.5)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "slow.py"
        script.write_text("import time\ntime.sleep(1.8)\nraise KeyError('late')\n")
        heard: list[str] = []
        find_failure(FailureSpec(script=script, source=script.read_text(), python=sys.executable, runs=1),
                     notify=heard.append)
    assert heard[0].startswith("running slow.py (run 1 of 1")
    assert any("slow.py: still running after" in h for h in heard[1:]), heard


def test_resume_on_a_finished_reduction_says_so_and_runs_nothing(tmp_path):
    """A reduction that reached its fixpoint has nothing to resume: --resume says so and leaves
    the folder as it is, instead of searching again from the original."""
    write(tmp_path / "job.py", """
        import json
        def unused():
            return 1
        json.loads("{broken")
    """)
    first = reprobot("reduce", "job.py", "--out", "store", "--no-env", "--cold", "--no-trace", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    (folder,) = (tmp_path / "store").iterdir()
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert json.loads(before["reduction.json"])["status"] == "done"
    again = reprobot("reduce", "job.py", "--out", "store", "--resume", "--no-env", "--cold", "--no-trace", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already reduced" in " ".join(again.stdout.split())
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_a_script_that_needs_arguments_shows_its_error_and_the_dash_dash_hint(tmp_path):
    write(tmp_path / "train.py", """
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("--data", required=True)
        args = p.parse_args()
        raise KeyError(args.data)
    """)
    proc = reprobot("reduce", "train.py", "--no-reduce", "--out", "store", cwd=tmp_path)
    assert proc.returncode == ExitCode.NO_FAILURE
    err = " ".join(proc.stderr.split())
    assert "the following arguments are required: --data" in err, proc.stderr
    assert "refused its arguments (argparse's usage error, exit 2)" in err and "ran to completion" not in err
    assert "reprobot reduce train.py -- ARGS" in err
    # And with its arguments after --, the same script's failure is found.
    proc = reprobot("reduce", "train.py", "--no-reduce", "--out", "store", "--", "--data", "x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_reduction_json_says_what_the_repro_and_the_original_cost(tmp_path):
    """The final cold run's peak memory and wall time next to the original's."""
    write(tmp_path / "payloads.py", """
        import time
        import zlib

        def build(size=400_000):
            payload = bytes(size)
            time.sleep(1.0)
            return payload

        payload = build(size=64)
        extra = [1, 2, 3]
        zlib.decompress(payload)
    """)
    proc = reprobot("reduce", "payloads.py", "--out", "store", "--no-env", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (folder,) = (tmp_path / "store").iterdir()
    assert "zlib.decompress" in (folder / "repro.py").read_text()
    cost = json.loads((folder / "reduction.json").read_text())["cost"]
    # (a repro that ends before the first memory sample reads 0)
    assert cost["original"]["peak_rss"] > 0, cost
    assert cost["repro"]["peak_rss"] <= cost["original"]["peak_rss"] * 1.1 + 32 * 1024 ** 2, cost
    assert cost["repro"]["wall_time"] < cost["original"]["wall_time"], cost    # the sleep is gone


def test_the_time_limit_during_the_final_cold_run_keeps_the_best_and_says_resume(tmp_path):
    """On a loaded machine the search's reserve can be too short for the final cold run: that is
    the time limit (exit 14, the --resume line, repro.py kept), never a traceback."""
    write(tmp_path / "t.py", "import json\njson.loads('{x')\n")
    code = ("import sys, reducer.engine as r\n"
            "from reducer.errors import DeadlineReached\n"
            "def spent(*a, **k):\n    raise DeadlineReached()\n"
            "r.cold_verdict = spent\n"
            "from bot.cli import main\n"
            "sys.exit(main(['reduce', 't.py', '--no-env']))\n")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == ExitCode.TIME_LIMIT, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "--resume" in proc.stdout + proc.stderr
    assert list(tmp_path.glob("repros/*/repro.py")) or list(tmp_path.glob("**/repro.py"))
