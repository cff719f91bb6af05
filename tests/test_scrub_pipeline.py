"""Nothing private leaves: the scrub corpus (tests/data/scrub_kinds.py) through the real pipeline.

Every kind is planted in the five places a value can leave through: the exception message,
the script's printed output (stdout and stderr), string constants that survive reduction, frame
paths (the script and its environment live under a personal home folder, run by a personal
user name) and the run's environment variables. Then a real ``reprobot reduce`` subprocess,
real drafting, and ``file --dry-run`` / ``file --submit --yes`` against the local fake GitHub
(tests/fakegithub.py).

Script A holds the values as string constants (the failing call uses them, so reduction keeps
them), prints them and puts them in the exception message. Script B holds no value at all: it
reads them from the environment of the run. What leaves (the preview, every draft-*.md and
draft-*.json, related.json, route.json, env.json, requirements.lock, every request the fake
GitHub received) must hold none of them; each check first shows the values were really there
before scrubbing, so a leak cannot pass unnoticed.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from bot.cli import main
from bot.issue.draft import marker
from reducer.errors import ExitCode
from tests.data.scrub_kinds import KINDS, PRIVATE_KINDS, SECRET_KINDS, USER_NAME, Kind
from tests.fakegithub import FakeGitHub

ROOT = Path(__file__).resolve().parents[1]
REPO = "huggingface/peft"
ISSUES = r"^/repos/huggingface/peft/issues$"

FAKE_PEFT = {
    "peft/__init__.py": "from peft.config import LoraConfig\nfrom peft.mapping import get_peft_model\n",
    "peft/config.py": """
        class LoraConfig:
            def __init__(self, r=8, target_modules=None, hub_settings=None):
                self.r = r
                self.target_modules = list(target_modules or [])
                self.hub_settings = hub_settings
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
                    self._create_and_replace(name, model[name], config.hub_settings)

            def _create_and_replace(self, name, target, settings):
                return self._create_new_module(target, settings)

            @staticmethod
            def _create_new_module(target, settings):
                raise ValueError(f"Target module {target}() is not supported with the hub settings {settings!r}; "
                                 "currently, only the following modules are supported: `torch.nn.Linear`.")
    """,
}

# Script A: every value is a string constant the failing call uses, printed on both streams.
SCRIPT_A = """
import sys

from peft import LoraConfig, get_peft_model

HUB_SETTINGS = [
{constants}
]


def main():
    for line in HUB_SETTINGS:
        print("hub setting:", line)
        print("warning: check", line, file=sys.stderr)
    model = {{"q_proj": "ClippableLinear"}}
    config = LoraConfig(r=8, target_modules=["q_proj"], hub_settings=HUB_SETTINGS)
    get_peft_model(model, config)


main()
"""

# Script B: no value in the code; everything comes from the run's environment.
SCRIPT_B = """
import os
import sys

from peft import LoraConfig, get_peft_model

NAMES = [
{names}
]


def main():
    settings = {{name: os.environ[name] for name in NAMES}}
    for name, value in settings.items():
        print(f"{{name}}={{value}}")
    print("environment:", settings, file=sys.stderr)
    model = {{"q_proj": "ClippableLinear"}}
    config = LoraConfig(r=8, target_modules=["q_proj"], hub_settings=settings)
    get_peft_model(model, config)


main()
"""


# --- what leaves, and looking for values in it ---------------------------------------------

def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def leaving(folder: Path, preview: str | None = None) -> dict[str, str]:
    """Everything that leaves the machine from a repro folder (and the preview shown before)."""
    out: dict[str, str] = {}
    if preview is not None:
        out["file --dry-run output"] = preview
    for p in sorted(folder.iterdir()):
        if p.name.startswith("draft-") and p.suffix == ".md" or p.name == "requirements.lock":
            out[p.name] = p.read_text(encoding="utf-8")
        elif p.name.startswith("draft-") and p.suffix == ".json" or p.name in ("related.json", "route.json",
                                                                                 "env.json"):
            text = p.read_text(encoding="utf-8")
            out[p.name] = text + "\n" + "\n".join(_strings(json.loads(text)))
    return out


def _forms(text: str) -> list[str]:
    """The text, URL-decoded, and with all whitespace removed (a wrapped line in a terminal)."""
    decoded = urllib.parse.unquote(text)
    return [text, decoded, "".join(text.split()), "".join(decoded.split())]


def leaks(texts: dict[str, str], kinds: Iterable[Kind] = KINDS) -> dict[str, list[str]]:
    """{kind: [where it was found]}: any piece of a value, in any form, anywhere."""
    forms = {where: _forms(text) for where, text in texts.items()}
    found: dict[str, list[str]] = {}
    for k in kinds:
        pieces = k.pieces()
        for where, variants in forms.items():
            if any(p in v or "".join(p.split()) in v for p in pieces for v in variants):
                found.setdefault(k.name, []).append(where)
    return found


def present(text: str, k: Kind) -> bool:
    """The value is in ``text``, as itself or as a Python repr writes it."""
    return k.value in text or k.value.replace("\\", "\\\\").replace("\n", "\\n") in text


# --- running the pipeline ------------------------------------------------------------------

def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def personal_env(home: Path) -> dict[str, str]:
    """The run is a person's: their home folder and their user name."""
    return {"HOME": str(home), "USER": USER_NAME, "LOGNAME": USER_NAME}


