"""`reduce` then `file --dry-run` is the whole workflow: file runs what the folder lacks
(route, environment, related issues, the draft for the routed repository), says what it did
and skipped, warns about a likely duplicate and will not file one without being told; output
on a log stays short; SIGTERM keeps the best result and leaves nothing running.

The failing library is a fake ``peft`` package next to the script (real subprocesses, real
routing, real dedup against a local GitHub)."""
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

from bot.cli import main
from reducer.errors import ExitCode
from tests.draft_support import copy_repro
from tests.fakegithub import FakeGitHub

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "bench" / "corpus"

FAKE_PEFT = {
    "peft/__init__.py": "from peft.config import LoraConfig\nfrom peft.mapping import get_peft_model\n",
    "peft/config.py": """
        class LoraConfig:
            def __init__(self, r=8, target_modules=None):
                self.r = r
                self.target_modules = list(target_modules or [])
    """,
    "peft/mapping.py": """
        from peft.tuners.lora.model import LoraModel


        def get_peft_model(model, config):
            return LoraModel(model, config)
    """,
    "peft/tuners/__init__.py": "",
    "peft/tuners/lora/__init__.py": "",
    "peft/tuners/lora/model.py": """
        class LoraModel:
            def __init__(self, model, config):
                for name in config.target_modules:
                    self._create_and_replace(name, model[name])

            def _create_and_replace(self, name, target):
                return self._create_new_module(target)

            @staticmethod
            def _create_new_module(target):
                raise ValueError(f"Target module {target}() is not supported. Currently, only the "
                                 "following modules are supported: `torch.nn.Linear`.")
    """,
}

SCRIPT = """
    from peft import LoraConfig, get_peft_model

    SETTINGS = {"rank": 8, "targets": ["q_proj", "v_proj"]}


    def describe(settings):
        return ", ".join(f"{k}={v}" for k, v in settings.items())


    def main():
        print("settings:", describe(SETTINGS))
        model = {"q_proj": "ClippableLinear", "v_proj": "ClippableLinear"}
        config = LoraConfig(r=SETTINGS["rank"], target_modules=SETTINGS["targets"])
        get_peft_model(model, config)


    main()
"""

MESSAGE = "Target module ClippableLinear() is not supported."


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def reprobot(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full)


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No token, an empty index of its own, and a lock written without an index."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("REPROBOT_GITHUB_API", raising=False)
    monkeypatch.setenv("REPROBOT_INDEX_DB", str(tmp_path / "index.db"))
    monkeypatch.setenv("REPROBOT_OFFLINE", "1")
    return tmp_path


