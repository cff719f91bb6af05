"""The workflows pass actionlint and zizmor, and keep the security shape docs/ACTION.md promises.

actionlint and zizmor are external linters (.ci/run installs them); where one is not installed
its test is skipped with the reason. The structural checks need only PyYAML.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
DISCUSSION = REPO_ROOT / ".github" / "workflows" / "reprobot-discussion.yml"
WATCH = REPO_ROOT / ".github" / "workflows" / "reprobot-watch.yml"

# A workflow with the two mistakes the linters must catch: event text in a shell line, and the
# default (write-all) token. If a linter passes this, its pass on ours means nothing.
BAD_WORKFLOW = """\
name: bad
on:
  discussion:
    types: [labeled]
jobs:
  reply:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.discussion.body }}"
"""


def tool(name: str) -> str | None:
    """The linter on PATH, or next to this interpreter (a virtualenv that is not activated)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    env_override = os.environ.get(f"REPROBOT_{name.upper()}")
    return env_override or found


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_there_are_workflows() -> None:
    names = {p.name for p in WORKFLOWS}
    assert {"reprobot-discussion.yml", "ci.yml", "reprobot-watch.yml"} <= names


def test_actionlint() -> None:
    exe = tool("actionlint")
    if exe is None:
        pytest.skip("actionlint is not installed (.ci/run installs it)")
    proc = run([exe, "-no-color", *map(str, WORKFLOWS)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_injection(tmp_path: Path) -> None:
    exe = tool("actionlint")
    if exe is None:
        pytest.skip("actionlint is not installed (.ci/run installs it)")
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD_WORKFLOW)
    proc = run([exe, "-no-color", str(bad)])
    assert proc.returncode != 0 and "github.event.discussion.body" in proc.stdout


def zizmor_findings(paths: list[Path]) -> list[dict]:
    exe = tool("zizmor")
    if exe is None:
        pytest.skip("zizmor is not installed (.ci/run installs it)")
    proc = run([exe, "--offline", "--format=json", "--no-progress", *map(str, paths)])
    # zizmor exits non-zero when it finds something; the JSON on stdout is the verdict.
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def test_zizmor_finds_nothing() -> None:
    findings = zizmor_findings(WORKFLOWS)
    assert findings == [], [(f["ident"], f["desc"]) for f in findings]


def test_zizmor_catches_injection_and_excessive_permissions(tmp_path: Path) -> None:
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(BAD_WORKFLOW)
    idents = {f["ident"] for f in zizmor_findings([bad])}
    assert {"template-injection", "excessive-permissions", "unpinned-uses", "artipacked"} <= idents, idents


# --- the security shape, checked without any linter --------------------------------------

@pytest.fixture(scope="module")
def wf() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(DISCUSSION.read_text())


def all_steps(doc: dict):
    for job_id, job in doc["jobs"].items():
        for s in job.get("steps", []):
            yield job_id, s


def test_trigger_and_label_gate(wf: dict) -> None:
    on = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as True
    assert on["discussion"] == {"types": ["labeled"]}
    gate_if = wf["jobs"]["gate"]["if"]
    assert "github.event.label.name ==" in gate_if and "'needs-repro'" in gate_if and "vars.REPROBOT_LABEL" in gate_if


def test_permissions_per_job(wf: dict) -> None:
    jobs = wf["jobs"]
    assert wf["permissions"] == {}
    assert jobs["gate"]["permissions"] == {"contents": "read", "discussions": "read"}
    assert jobs["reproduce"]["permissions"] == {}
    assert jobs["publish"]["permissions"] == {"discussions": "write"}
    assert jobs["reproduce"]["needs"] == "gate" and jobs["reproduce"]["if"] == "needs.gate.outputs.allowed == 'true'"
    assert "reproduce" in jobs["publish"]["needs"]
    assert "needs.gate.outputs.allowed == 'true'" in jobs["publish"]["if"] and "!cancelled()" in jobs["publish"]["if"]
    # A post edited after the label: reproduce does not run, publish says so.
    assert "needs.gate.outputs.edited == 'true'" in jobs["publish"]["if"]
    assert jobs["gate"]["outputs"]["edited"] == "${{ steps.gate.outputs.edited }}"


def test_reproduce_job_has_no_secret_and_no_token() -> None:
    text = DISCUSSION.read_text()
    reproduce = text.split("\n  reproduce:\n", 1)[1].split("\n  publish:\n", 1)[0]
    assert "secrets." not in text
    assert "github.token" not in reproduce and "GITHUB_TOKEN" not in reproduce


def test_no_event_text_in_run_lines_and_actions_pinned() -> None:
    yaml = pytest.importorskip("yaml")
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        for job_id, s in all_steps(doc):
            if "run" in s:
                # Every value reaches the shell through env:, quoted; none is pasted into the script.
                assert "${{" not in s["run"], (path.name, job_id, s["run"])
            if "uses" in s:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", s["uses"]), s["uses"]
                if s["uses"].startswith("actions/checkout@"):
                    assert s.get("with", {}).get("persist-credentials") is False, (path.name, job_id)


def test_watch_workflow_least_privilege_and_dry_run_by_default() -> None:
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(WATCH.read_text())
    on = doc[True] if True in doc else doc["on"]
    assert "schedule" in on and doc["permissions"] == {}
    check, post = doc["jobs"]["check"], doc["jobs"]["post"]
    assert check["permissions"] == {"contents": "read"}
    assert post["permissions"] == {"contents": "read", "issues": "write"}
    assert post["if"] == "vars.REPROBOT_WATCH_COMMENTS == 'true'" and post["needs"] == "check"
    runs = {job: " ".join(s.get("run", "") for s in doc["jobs"][job]["steps"]) for job in ("check", "post")}
    assert "reprobot watch" in runs["check"] and "--dry-run" in runs["check"]
    assert "--post-only" in runs["post"] and "--dry-run" not in runs["post"]
    # only the posting job ever sees a token
    assert "github.token" not in yaml.safe_dump(check) and "github.token" in yaml.safe_dump(post)
    caches = [s for job in (check, post) for s in job["steps"] if s.get("uses", "").startswith("actions/cache@")]
    assert all(".reprobot-watch" in s["with"]["path"] for s in caches) and len(caches) == 2


# --- the job scripts as written, run the way the runner runs them ----------------------------

def step_named(doc: dict, job: str, name: str) -> dict:
    return next(s for s in doc["jobs"][job]["steps"] if s.get("name") == name)


def run_step(s: dict, env_values: dict[str, str], extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    # Expressions are only ever in env: (checked above); the test supplies their values and
    # fails if the workflow grows a variable it does not know about.
    assert set(s.get("env", {})) == set(env_values), sorted(s.get("env", {}))
    bindir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "REPROBOT_", "RUNNER_"))}
    env.update(env_values)
    env.update(extra_env)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    # GitHub's default shell on Linux: bash --noprofile --norc -eo pipefail {0}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def test_reproduce_and_publish_steps_as_written(wf: dict, tmp_path: Path) -> None:
    if shutil.which("reprobot", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the reprobot command is not installed next to this interpreter")
    from tests.fakegithub import FakeGitHub

    pwned = sorted(Path("/tmp").glob("reprobot-pwned-wf-*"))
    for p in pwned:
        p.unlink()
    event = json.loads((REPO_ROOT / "tests" / "data" / "events" / "labeled_injection.json").read_text())
    with FakeGitHub() as server:
        server.add_repo("octo/widgets")
        server.set_permission("octo/widgets", "maint", "admin")
        node = server.add_discussion("octo/widgets", number=14, body=event["discussion"]["body"])
        event["discussion"]["node_id"] = node
        (tmp_path / "event.json").write_text(json.dumps(event))
        runner = {"RUNNER_TEMP": str(tmp_path), "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
                  "GITHUB_WORKSPACE": str(REPO_ROOT)}
        proc = run_step(step_named(wf, "reproduce", "Extract the script and reduce it"), {
            "REPROBOT_LABEL": "needs-repro", "REPROBOT_GATE_ALLOWED": "true", "REPROBOT_PYTHON": "",
            "REPROBOT_MAX_TIME": "60", "REPROBOT_TIMEOUT": "30", "REPROBOT_INSTALL_DEPS": "true",
            "REPROBOT_OFFLINE": "true", "REPROBOT_SHARE": "/usr/share:/opt"}, runner)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        result = json.loads((tmp_path / "reprobot-artifact" / "result.json").read_text())
        assert result["status"] == "syntax-error"
        proc = run_step(step_named(wf, "publish", "Post or edit the reply"), {
            "GITHUB_TOKEN": "test-token", "REPROBOT_LABEL": "needs-repro"},
            {**runner, "REPROBOT_GITHUB_API": server.url})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (reply,) = server.discussions[node].comments
    assert "does not parse" in reply["body"]
    # The title and body tried $(...), backticks and quote-breaking; none of it reached a shell.
    assert sorted(Path("/tmp").glob("reprobot-pwned-wf-*")) == []