def kinds_env() -> dict[str, str]:
    return {k.env_var: k.env_value() for k in KINDS}


def layout(work: Path) -> tuple[Path, Path, Path]:
    """<work>/home/<user>/project (the script) and <work>/home/<user>/.venv/.../site-packages (peft)."""
    home = work / "home" / USER_NAME
    project = home / "project"
    site = home / ".venv" / "lib" / "python3.11" / "site-packages"
    for rel, text in FAKE_PEFT.items():
        write(site / rel, text)
    project.mkdir(parents=True, exist_ok=True)
    return home, project, site


def reduce(work: Path, script: str, extra_env: dict[str, str]) -> dict[str, object]:
    """A real `reprobot reduce` subprocess of ``script`` in the personal layout; also the
    original script run once on its own, for the raw output the values must be in."""
    home, project, site = layout(work)
    (project / "adapter_job.py").write_text(script, encoding="utf-8")
    env = {**os.environ, **personal_env(home), **extra_env, "PYTHONPATH": f"{ROOT}{os.pathsep}{site}",
           "COLUMNS": "200", "REPROBOT_OFFLINE": "1", "REPROBOT_INDEX_DB": str(work / "index.db")}
    env.pop("GITHUB_TOKEN", None)
    raw = subprocess.run([sys.executable, "adapter_job.py"], cwd=project, capture_output=True, text=True,
                         timeout=60, env={**env, "PYTHONPATH": str(site)})
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "adapter_job.py", "--out", "repros", "--no-env",
                           "--max-time", "60"], cwd=project, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode in (0, ExitCode.TIME_LIMIT), proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = (project / "repros").iterdir()
    return {"home": home, "folder": folder, "raw": raw, "reduce": proc}


