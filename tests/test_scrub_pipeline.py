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
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli import main
from bot.issue.draft import marker
from reducer.errors import ExitCode
from tests.data.scrub_kinds import ENV_ONLY, KINDS, PRIVATE_KINDS, SECRET_KINDS, USER_NAME, Kind
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


def planted(text: str, k: Kind) -> bool:
    """What script B's environment holds for ``k`` is in ``text`` (for an encoded value, the
    variable holds the plain one)."""
    return present(text, k) or k.env_value() in text or repr(k.env_value())[1:-1] in text


def present(text: str, k: Kind) -> bool:
    """The value is in ``text``, as itself or as a Python repr writes it (a control character
    reads \\x1b there)."""
    return k.value in text or k.value.replace("\\", "\\\\").replace("\n", "\\n") in text \
        or repr(k.value)[1:-1] in text


# --- each kind on its own: fast, and names the form that leaks --------------------------------

def _forms_of(k: Kind) -> dict[str, str]:
    """How a value reaches the scrubber: as it appears, inside a repr (a constant in a script, a
    message showing its arguments), as the variable that holds it, JSON-encoded (related.json is
    scrubbed as JSON text), and normalised (a signature's message: numbers <N>, hex <HEX>, paths <PATH>)."""
    from reducer.failure.normalize import normalize_message
    return {"as it appears": k.appears, "repr": repr(k.appears), "env": f"{k.env_var}={k.env_value()}",
            "dict repr": repr({k.env_var: k.env_value()}), "json": json.dumps({"message": repr([k.appears])}),
            "normalised": json.dumps({"message": normalize_message(repr([k.appears]))})}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_each_kind_is_scrubbed_in_every_form(kind: Kind) -> None:
    from bot.scrub import find_secrets, scrub
    # Only an env-only kind is given the environment that holds it: every other kind must be
    # caught by its own shape, not because the test's environment happens to hold it.
    environ = {kind.env_var: kind.env_value()} if kind.env_only else {}
    leaked, unflagged = [], []
    for form, text in _forms_of(kind).items():
        clean = scrub(text, names=(USER_NAME,), environ=environ)
        if leaks({form: clean.text}, [kind]):
            leaked.append(form)
        if form.startswith("json") or form == "normalised":
            json.loads(clean.text)  # still JSON: a redaction never eats an escaped quote
        if kind.secret and form != "normalised" and not find_secrets(text, environ=environ):
            unflagged.append(form)
        assert find_secrets(clean.text, environ=environ) == [], (form, clean.text)
    assert leaked == [] and unflagged == [], f"leaked in {leaked}; not a secret in {unflagged}"


@pytest.mark.parametrize("text", [
    "model.layers.<N>.self_attn.q_proj.weight has shape torch.Size([<N>, <N>])",
    "meta-llama/Llama-<N>-<N>b-chat-hf does not appear to have a file named <PATH>",
    "Qwen2_5-VL-<N>B-Instruct-<N>bit: expected scalar type Float but found Half",
    "copy <PATH> to <PATH> failed",
    "PYTHONPATH=<PATH> REPRO_SCENARIO=$s GEMMA4_TINY_DIR=<PATH> python3 worker.py",
    "API_KEY=<HEX> HF_TOKEN=<N> sha256:<HEX>",
    "Authorization: Bearer $TOKEN",
    "git clone https://ci:${CI_JOB_TOKEN}@gitlab.example.com/x.git",
    'headers = {"x-request-id": "0f3a9b", "Content-Type": "application/json"}',
    "password: str = field(default=None)",
    "def login(password=None): ...",
])
def test_normalised_and_ordinary_look_alikes_stay(text: str) -> None:
    from bot.scrub import find_secrets, scrub
    assert find_secrets(text) == [], text
    assert scrub(text, names=()).text == text


# --- running the pipeline ------------------------------------------------------------------

def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def kinds_env() -> dict[str, str]:
    return {k.env_var: k.env_value() for k in KINDS}


@dataclass
class Run:
    home: Path
    python: Path              # the person's virtualenv, under their home, with the fake peft
    folder: Path              # the repro folder `reduce` wrote
    raw: subprocess.CompletedProcess  # the original script, run once on its own
    preview: str = ""         # `file --dry-run` output
    raw_draft: str = ""       # every text the draft was built from, before scrubbing
    dry_run_code: int = -1


