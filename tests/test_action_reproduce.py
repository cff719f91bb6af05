"""The reproduce job's own guards (bot/action/reproduce.py), without a full reduction."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from bot.action.event import load_event
from bot.action.reproduce import ReproduceOptions, _status_of, child_env, copy_repro, reproduce
from bot.action.result import ActionResult
from reducer.errors import ExitCode

EVENTS = Path(__file__).parent / "data" / "events"
TOKEN = "ghp_" + "Z" * 10 + "0123456789abcdefghijklmnop"


def test_child_environment_is_an_allow_list(tmp_path: Path) -> None:
    environ = {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0", "HOME": "/home/runner",
        "GITHUB_TOKEN": "x", "GH_TOKEN": "x", "HF_TOKEN": "hf_" + "a" * 34, "ACTIONS_RUNTIME_TOKEN": "x",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://x", "GITHUB_WORKSPACE": "/w", "RUNNER_TEMP": "/t",
        "AWS_SECRET_ACCESS_KEY": "x", "LD_PRELOAD": "/evil.so", "PYTHONPATH": "/w", "SOME_API_KEY": "x",
        "OMP_NUM_THREADS": TOKEN,  # an allowed name carrying a credential-looking value
        "MY_SETTING": "1", "MY_PASSWORD": "x",
    }
    env = child_env(tmp_path, pass_env=("MY_SETTING", "MY_PASSWORD", "GITHUB_WORKSPACE"), environ=environ)
    assert env["PATH"] == "/usr/bin" and env["LANG"] == "C.UTF-8" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["HOME"] == str(tmp_path) and env["MY_SETTING"] == "1"
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "HF_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL",
                 "GITHUB_WORKSPACE", "RUNNER_TEMP", "AWS_SECRET_ACCESS_KEY", "LD_PRELOAD", "PYTHONPATH",
                 "SOME_API_KEY", "OMP_NUM_THREADS", "MY_PASSWORD"):
        assert name not in env, name


def test_exit_codes_become_statuses(tmp_path: Path) -> None:
    repro = tmp_path / "r"
    repro.mkdir()
    assert _status_of(ExitCode.NO_FAILURE, None) == "no-failure"
    assert _status_of(ExitCode.TIMEOUT, None) == "timeout"
    assert _status_of(ExitCode.FLAKY, repro) == "flaky"
    assert _status_of(ExitCode.NOT_PYTHON, None) == "syntax-error"
    assert _status_of(1, None) == "error"
    assert _status_of(None, None) == "timeout"          # killed at the wall limit, nothing recorded
    assert _status_of(None, repro) == "reproduced"       # killed, but the failure was recorded
    assert _status_of(0, repro) == "reproduced"
    (repro / "repro.py").write_text("x\n")
    assert _status_of(0, repro) == "reduced"
    assert _status_of(ExitCode.INTERRUPTED, repro) == "reduced"
    assert _status_of(ExitCode.TIME_LIMIT, repro) == "reduced"      # --max-time: best so far kept


def test_copy_repro_takes_plain_small_files_and_scrubs_them(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (src / "repro.py").write_text(f"TOKEN = '{TOKEN}'\nraise KeyError(1)\n")
    (src / "signature.json").write_text(json.dumps({"signature": {"message": f"bad {TOKEN}", "id": "0123456789"}}))
    (src / "big.txt").write_text("x" * (3 * 1024 * 1024))
    (src / "link.py").symlink_to(tmp_path / "outside.py")
    (tmp_path / "outside.py").write_text("secret\n")
    (src / "sub").mkdir()
    (src / ".hidden.py").write_text("x\n")
    (src / "core").write_text("no suffix\n")
    assert copy_repro(src, dest) == ["repro.py", "signature.json"]
    assert TOKEN not in (dest / "repro.py").read_text()
    sig = json.loads((dest / "signature.json").read_text())
    assert TOKEN not in sig["signature"]["message"] and sig["signature"]["id"] == "0123456789"


def test_refusals_run_nothing_and_leave_a_fresh_artifact(tmp_path: Path) -> None:
    out = tmp_path / "artifact"
    (out / "repro").mkdir(parents=True)
    (out / "repro" / "stale.py").write_text("old run\n")
    ev = load_event(EVENTS / "labeled_failing.json")
    opts = ReproduceOptions(out=out, scratch_root=tmp_path / "scratch")
    r = reproduce(ev, opts, environ={**os.environ, "REPROBOT_GATE_ALLOWED": "false"})
    assert r.status == "not-allowed" and not (out / "repro").exists()
    assert ActionResult.read_untrusted(out).status == "not-allowed"
    assert not (tmp_path / "scratch").exists()  # nothing was even prepared
    r = reproduce(ev, dataclasses.replace(opts, label="other"), environ={})
    assert r.status == "ignored"
    r = reproduce(ev, dataclasses.replace(opts, max_body=100), environ={"REPROBOT_GATE_ALLOWED": "true"})
    assert r.status == "too-large" and r.body_bytes > 100 and r.candidates == 0
    r = reproduce(ev, opts, environ={})
    assert r.status == "not-allowed" and "REPROBOT_GATE_ALLOWED is not set" in r.detail
    unlabeled = dataclasses.replace(ev, action="unlabeled")
    assert reproduce(unlabeled, opts, environ={"REPROBOT_GATE_ALLOWED": "true"}).status == "ignored"
    r = reproduce(load_event(EVENTS / "labeled_syntax_error.json"), opts, environ={"REPROBOT_GATE_ALLOWED": "true"})
    assert r.status == "syntax-error" and r.syntax_error and r.syntax_error.startswith("line 1:")
    r = reproduce(load_event(EVENTS / "labeled_attachment.json"), opts, environ={"REPROBOT_GATE_ALLOWED": "true"})
    assert r.status == "attachment-only" and r.attachments == 1
