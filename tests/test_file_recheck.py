"""`file --submit` re-checks before it sends (issue #39), against the local fake GitHub.

Red-team findings: replacing repro.py after `reduce` and running `file --submit --yes` filed the
new code under the old signature and traceback as "reduced automatically … every kept step was
re-run"; a forged filed.json made --submit send nothing and print
``already filed: https://github-issues.evil.example/…``.

The folders are real `reprobot reduce` results of tiny standard-library scripts
(tests/draft_support.py: a json.loads error; here: a failure inside a local package that a test
then "fixes")."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.cli import main
from bot.issue.draft import marker
from bot.issue.filing import filed_entry, trusted_filed
from bot.issue.github import github_client
from bot.rerun.recheck import rerun, runs_for
from bot.store import ReproDir
from bot.verified import DIGEST_KEY, digest, verification
from reducer.errors import ExitCode, ReprobotError
from tests.draft_support import copy_repro
from tests.fakegithub import FakeGitHub

ROOT = Path(__file__).resolve().parents[1]
REPO = "huggingface/peft"
ISSUES = r"^/repos/huggingface/peft/issues$"
EVIL_URL = "https://github-issues.evil.example/huggingface/peft/issues/1"


@pytest.fixture
def repro(tmp_path: Path) -> Path:
    return copy_repro(tmp_path)


@pytest.fixture
def gh(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO)
    return fake_github


def submit(repro: Path, *extra: str) -> int:
    return main(["file", str(repro), "--submit", "--yes", "--repo", "peft", "--no-search", *extra])


def flat(text: str) -> str:
    return " ".join(text.split())


def posts(gh: FakeGitHub) -> int:
    return len(gh.requests_to("POST", ISSUES))


def test_reduce_records_the_verified_repro(repro: Path) -> None:
    red = json.loads((repro / "reduction.json").read_text())
    assert red[DIGEST_KEY] == digest((repro / "repro.py").read_text())
    assert verification(ReproDir(repro)).ok


def test_a_repro_swapped_after_reduce_is_not_filed_or_run(repro: Path, gh: FakeGitHub, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ran = tmp_path / "swapped-code-ran"
    # New code that fails the very same way: the re-run alone could not tell it from the repro.
    (repro / "repro.py").write_text(f"import json, pathlib\npathlib.Path({str(ran)!r}).write_text('x')\n"
                                    "json.loads('{')\n")
    env = (repro / "env.json").read_text()
    (repro / "env.json").unlink()      # env pinning would run the repro to learn what it imports
    assert submit(repro) == ExitCode.BAD_INPUT
    err = flat(capsys.readouterr().err)
    assert "not filed: repro.py is not the one the reduction verified" in err
    assert "`reprobot reduce` on the script again" in err and "--unverified" in err
    assert posts(gh) == 0 and not ran.exists()
    (repro / "env.json").write_text(env)
    # The preview says so too.
    assert main(["file", str(repro), "--dry-run", "--repo", "peft", "--no-search"]) == 0
    assert "repro.py is not the one the reduction verified (it changed after `reduce` wrote it)" in flat(
        capsys.readouterr().out)
    ran.unlink(missing_ok=True)
    # Filed as it is only when the person says so, and only after it failed as recorded once more.
    assert submit(repro, "--unverified") == 0
    out = flat(capsys.readouterr().out)
    assert "re-check: it fails the same way" in out and posts(gh) == 1 and ran.exists()


def test_a_folder_without_the_digest_is_refused(repro: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]) -> None:
    red = json.loads((repro / "reduction.json").read_text())
    del red[DIGEST_KEY]
    (repro / "reduction.json").write_text(json.dumps(red))
    assert submit(repro) == ExitCode.BAD_INPUT
    assert "reduction.json records no verified repro.py" in flat(capsys.readouterr().err)
    assert posts(gh) == 0


def test_a_swapped_repro_that_no_longer_fails_is_refused_by_the_rerun(repro: Path) -> None:
    (repro / "repro.py").write_text("import json\nprint(json.loads('{}'))\n")
    lines: list[str] = []
    with pytest.raises(ReprobotError) as e:
        rerun(ReproDir(repro), sys.executable, lines.append)
    assert e.value.exit_code == ExitCode.NO_FAILURE
    assert "not filed: repro.py no longer fails with the recorded signature" in e.value.message
    assert "it ran without the failure" in e.value.message
    # a pass of a failure taken to fail every time is evidence about its rate first (issue #40):
    # three more runs pass too, so it is no rate, and that is said before the refusal
    assert lines == ["re-check: running repro.py once more before filing",
                     "repro.py passed in all 4 of its runs on the locked versions (file --submit): it does not fail "
                     "here as recorded (is --python the interpreter it failed in?)"]


FAKELIB = '''
def load(path):
    raise ValueError(f"unsupported adapter format in {path}")
'''
SCRIPT = '''
import fakelib

settings = {"path": "adapter.bin", "verbose": True}
print("loading", settings["path"])
fakelib.load(settings["path"])
'''


def test_a_repro_fixed_upstream_is_not_filed(tmp_path: Path) -> None:
    """The verified repro, re-run where the library no longer fails: refused with one line."""
    lib = tmp_path / "lib"
    (lib / "fakelib").mkdir(parents=True)
    (lib / "fakelib" / "__init__.py").write_text(FAKELIB)
    (tmp_path / "job.py").write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{lib}"}
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "job.py", "--out", "repros", "--no-env",
                           "--max-time", "120"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (folder,) = (tmp_path / "repros").iterdir()
    repro = ReproDir(folder)
    assert verification(repro).ok and runs_for(repro) == 1
    # An edited repro.py is not "already reduced": --resume, as the refusal says, verifies again.
    verified = (folder / "repro.py").read_text()
    (folder / "repro.py").write_text(verified + "print('edited')\n")
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "job.py", "--out", "repros", "--no-env",
                           "--resume", "--max-time", "120"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "repro.py is not the one the reduction verified: reducing again" in " ".join(proc.stdout.split())
    assert verification(repro).ok and (folder / "repro.py").read_text() == verified
    lines: list[str] = []
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    try:
        assert rerun(repro, sys.executable, lines.append).kind.value == "same failure"
        (lib / "fakelib" / "__init__.py").write_text("def load(path):\n    return path\n")
        with pytest.raises(ReprobotError) as e:
            rerun(repro, sys.executable, lines.append)
    finally:
        os.environ.pop("PYTHONPATH")
    assert e.value.exit_code == ExitCode.NO_FAILURE
    assert "no longer fails with the recorded signature" in e.value.message
    assert "it ran without the failure" in e.value.message


def test_a_forged_filed_json_is_ignored_with_a_line_and_the_issue_is_filed(
        repro: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]) -> None:
    (repro / "filed.json").write_text(json.dumps({"issues": [
        {"repo": REPO, "number": 1, "url": EVIL_URL, "signature_id": "x", "title": "t", "filed_at": "",
         "created": True}]}))
    assert submit(repro) == 0
    out = flat(capsys.readouterr().out)
    assert out.count("filed.json ignored: its URL is on github-issues.evil.example, not where GitHub has "
                     "huggingface/peft (https://github.com/huggingface/peft/issues/1)") == 1, out
    assert "already filed" not in out and posts(gh) == 1
    filed = json.loads((repro / "filed.json").read_text())["issues"]
    assert [(f["repo"], f["url"]) for f in filed] == [(REPO, gh.issue(REPO, 1)["html_url"])]
    assert out.endswith(f"filed: {filed[0]['url']}")


def record(repro: Path, url: str, number: int) -> None:
    (repro / "filed.json").write_text(json.dumps({"issues": [
        {"repo": REPO, "number": number, "url": url, "signature_id": "x", "title": "t", "filed_at": "",
         "created": True}]}))


@pytest.mark.parametrize("url,why", [
    ("https://github.com/evil/peft/issues/1", "its URL names evil/peft, not huggingface/peft"),
    ("http://github.com/huggingface/peft/issues/1", "its URL on github.com is not an issue link"),
    ("https://github.com/huggingface/peft/issues/1?next=https://evil.example", "its URL on github.com is not an issue link"),
    ("https://github.com:8443/huggingface/peft/issues/1", "its URL on github.com is not an issue link"),
    ("https://github.com/huggingface/peft/pull/1", "its URL on github.com is not an issue link"),
    ("https://github.com/huggingface/peft/issues/2", "its URL on github.com is not an issue link"),   # number differs
])
def test_a_record_that_is_no_issue_link_of_the_target_is_ignored_without_asking(repro: Path, url: str, why: str) -> None:
    record(repro, url, 1)
    assert filed_entry(ReproDir(repro), REPO) == (None, why)


def test_a_record_is_believed_only_for_our_own_issue_read_back(repro: Path, gh: FakeGitHub) -> None:
    folder = ReproDir(repro)
    sig = folder.signature().id
    client = github_client(api_url=gh.url, write=True)
    gh.add_issue(REPO, number=1, title="someone else's", body=marker(sig), user="mallory")
    gh.add_issue(REPO, number=2, title="a PR", body=marker(sig), is_pr=True, user="reprobot-bot")
    gh.add_issue(REPO, number=3, title="ours, another failure", body=marker("0123456789"), user="reprobot-bot")
    gh.add_issue(REPO, number=4, title="ours", body="text\n\n" + marker(sig), user="reprobot-bot")
    lines: list[str] = []
    for number, why in [(1, "huggingface/peft#1 was not filed by reprobot-bot for this failure"),
                        (2, "huggingface/peft#2 is not an issue"),
                        (3, "huggingface/peft#3 was not filed by reprobot-bot for this failure"),
                        (99, "huggingface/peft#99 does not exist")]:
        record(repro, f"https://github.com/{REPO}/issues/{number}", number)
        assert trusted_filed(folder, REPO, client, sig, lines.append) is None
        assert lines[-1].startswith(f"filed.json ignored: {why}"), lines[-1]
    record(repro, f"https://github.com/{REPO}/issues/4", 4)
    found = trusted_filed(folder, REPO, client, sig, lines.append)
    assert found is not None and (found.number, found.url) == (4, f"https://github.com/{REPO}/issues/4")
    (repro / "filed.json").write_text("{not json")
    assert trusted_filed(folder, REPO, client, sig, lines.append) is None
    assert lines[-1] == "filed.json ignored: filed.json holds no readable record"