def personal_venv(home: Path) -> Path:
    """<home>/.venv: a real virtualenv (no pip, nothing installed) holding the fake peft, so the
    frames of the failure run through the person's home folder, as on their machine."""
    venv = home / ".venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for rel, text in FAKE_PEFT.items():
        write(Path(site) / rel, text)
    return python


def reduce(work: Path, script: str, extra_env: dict[str, str]) -> Run:
    """A real `reprobot reduce` subprocess of ``script``, run as a person: the script in
    <work>/home/<user>/project, the user name in $USER/$LOGNAME, their venv's interpreter. The
    original script is also run once on its own: the raw output the values must be in."""
    home = work / "home" / USER_NAME
    project = home / "project"
    project.mkdir(parents=True)
    python = personal_venv(home)
    (project / "adapter_job.py").write_text(script, encoding="utf-8")
    env = {**os.environ, "HOME": str(home), "USER": USER_NAME, "LOGNAME": USER_NAME, **extra_env,
           "PYTHONPATH": str(ROOT), "COLUMNS": "200", "REPROBOT_OFFLINE": "1",
           "REPROBOT_INDEX_DB": str(work / "index.db")}
    env.pop("GITHUB_TOKEN", None)
    raw = subprocess.run([str(python), "adapter_job.py"], cwd=project, capture_output=True, text=True,
                         timeout=60, env={k: v for k, v in env.items() if k != "PYTHONPATH"})
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "adapter_job.py", "--python", str(python),
                           "--out", "repros", "--no-env", "--max-time", "30"],
                          cwd=project, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode in (0, ExitCode.TIME_LIMIT), proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = (project / "repros").iterdir()
    return Run(home, python, folder, raw)


@contextmanager
def as_the_person(run: Run, work: Path, environ: dict[str, str]) -> Iterator[pytest.MonkeyPatch]:
    """In-process `file` runs as the same person, in the same shell (``environ``), offline,
    with an index of its own."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("GITHUB_TOKEN", "REPROBOT_GITHUB_API"):
            mp.delenv(name, raising=False)
        mp.setenv("REPROBOT_INDEX_DB", str(work / "index.db"))
        mp.setenv("REPROBOT_OFFLINE", "1")
        # COLUMNS: no line of the output is wrapped (a wrapped path could not be told apart)
        for name, value in {"HOME": str(run.home), "USER": USER_NAME, "LOGNAME": USER_NAME, "COLUMNS": "2000",
                            **environ}.items():
            mp.setenv(name, value)
        yield mp


def dry_run(run: Run, work: Path, environ: dict[str, str]) -> Run:
    """`file --dry-run` (as `reduce` leaves the folder: route, env.json, related issues and the
    draft are made here); keeps its output and the draft's text before scrubbing."""
    import bot.issue.draft as draft_mod

    raw: list[str] = []
    real = draft_mod.scrub

    def spy(text: str, **kw):  # type: ignore[no-untyped-def]
        raw.append(text)
        return real(text, **kw)

    out, err = io.StringIO(), io.StringIO()
    with as_the_person(run, work, environ) as mp, redirect_stdout(out), redirect_stderr(err):
        mp.setattr(draft_mod, "scrub", spy)
        run.dry_run_code = main(["file", str(run.folder), "--dry-run", "--python", str(run.python)])
    run.preview = out.getvalue() + err.getvalue()
    run.raw_draft = "\n".join(raw)
    return run


def submit(run: Run, folder: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str],
           environ: dict[str, str]) -> tuple[int, str]:
    gh.add_repo(REPO)
    capsys.readouterr()
    with as_the_person(run, folder.parent, environ) as mp:
        mp.setenv("REPROBOT_GITHUB_API", gh.url)
        mp.setenv("GITHUB_TOKEN", "test-token")
        code = main(["file", str(folder), "--submit", "--yes", "--python", str(run.python)])
    out = capsys.readouterr()
    return code, out.out + out.err