@pytest.fixture
def person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """In-process `file` runs as the same person, offline, with an index of its own."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("REPROBOT_GITHUB_API", raising=False)
    monkeypatch.setenv("REPROBOT_INDEX_DB", str(tmp_path / "index.db"))
    monkeypatch.setenv("REPROBOT_OFFLINE", "1")
    for name in ("USER", "LOGNAME"):
        monkeypatch.setenv(name, USER_NAME)
    return tmp_path


def fresh(folder: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "copy" / folder.name
    shutil.copytree(folder, dest)
    return dest


def dry_run(folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """`file --dry-run`; returns (its output, the draft's text before scrubbing)."""
    import bot.issue.draft as draft_mod

    raw: list[str] = []
    real = draft_mod.scrub

    def spy(text: str, **kw):  # type: ignore[no-untyped-def]
        raw.append(text)
        return real(text, **kw)

    monkeypatch.setattr(draft_mod, "scrub", spy)
    capsys.readouterr()
    code = main(["file", str(folder), "--dry-run"])
    out = capsys.readouterr()
    monkeypatch.setattr(draft_mod, "scrub", real)
    assert raw, "no draft was built"
    assert code in (0, ExitCode.BAD_INPUT, ExitCode.UNSAFE), out.out[-3000:] + out.err[-3000:]
    return out.out + out.err, "\n".join(raw)


def local_pointers(preview: str) -> str:
    """The preview without its last line, the local folder it points to (``files: <path>/``):
    printed for the person at the terminal, never part of the issue or its URL."""
    return "\n".join(line for line in preview.splitlines() if not line.startswith("files: "))


def requests_text(gh: FakeGitHub) -> str:
    return "\n".join(f"{r.method} {r.path} {json.dumps(r.query)} {json.dumps(r.body)}" for r in gh.requests)


def report(found: dict[str, list[str]]) -> str:
    return "leaked: " + "; ".join(f"{k} in {', '.join(w)}" for k, w in sorted(found.items()))


# --- script A: values as string constants ---------------------------------------------------

@pytest.fixture(scope="module")
def reduced_a(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    constants = "\n".join(f"    {k.appears!r}," for k in KINDS)
    return reduce(tmp_path_factory.mktemp("scrubA"), SCRIPT_A.format(constants=constants), {})


def test_a_values_are_planted_in_output_message_and_surviving_constants(reduced_a: dict[str, object]) -> None:
    raw = reduced_a["raw"]
    assert raw.returncode == 1 and "ValueError: Target module ClippableLinear() is not supported" in raw.stderr
    tb = raw.stderr[raw.stderr.index("Traceback (most recent call last)"):]
    assert f"/home/{USER_NAME}/project/adapter_job.py" in tb           # the frame path
    assert f"/home/{USER_NAME}/.venv/lib/python3.11/site-packages/peft/" in tb
    for k in KINDS:
        assert k.appears in raw.stdout and k.appears in raw.stderr, k.name  # printed, as it appears
        assert present(tb.splitlines()[-1], k), k.name                          # in the exception message
    # Reduction kept the constants: the failure's message depends on each of them. A bare POSIX
    # path may be shortened (signatures read every path as <PATH>); the traceback keeps it whole.
    constants = {}
    for name in ("original.py", "repro.py"):
        tree = ast.parse((reduced_a["folder"] / name).read_text(encoding="utf-8"))
        constants[name] = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert [k.name for k in KINDS if k.appears not in constants["original.py"]] == []
    bare_paths = {k.name for k in KINDS if k.appears.startswith("/")}
    assert bare_paths == {"linux_home", "macos_home", "wsl_home"}
    assert [k.name for k in KINDS if k.appears not in constants["repro.py"] and k.name not in bare_paths] == []


def test_a_nothing_private_in_the_preview_or_the_folder(reduced_a: dict[str, object], person: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    folder = fresh(reduced_a["folder"], person)
    preview, raw_draft = dry_run(folder, monkeypatch, capsys)
    # Before scrubbing, the draft held every value (script, traceback): a leak would show.
    assert [k.name for k in KINDS if not present(raw_draft, k)] == []
    assert (folder / "draft-peft.md").is_file() and (folder / "route.json").is_file()
    assert "huggingface/peft: issue preview" in preview
    texts = leaving(folder, local_pointers(preview))
    assert {"draft-peft.md", "draft-peft.json", "related.json", "route.json", "env.json"} <= set(texts)
    found = leaks(texts)
    assert found == {}, report(found)
    # The values in the script were secrets: the preview says --submit will refuse.
    assert "--submit refuses until then" in " ".join(preview.split())


def test_a_submit_refuses_and_github_receives_nothing(reduced_a: dict[str, object], person: Path,
                                                      fake_github: FakeGitHub,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    fake_github.add_repo(REPO)
    folder = fresh(reduced_a["folder"], person)
    code = main(["file", str(folder), "--submit", "--yes"])
    out = capsys.readouterr()
    assert code == ExitCode.UNSAFE, out.out[-2000:] + out.err[-2000:]
    assert "refusing to file" in out.err
    assert fake_github.requests_to("POST", ISSUES) == [] and fake_github.issues[REPO] == {}
    found = leaks({"file --submit output": local_pointers(out.out + out.err),
                   "requests to GitHub": requests_text(fake_github), **leaving(folder)})
    assert found == {}, report(found)
    assert not (folder / "filed.json").exists()


# --- script B: values only in the run's environment -----------------------------------------

@pytest.fixture(scope="module")
def reduced_b(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    names = "\n".join(f"    {k.env_var!r}," for k in KINDS)
    return reduce(tmp_path_factory.mktemp("scrubB"), SCRIPT_B.format(names=names), kinds_env())


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """`file` runs in the same shell as `reduce`: the same variables (env.json is captured here)."""
    for name, value in kinds_env().items():
        monkeypatch.setenv(name, value)


def test_b_values_come_only_from_the_environment(reduced_b: dict[str, object]) -> None:
    raw = reduced_b["raw"]
    assert raw.returncode == 1
    tb = raw.stderr[raw.stderr.index("Traceback (most recent call last)"):]
    for k in KINDS:
        assert f"{k.env_var}={k.env_value()}" in raw.stdout, k.name
        assert present(raw.stderr.split("Traceback")[0], k), k.name
        assert present(tb.splitlines()[-1], k), k.name
    folder = reduced_b["folder"]
    code = {p.name: p.read_text(encoding="utf-8") for p in (folder / "original.py", folder / "repro.py")}
    found = leaks(code)
    assert found == {}, "the script itself holds no value: " + report(found)


def test_b_nothing_private_in_the_preview_the_folder_or_env_json(reduced_b: dict[str, object], person: Path,
                                                                environ: None, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    folder = fresh(reduced_b["folder"], person)
    preview, raw_draft = dry_run(folder, monkeypatch, capsys)
    assert [k.name for k in KINDS if not present(raw_draft, k)] == []
    # env.json was captured with every variable set; it records some (HF_HOME, MASTER_ADDR, ...).
    env_vars = json.loads((folder / "env.json").read_text())["env_vars"]
    assert {"HF_HOME", "MASTER_ADDR", "TRANSFORMERS_CACHE", "HF_HUB_CACHE", "CUDA_PATH"} <= set(env_vars)
    texts = leaving(folder, local_pointers(preview))
    found = leaks(texts)
    assert found == {}, report(found)


def test_b_submit_files_a_body_without_any_value(reduced_b: dict[str, object], person: Path, environ: None,
                                                fake_github: FakeGitHub,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    fake_github.add_repo(REPO)
    folder = fresh(reduced_b["folder"], person)
    code = main(["file", str(folder), "--submit", "--yes"])
    out = capsys.readouterr()
    said = out.out + out.err
    found = leaks({"file --submit output": local_pointers(said), "requests to GitHub": requests_text(fake_github),
                   **leaving(folder)})
    assert found == {}, report(found)
    if code == 0:
        [issue] = fake_github.issues[REPO].values()
        assert marker(json.loads((folder / "signature.json").read_text())["signature"]["id"]) in issue["body"]
        assert "ValueError: Target module ClippableLinear() is not supported" in issue["body"]
        assert "<redacted:" in issue["body"]  # the traceback's values, replaced
    else:
        # A refusal names the kind and the line, never the value.
        assert code == ExitCode.UNSAFE and "refusing to file" in said, said[-2000:]
        assert fake_github.requests_to("POST", ISSUES) == []


# --- a draft a person edited: a surviving secret is refused, a private detail is replaced -----

@pytest.fixture
def drafted(reduced_b: dict[str, object], person: Path, environ: None, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> Path:
    folder = fresh(reduced_b["folder"], person)
    dry_run(folder, monkeypatch, capsys)
    return folder


@pytest.mark.parametrize("kind", SECRET_KINDS, ids=lambda k: k.name)
def test_submit_refuses_a_draft_with_a_surviving_secret(kind: Kind, drafted: Path, fake_github: FakeGitHub,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fake_github.add_repo(REPO)
    md = drafted / "draft-peft.md"
    body = md.read_text(encoding="utf-8")
    md.write_text(body.replace("### Expected behavior", f"{kind.appears}\n\n### Expected behavior", 1)
                  if "### Expected behavior" in body else body + "\n" + kind.appears + "\n", encoding="utf-8")
    assert kind.value in md.read_text(encoding="utf-8")
    capsys.readouterr()
    code = main(["file", str(drafted), "--submit", "--yes"])
    out = capsys.readouterr()
    said = out.out + out.err
    assert code == ExitCode.UNSAFE, said[-2000:]
    assert "refusing to file:" in out.err and "draft-peft.md" in out.err
    assert leaks({"refusal": said}, [kind]) == {}
    assert fake_github.requests == []  # nothing left the machine, not even a search


def test_submit_replaces_private_details_a_person_pasted_into_the_draft(drafted: Path, fake_github: FakeGitHub,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fake_github.add_repo(REPO)
    md = drafted / "draft-peft.md"
    pasted = "\n".join(k.appears for k in PRIVATE_KINDS)
    md.write_text(md.read_text(encoding="utf-8").replace("### Expected behavior", f"```\n{pasted}\n```\n\n"
                                                        "### Expected behavior", 1), encoding="utf-8")
    assert all(k.value in md.read_text(encoding="utf-8") for k in PRIVATE_KINDS)
    capsys.readouterr()
    code = main(["file", str(drafted), "--submit", "--yes"])
    out = capsys.readouterr()
    assert code == 0, out.out[-2000:] + out.err[-2000:]
    [issue] = fake_github.issues[REPO].values()
    found = leaks({"filed body": issue["title"] + "\n" + issue["body"],
                   "requests to GitHub": requests_text(fake_github)})
    assert found == {}, report(found)