@pytest.fixture(scope="module")
def reduced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real `reduce --no-env` of the fake-peft script: a folder with a reduction and nothing else."""
    work = tmp_path_factory.mktemp("fileflow")
    site = work.parent / (work.name + "-venv") / "lib" / "python3" / "site-packages"
    for rel, text in FAKE_PEFT.items():
        write(site / rel, text)
    write(work / "lora_job.py", SCRIPT)
    proc = reprobot("reduce", "lora_job.py", "--out", "repros", "--no-env", "--max-time", "240", cwd=work,
                    env={"PYTHONPATH": f"{ROOT}{os.pathsep}{site}"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = (work / "repros").iterdir()
    assert f"next: reprobot file --dry-run {folder.relative_to(work)}" in " ".join(proc.stdout.split())
    return folder


def fresh(reduced: Path, tmp_path: Path) -> Path:
    import shutil
    dest = tmp_path / "repros" / reduced.name
    shutil.copytree(reduced, dest)
    return dest


def test_file_dry_run_right_after_reduce_runs_the_missing_steps(reduced: Path, offline: Path,
                                                                capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    folder = fresh(reduced, offline)
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(("route", "related", "draft", "env"))) == []
    assert main(["file", str(folder), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "route: file at huggingface/peft: raised in peft" in out
    assert "environment: env.json and requirements.lock written" in out
    # An empty index: the known issues bundled with reprobot are searched, and the line says so.
    from bot.upstream.seed import known_issues
    assert f"found ({len(known_issues())} known issues bundled with reprobot); best: peft#" in out, out
    assert "reprobot index sync --repo peft" in out
    related = json.loads((folder / "related.json").read_text())
    assert related["index_source"] == "bundled" and related["indexed_issues"] >= 300
    assert "draft: draft-peft.md written" in out
    assert "huggingface/peft: issue preview" in out
    assert "note: related.json is missing" not in out
    # one draft, for the routed repository; the title names the call and the error
    assert sorted(p.name for p in folder.glob("draft-*.md")) == ["draft-peft.md"]
    title = json.loads((folder / "draft-peft.json").read_text())["title"]
    assert title.startswith("get_peft_model: ValueError: Target module ClippableLinear() is not supported"), title
    body = (folder / "draft-peft.md").read_text()
    assert "Instead it raises `ValueError: Target module ClippableLinear() is not supported`" in body
    # a second preview keeps what is there and says so
    assert main(["file", str(folder), "--dry-run"]) == 0
    again = " ".join(capsys.readouterr().out.split())
    assert "route: file at huggingface/peft" in again and "(route.json)" in again
    assert "draft: draft-peft.md (kept" in again
    # Inside the repro folder, no argument is needed: that folder is the one previewed.
    monkeypatch.chdir(folder)
    assert main(["file", "--dry-run"]) == 0
    assert "huggingface/peft: issue preview" in " ".join(capsys.readouterr().out.split())


def _same_issue_body() -> str:
    return textwrap.dedent(f"""\
        get_peft_model fails for my model.

        ```
        Traceback (most recent call last):
          File "train.py", line 12, in <module>
            get_peft_model(model, config)
          File "/home/u/venv/lib/python3.11/site-packages/peft/mapping.py", line 5, in get_peft_model
            return LoraModel(model, config)
          File "/home/u/venv/lib/python3.11/site-packages/peft/tuners/lora/model.py", line 4, in __init__
            self._create_and_replace(name, model[name])
          File "/home/u/venv/lib/python3.11/site-packages/peft/tuners/lora/model.py", line 7, in _create_and_replace
            return self._create_new_module(target)
          File "/home/u/venv/lib/python3.11/site-packages/peft/tuners/lora/model.py", line 11, in _create_new_module
            raise ValueError(
        ValueError: {MESSAGE} Currently, only the following modules are supported: `torch.nn.Linear`.
        ```
        """)


def test_with_a_token_related_issues_are_searched_and_a_duplicate_stops_filing(
        reduced: Path, offline: Path, fake_github: FakeGitHub, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = fresh(reduced, offline)
    # --submit runs the repro once more where it failed: with the fake peft importable.
    work = reduced.parent.parent
    site = work.parent / (work.name + "-venv") / "lib" / "python3" / "site-packages"
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{site}")
    fake_github.add_repo("huggingface/peft")
    fake_github.add_issue("huggingface/peft", number=3129, title="ClippableLinear is not supported by LoRA",
                          body=_same_issue_body())
    assert main(["file", str(folder), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    from bot.upstream.seed import known_issues
    assert (f"found ({len(known_issues())} known issues bundled with reprobot + GitHub search); best: peft#3129"
            in out), out
    assert "likely duplicate: peft#3129 (open) looks like the same failure" in out
    assert "likely the same by the calibrated model" in out
    assert out.index("likely duplicate") < out.index("issue preview")  # said first
    assert "comment there instead? https://github.com/huggingface/peft/issues/3129" in out
    assert "huggingface/peft#3129" in (folder / "draft-peft.md").read_text()
    # --submit --yes does not file over a likely duplicate ...
    assert main(["file", str(folder), "--submit", "--yes"]) == ExitCode.USAGE
    assert "pass --not-a-duplicate" in capsys.readouterr().err
    assert [i["number"] for i in fake_github.issues["huggingface/peft"].values()] == [3129]
    # ... unless the person says it is not one
    assert main(["file", str(folder), "--submit", "--yes", "--not-a-duplicate"]) == 0
    assert len(fake_github.issues["huggingface/peft"]) == 2


def test_no_draft_for_a_failure_in_the_users_own_code(tmp_path: Path, offline: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy_repro(tmp_path)  # json.loads on a trailing comma: nobody upstream's bug
    assert main(["draft", str(folder)]) == 0
    assert "no draft: not one of ours" in " ".join(capsys.readouterr().out.split())
    assert not list(folder.glob("draft-*"))
    assert main(["file", str(folder), "--dry-run"]) == ExitCode.NOTHING_TO_FILE
    assert "nothing to file upstream: not one of ours" in " ".join(capsys.readouterr().err.split())
    assert main(["draft", str(folder), "--repo", "peft"]) == 0  # asked for: written
    assert [p.name for p in folder.glob("draft-*.md")] == ["draft-peft.md"]


def test_reduce_on_a_log_prints_few_lines_and_json_on_request(tmp_path: Path) -> None:
    # a script the boundary call does not finish in a few runs (its writer has no literal form)
    script = CORPUS / "handler_hides_failure.py"
    work = tmp_path / "w"
    work.mkdir()
    (work / script.name).write_text(script.read_text(encoding="utf-8"), encoding="utf-8")
    proc = reprobot("reduce", script.name, "--out", "repros", "--no-env", "--max-time", "300", cwd=work)
    assert proc.returncode in (0, 14), proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    runs = json.loads(next((work / "repros").glob("*/reduction.json")).read_text())["runs"]
    assert runs >= 20 and len(lines) < 200, (runs, len(lines))
    assert "\x1b[" not in proc.stdout  # no escape codes in a log
    again = reprobot("reduce", script.name, "--out", "again", "--no-env", "--json", "--max-time", "300", cwd=work)
    assert again.returncode in (0, 14), again.stderr[-2000:]
    data = json.loads(again.stdout)
    assert data["status"] in ("done", "stopped: time limit") and data["statements_after"] < data["statements_before"]
    assert data["next"].startswith("reprobot file --dry-run again/")


def _processes_under(path: Path) -> list[str]:
    """Live processes whose command line or working directory is under ``path``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(path) in cmd or cwd.startswith(str(path)):
            found.append(f"{proc.name}: {cmd[:120]}")
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for leftover processes")
def test_sigterm_keeps_the_best_result_and_leaves_nothing_running(tmp_path: Path) -> None:
    write(tmp_path / "slow_job.py", """
        import time

        def helper_one():
            return 1

        def helper_two():
            return 2

        def load(n):
            time.sleep(1.5)
            raise KeyError(n)

        a = helper_one()
        b = helper_two()
        print(a, b)
        load(a + b)
    """)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "reduce", "slow_job.py", "--out", "store", "--no-env",
                             "--jobs", "2"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("store/*/reduction.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # candidates in flight
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    (folder,) = (tmp_path / "store").iterdir()
    saved = json.loads((folder / "reduction.json").read_text())
    if saved["status"] == "done":
        pytest.skip("the reduction finished before SIGTERM arrived (a very fast machine)")
    assert proc.returncode == ExitCode.TERMINATED, out[-2000:] + err[-2000:]
    assert saved["status"] == "interrupted"
    assert (folder / "repro.py").is_file()
    assert "--resume" in " ".join(out.split())
    time.sleep(0.5)
    assert _processes_under(tmp_path) == []


def test_the_search_phrase_sent_to_github_carries_nothing_private() -> None:
    from bot.upstream.dedup import Query, search_phrase
    from bot.upstream.index import normalized

    def phrase(message: str) -> str | None:
        return search_phrase(Query("ValueError", message, normalized(message), []))

    plain = "Target module ClippableLinear() is not supported by the LoRA tuner"
    assert phrase(plain) == plain
    leaky = "could not read the adapter config for carol.smith@example-corp.com at the shared cluster path"
    got = phrase(leaky)
    assert got and "carol" not in got and "example-corp" not in got
    token = "hf_" + "Ab3" * 12
    assert phrase(f"401 Unauthorized for token {token} while loading the tokenizer files") in (
        None, "while loading the tokenizer files")


def test_a_draft_older_than_the_results_is_rebuilt_unless_edited_by_hand(reduced: Path, offline: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    folder = fresh(reduced, offline)
    assert main(["file", str(folder), "--dry-run"]) == 0
    capsys.readouterr()
    # contrast ran after the draft: the next preview rebuilds it, with what contrast found.
    contrast = {"changes": [{"change": "without `target_modules=['clip']`",
                             "verdict": {"kind": "PASS", "detail": "exit 0"}}]}
    (folder / "contrast.json").write_text(json.dumps(contrast))
    assert main(["file", str(folder), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "draft: draft-peft.md rebuilt (newer: contrast.json)" in out, out
    assert "target_modules=['clip']" in (folder / "draft-peft.md").read_text()
    # A person edited the draft; then contrast changed again: the edit is kept and the line says
    # which result is newer than it.
    md = folder / "draft-peft.md"
    md.write_text(md.read_text() + "\nMy own note.\n")
    contrast["changes"][0]["change"] = "without `r=8`"
    (folder / "contrast.json").write_text(json.dumps(contrast))
    assert main(["file", str(folder), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "kept: edited by hand; newer than it: contrast.json" in out, out
    assert "My own note." in md.read_text()