def fresh(folder: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "repros" / folder.name
    shutil.copytree(folder, dest)
    return dest


def local_pointers(said: str, folder: Path) -> str:
    """Output with the repro folder's own path taken out: `file` names it for the person at the
    terminal (``files: <folder>/``, ``edit <folder>/draft-peft.md``), and it lies in their home
    folder; it is never part of the issue, its URL or anything sent. Everything else counts."""
    return said.replace(folder.as_posix(), "<repro folder>")


def requests_text(gh: FakeGitHub) -> str:
    return "\n".join(f"{r.method} {r.path} {json.dumps(r.query)} {json.dumps(r.body)}" for r in gh.requests)


def report(found: dict[str, list[str]]) -> str:
    return "leaked: " + "; ".join(f"{k} in {', '.join(w)}" for k, w in sorted(found.items()))


# --- script A: values as string constants ---------------------------------------------------

@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("scrubA")
    constants = "\n".join(f"    {k.appears!r}," for k in KINDS)
    # The person's shell holds the env-only kinds' variables (and the script, their values).
    return dry_run(reduce(work, SCRIPT_A.format(constants=constants), ENV_ONLY), work, ENV_ONLY)


def test_a_values_are_planted_in_output_message_and_surviving_constants(run_a: Run) -> None:
    raw = run_a.raw
    assert raw.returncode == 1 and "ValueError: Target module ClippableLinear() is not supported" in raw.stderr
    tb = raw.stderr[raw.stderr.index("Traceback (most recent call last)"):]
    assert f"/home/{USER_NAME}/project/adapter_job.py" in tb           # the frame paths
    assert f"/home/{USER_NAME}/.venv/lib/" in tb
    for k in KINDS:
        assert k.appears in raw.stdout and k.appears in raw.stderr, k.name  # printed, as it appears
        assert present(tb.splitlines()[-1], k), k.name                          # in the exception message
    # Reduction kept the constants: the failure's message depends on each of them. A bare POSIX
    # path may be shortened (signatures read every path as <PATH>); the traceback keeps it whole.
    constants = {}
    for name in ("original.py", "repro.py"):
        tree = ast.parse((run_a.folder / name).read_text(encoding="utf-8"))
        constants[name] = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert [k.name for k in KINDS if k.appears not in constants["original.py"]] == []
    shortened = {k.name for k in KINDS if k.appears not in constants["repro.py"]}
    assert shortened <= SHORTENABLE


# Bare POSIX paths (homes, shared roots, a fork's checkout) and URLs: signatures read every path
# as <PATH>, so the reduction may shorten them; likewise a bare hex run, read as <HEX>.
SHORTENABLE = frozenset({"linux_home", "macos_home", "wsl_home", "user_in_data_path", "user_in_mnt_home_path",
                         "private_fork_path", "private_fork_git_url", "github_token_as_url_user",
                         "comet_experiment_url", "s3_bucket", "s3_bucket_host", "wandb_key_after_name"})


def test_a_nothing_private_in_the_preview_or_the_folder(run_a: Run) -> None:
    preview = run_a.preview
    # 0: nothing in the stored draft is a secret any more (UNSAFE would mean one survived drafting)
    assert run_a.dry_run_code == 0, preview[-3000:]
    # Before scrubbing, the draft held every value (script, traceback): a leak would show. A bare
    # home path the reduction shortened (see above) is gone from the repro and its traceback alike,
    # so only the kinds the repro kept whole are required here.
    repro = {n.value for n in ast.walk(ast.parse((run_a.folder / "repro.py").read_text(encoding="utf-8")))
             if isinstance(n, ast.Constant)}
    kept = [k for k in KINDS if k.appears in repro or k.name not in SHORTENABLE]
    assert [k.name for k in kept if not present(run_a.raw_draft, k)] == []
    assert len(kept) >= len(KINDS) - len(SHORTENABLE)
    assert "huggingface/peft: issue preview" in preview
    texts = leaving(run_a.folder, local_pointers(preview, run_a.folder))
    assert {"draft-peft.md", "draft-peft.json", "related.json", "route.json", "env.json"} <= set(texts)
    found = leaks(texts)
    assert found == {}, report(found)
    # The values in the script were removed: the preview says --submit will refuse.
    assert "--submit refuses until then" in " ".join(preview.split())


def test_a_submit_refuses_and_github_receives_nothing(run_a: Run, tmp_path: Path, fake_github: FakeGitHub,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    folder = fresh(run_a.folder, tmp_path)
    code, said = submit(run_a, folder, fake_github, capsys, ENV_ONLY)
    assert code == ExitCode.UNSAFE, said[-2000:]
    assert "refusing to file" in said
    assert fake_github.requests_to("POST", ISSUES) == [] and fake_github.issues[REPO] == {}
    found = leaks({"file --submit output": local_pointers(said, folder), "requests to GitHub": requests_text(fake_github),
                   **leaving(folder)})
    assert found == {}, report(found)
    assert not (folder / "filed.json").exists()


# --- script B: values only in the run's environment -----------------------------------------

@pytest.fixture(scope="module")
def run_b(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("scrubB")
    names = "\n".join(f"    {k.env_var!r}," for k in KINDS)
    return dry_run(reduce(work, SCRIPT_B.format(names=names), kinds_env()), work, kinds_env())


def test_b_values_come_only_from_the_environment(run_b: Run) -> None:
    raw = run_b.raw
    assert raw.returncode == 1
    tb = raw.stderr[raw.stderr.index("Traceback (most recent call last)"):]
    assert f"/home/{USER_NAME}/project/adapter_job.py" in tb
    for k in KINDS:
        assert f"{k.env_var}={k.env_value()}" in raw.stdout, k.name
        assert planted(raw.stderr.split("Traceback")[0], k), k.name
        assert planted(tb.splitlines()[-1], k), k.name
    code = {p.name: p.read_text(encoding="utf-8") for p in (run_b.folder / "original.py", run_b.folder / "repro.py")}
    found = leaks(code)
    assert found == {}, "the script itself holds no value: " + report(found)


def test_b_nothing_private_in_the_preview_the_folder_or_env_json(run_b: Run) -> None:
    assert run_b.dry_run_code == 0, run_b.preview[-3000:]
    assert [k.name for k in KINDS if not planted(run_b.raw_draft, k)] == []
    # env.json was captured with every variable set; it records some (HF_HOME, MASTER_ADDR, ...).
    env_vars = json.loads((run_b.folder / "env.json").read_text())["env_vars"]
    assert {"HF_HOME", "MASTER_ADDR", "TRANSFORMERS_CACHE", "HF_HUB_CACHE", "CUDA_PATH"} <= set(env_vars)
    found = leaks(leaving(run_b.folder, local_pointers(run_b.preview, run_b.folder)))
    assert found == {}, report(found)


def test_b_submit_files_a_body_without_any_value(run_b: Run, tmp_path: Path, fake_github: FakeGitHub,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    folder = fresh(run_b.folder, tmp_path)
    code, said = submit(run_b, folder, fake_github, capsys, kinds_env())
    found = leaks({"file --submit output": local_pointers(said, folder), "requests to GitHub": requests_text(fake_github),
                   **leaving(folder)})
    assert found == {}, report(found)
    if code == 0:
        [issue] = fake_github.issues[REPO].values()
        assert marker(json.loads((folder / "signature.json").read_text())["signature"]["id"]) in issue["body"]
        assert "ValueError: Target module ClippableLinear() is not supported" in issue["body"]
        assert "<redacted:" in issue["body"]  # the traceback's values, replaced
    else:
        # A refusal names the kind and where it is, never the value.
        assert code == ExitCode.UNSAFE, said[-2000:]
        assert re.search(r"refusing to file: \w+ .*(?:at line \d+ of draft-peft\.md|in the (?:title|body line \d+))",
                         said), said[-2000:]
        assert fake_github.requests_to("POST", ISSUES) == []


# --- a draft a person edited: a surviving secret is refused, a private detail is replaced -----
# (`file --submit` runs repro.py once more before filing, in the person's shell: script B's repro
# reads every value from it, so these filings happen with kinds_env() set.)

def paste(folder: Path, text: str) -> None:
    md = folder / "draft-peft.md"
    body = md.read_text(encoding="utf-8")
    assert "### Expected behavior" in body
    md.write_text(body.replace("### Expected behavior", f"{text}\n\n### Expected behavior", 1), encoding="utf-8")


@pytest.mark.parametrize("kind", SECRET_KINDS, ids=lambda k: k.name)
def test_submit_refuses_a_draft_with_a_surviving_secret(kind: Kind, run_b: Run, tmp_path: Path,
                                                        fake_github: FakeGitHub,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = fresh(run_b.folder, tmp_path)
    paste(folder, kind.appears)
    assert kind.value in (folder / "draft-peft.md").read_text(encoding="utf-8")
    code, said = submit(run_b, folder, fake_github, capsys, {kind.env_var: kind.env_value()} if kind.env_only else {})
    assert code == ExitCode.UNSAFE, said[-2000:]
    assert re.search(r"refusing to file: \w+ .* at line \d+ of draft-peft\.md", said), said[-2000:]
    assert leaks({"refusal": said}, [kind]) == {}
    assert fake_github.requests == []  # nothing left the machine, not even a search


def test_submit_replaces_private_details_a_person_pasted_into_the_draft(run_b: Run, tmp_path: Path,
                                                                        fake_github: FakeGitHub,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = fresh(run_b.folder, tmp_path)
    paste(folder, "```\n" + "\n".join(k.appears for k in PRIVATE_KINDS) + "\n```")
    code, said = submit(run_b, folder, fake_github, capsys, kinds_env())
    assert code == 0, said[-2000:]
    [issue] = fake_github.issues[REPO].values()
    assert "run by <user-or-host>" in issue["body"] and "MASTER_ADDR=<ip>" in issue["body"]
    found = leaks({"filed body": issue["title"] + "\n" + issue["body"], "requests to GitHub": requests_text(fake_github)})
    assert found == {}, report(found)


# --- a bare string the scrubber cannot tell from a credential: a person decides --------------------

UNCERTAIN = "RuntimeError: unexpected value " + "9f3c2a71e4b8d05c6a1f7e2d3b4c5a6978e1d2c3"


def test_submit_with_yes_refuses_an_uncertain_string_unless_told(run_b: Run, tmp_path: Path, fake_github: FakeGitHub,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = fresh(run_b.folder, tmp_path)
    paste(folder, UNCERTAIN)
    code, said = submit(run_b, folder, fake_github, capsys, kinds_env())
    assert code == ExitCode.UNSAFE, said[-2000:]
    assert re.search(r"not filed: the body line \d+ holds a string that may be a credential", said), said[-2000:]
    assert "9f3c2a71e4b8" not in said and fake_github.requests == []
    # The person says it is an id: filed, as written.
    capsys.readouterr()
    with as_the_person(run_b, folder.parent, kinds_env()) as mp:
        mp.setenv("REPROBOT_GITHUB_API", fake_github.url)
        mp.setenv("GITHUB_TOKEN", "test-token")
        code = main(["file", str(folder), "--submit", "--yes", "--not-a-secret", "--python", str(run_b.python)])
    assert code == 0, capsys.readouterr().out[-2000:]
    [issue] = fake_github.issues[REPO].values()
    assert UNCERTAIN in issue["body"]


def test_submit_asks_about_an_uncertain_string_and_files_nothing_on_no(run_b: Run, tmp_path: Path,
                                                                       fake_github: FakeGitHub,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import bot.commands.file as file_cmd
    import bot.output as output
    folder = fresh(run_b.folder, tmp_path)
    paste(folder, UNCERTAIN)
    fake_github.add_repo(REPO)
    asked: list[str] = []

    def answer(prompt: str, **kw: object) -> bool:
        asked.append(prompt)
        return "credential" not in prompt  # yes to everything else, no to the uncertain string

    with as_the_person(run_b, folder.parent, kinds_env()) as mp:
        mp.setenv("REPROBOT_GITHUB_API", fake_github.url)
        mp.setenv("GITHUB_TOKEN", "test-token")
        mp.setattr(file_cmd.sys.stdin, "isatty", lambda: True)
        mp.setattr(output.Confirm, "ask", answer)
        code = main(["file", str(folder), "--submit", "--not-a-duplicate", "--python", str(run_b.python)])
    out = capsys.readouterr().out
    assert code == 0 and "not filed" in out, out[-2000:]
    assert any("credential" in p for p in asked)
    assert fake_github.requests_to("POST", ISSUES) == [] and fake_github.issues[REPO] == {}


def test_dry_run_preview_has_no_control_characters(run_a: Run) -> None:
    # Script A prints and raises with escape sequences and bidi overrides (the ansi_escape and
    # bidi_override kinds): none reaches the terminal preview or a draft.
    assert "\x1b[31m" in run_a.raw.stdout and "\u202e" in run_a.raw.stdout
    texts = leaving(run_a.folder, local_pointers(run_a.preview, run_a.folder))
    for where, text in texts.items():
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), where
