"""`versions` and `contrast` on real runs: a fake library with several releases in a local wheel
folder (no network), a base interpreter that has the locked release, real pip installs."""
from __future__ import annotations

import base64
import hashlib
import json
import math
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from bot.cli import main
from bot.rerun.contrast import changes
from reducer.failure.signature import MatchOptions, distinct_failures
from reducer.run.runner import Runner, RunSpec

# fakelib's story: compute(3) raises until 1.4 fixes it; 1.6 breaks it differently.
_BODIES = {
    "old": 'def compute(x):\n    raise ValueError(f"bad input: {x}")\n',
    "fixed": 'def compute(x):\n    return x * 2\n',
    "broken": 'def compute(x, *, mode):\n    return x\n',
}
RELEASES = {"1.0": "old", "1.1": "old", "1.2": "old", "1.3": "old", "1.4": "fixed", "1.5": "fixed",
            "1.6": "broken"}


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(folder: Path, name: str, version: str, body: str, requires: tuple[str, ...] = ()) -> Path:
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'__version__ = "{version}"\n{body}'.encode(),
        f"{dist}/METADATA": ("Metadata-Version: 2.1\n"
                             f"Name: {name}\nVersion: {version}\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: reprobot-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(n, d) for n, d in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def base_venv(path: Path, wheels: Path, *pins: str) -> Path:
    """A user's environment: a venv without pip at `path`, `pins` installed from `wheels` without
    their requirements; returns its interpreter."""
    venv.EnvBuilder(with_pip=False).create(path)
    python = path / "bin" / "python"
    site = subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True).strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
                    "--target", site, "--no-deps", *pins], check=True)
    return python


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("rerun")
    wheels = root / "wheels"
    wheels.mkdir()
    for version, kind in RELEASES.items():
        build_wheel(wheels, "fakelib", version, _BODIES[kind])
    # A release whose declared requirement exists nowhere: never installable.
    build_wheel(wheels, "fakelib", "1.7", _BODIES["fixed"], requires=("no-such-dependency>=2",))
    base = root / "base"
    python = base_venv(base, wheels, "fakelib==1.0")
    return root, wheels, python


def make_repro(root: Path, python: Path, source: str, lock: str, name: str) -> Path:
    folder = root / "repros" / name
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text(source)
    (folder / "requirements.lock").write_text(lock)
    outcome = Runner(RunSpec(script=folder / "repro.py", python=str(python), timeout=60)).run(source)
    (sig, record), *_ = distinct_failures(outcome, MatchOptions())
    (folder / "signature.json").write_text(json.dumps({
        "signature": sig.to_dict(), "options": MatchOptions().to_dict(), "record": record.to_dict(),
        "script": "repro.py", "args": [], "runs": [{"wall_time": outcome.wall_time}]}))
    return folder


@pytest.fixture
def env_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOT_ENV_CACHE", str(tmp_path / "envs"))
    return tmp_path / "envs"


REPRO = "import fakelib\nfakelib.compute(3)\n"


def test_bisect_finds_the_fixing_release_in_few_runs(world, env_cache, capsys):
    root, wheels, python = world
    folder = make_repro(root, python, REPRO, "# locked\nfakelib==1.0\n", "bisect")
    code = main(["versions", str(folder), "--python", str(python), "--bisect", "fakelib",
                 "--range", "1.0..1.6", "--no-index", "--find-links", str(wheels)])
    assert code == 0
    data = json.loads((folder / "versions.json").read_text())
    b = data["bisect"]
    assert (b["first_changed"], b["last_same"]) == ("1.4", "1.3")
    # 1.6 breaks it with a TypeError after the fix: a second boundary, and a new bug, not this one
    assert (b["then_changed"], b["then_last"], b["same_bug"]) == ("1.6", "1.5", False)
    assert b["runs"] <= math.ceil(math.log2(7)) + 2
    assert b["sentence"].startswith("first passing: fakelib 1.4 (last failing 1.3)")
    assert "first passing: fakelib 1.4" in capsys.readouterr().out


def test_table_marks_latest_as_a_different_failure_and_reuses_environments(world, env_cache):
    root, wheels, python = world
    folder = make_repro(root, python, REPRO, "fakelib==1.0\n", "table")
    args = ["versions", str(folder), "--python", str(python), "--packages", "fakelib",
            "--no-index", "--find-links", str(wheels), "--json"]
    # 1.7 is listed but does not install: the latest that pip would pick is still 1.7, and the
    # row must say so in one line, never count it as PASS.
    assert main(args) == 0
    rows = {r["label"]: r for r in json.loads((folder / "versions.json").read_text())["rows"]}
    assert rows["locked"]["verdict"]["kind"] == "same failure"
    latest = rows["fakelib latest"]
    assert latest["changed"] == {"fakelib": "1.7"}
    assert latest["verdict"]["kind"] == "not installable"
    assert "no-such-dependency" in latest["verdict"]["detail"]
    swept = ["versions", str(folder), "--python", str(python), "--package", "fakelib", "--range", "1.3..1.6",
             "--no-index", "--find-links", str(wheels), "--json"]
    assert main(swept) == 0
    rows = {r["label"]: r["verdict"] for r in json.loads((folder / "versions.json").read_text())["rows"]}
    assert rows["fakelib 1.3"]["kind"] == "same failure"
    assert rows["fakelib 1.4"]["kind"] == "PASS"
    assert rows["fakelib 1.6"]["kind"] == "different failure"
    assert "TypeError" in rows["fakelib 1.6"]["detail"]
    cached = sorted(p.name for p in env_cache.iterdir())
    assert main(swept) == 0  # the same pins again: no new environment
    assert sorted(p.name for p in env_cache.iterdir()) == cached


def test_a_release_that_does_not_exist_is_one_line_not_a_crash(world, env_cache):
    root, wheels, python = world
    folder = make_repro(root, python, REPRO, "fakelib==1.0\n", "missing")
    assert main(["versions", str(folder), "--python", str(python), "--package", "fakelib", "--range", "9.0..",
                 "--no-index", "--find-links", str(wheels), "--json"]) == 0
    assert json.loads((folder / "versions.json").read_text())["rows"] == []
    assert main(["versions", str(folder), "--python", str(python), "--bisect", "otherlib",
                 "--no-index", "--find-links", str(wheels), "--json"]) == 0
    note = json.loads((folder / "versions.json").read_text())["bisect"]["note"]
    assert note.startswith("otherlib") and "\n" not in note
    from bot.rerun.environments import NotInstallable, overlay_environment, probe
    from bot.rerun.releases import IndexOptions
    with pytest.raises(NotInstallable) as e:
        overlay_environment(str(python), probe(str(python), []), {"fakelib": "9.9"},
                            IndexOptions(("--no-index", "--find-links", str(wheels))))
    assert "\n" not in str(e.value) and "9.9" in str(e.value)


def test_versions_swaps_every_target_package_in_the_stack_trl_included(tmp_path, env_cache):
    """No --packages: the default rows swap every target package the lock pins (bot/targets/),
    trl as much as peft. Fake releases of both, in a local wheel folder, stand in for them."""
    from bot.commands.versions import git_url
    from bot.rerun.lock import versions_stack

    assert {"trl", "peft"} <= set(versions_stack()) and "torch" not in versions_stack()
    assert git_url("trl", "main") == "git+https://github.com/huggingface/trl@main"
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version, kind in (("0.1", "old"), ("0.2", "fixed")):
        build_wheel(wheels, "trl", version, _BODIES[kind])
        build_wheel(wheels, "peft", version, _BODIES["old"])
    python = base_venv(tmp_path / "base", wheels, "trl==0.1", "peft==0.1")
    folder = make_repro(tmp_path, python, "import peft, trl\ntrl.compute(3)\n", "peft==0.1\ntrl==0.1\n", "stack")
    assert main(["versions", str(folder), "--python", str(python), "--no-index", "--find-links", str(wheels),
                 "--json"]) == 0
    rows = {r["label"]: r for r in json.loads((folder / "versions.json").read_text())["rows"]}
    assert list(rows) == ["locked", "peft latest", "trl latest", "all latest"]
    assert rows["locked"]["versions"] == {"peft": "0.1", "trl": "0.1"}
    assert rows["trl latest"]["changed"] == {"trl": "0.2"} and rows["trl latest"]["verdict"]["kind"] == "PASS"
    assert rows["trl latest"]["versions"]["trl"] == "0.2"
    assert rows["peft latest"]["verdict"]["kind"] == "same failure"
    assert rows["all latest"]["changed"] == {"peft": "0.2", "trl": "0.2"}


CONFIGURE = '''\
def configure(size=1, strict=False, device="cpu", name=None, verbose=True):
    if strict and device == "cpu":
        raise ValueError(f"strict mode needs an accelerator, got {device}")


configure(size=2, strict=True, device="cpu", name="run", verbose=False)
'''


def test_contrast_finds_exactly_the_changes_that_make_it_pass(world, tmp_path):
    root, _, python = world
    folder = make_repro(root, python, CONFIGURE, "fakelib==1.0\n", "contrast")
    assert main(["contrast", str(folder), "--python", str(python), "--jobs", "2", "--json"]) == 0
    data = json.loads((folder / "contrast.json").read_text())
    passing = {c["change"] for c in data["changes"] if c["verdict"]["kind"] == "PASS"}
    assert passing == {"without `strict=True` (the default)", "`strict=True` -> `strict=False`",
                       "`'cpu'` -> `'cuda:0'`"}
    kept = {c["change"] for c in data["changes"] if c["verdict"]["kind"] == "same failure"}
    assert "without `size=2` (the default)" in kept and "`verbose=False` -> `verbose=True`" in kept
    # one run per change, and the traced run before them (bot/rerun/contrast.py's handed_back)
    assert data["runs"] == len(data["changes"]) + 1 and data["handback"] == []


def test_contrast_collapses_a_split_device_map():
    src = 'm = load("x", device_map={"model": 0, "lm_head": "cpu"})\n'
    described = [c.description for c in changes(src)]
    assert 'device_map collapsed to one device: `{"": 0}`' in described
    assert 'device_map collapsed to one device: `{"": "cpu"}`' in described


def test_draft_and_preview_carry_what_the_reruns_found(tmp_path, capsys):
    from bot.issue.draft import build_draft
    from tests.draft_support import copy_repro
    folder = copy_repro(tmp_path)
    pass_row = {"label": "peft latest", "versions": {"peft": "0.22.0"}, "changed": {"peft": "0.22.0"},
                "verdict": {"kind": "PASS"}, "seconds": 3.0}
    same_row = {"label": "transformers latest", "versions": {"transformers": "5.23.0"},
                "changed": {"transformers": "5.23.0"}, "verdict": {"kind": "same failure"}, "seconds": 3.0}
    (folder / "versions.json").write_text(json.dumps({"rows": [same_row, pass_row], "bisect": {
        "first_changed": "0.22.0", "sentence": "first passing: peft 0.22.0 (last failing 0.21.2), 3 runs"}}))
    (folder / "contrast.json").write_text(json.dumps({"changes": [
        {"line": 3, "change": 'device_map collapsed to one device: `{"": 0}`', "verdict": {"kind": "PASS"}},
        {"line": 3, "change": "without `dtype=torch.float16` (the default)", "verdict": {"kind": "same failure"}}]}))
    body = build_draft(folder, "peft").body
    assert "Still fails the same way on transformers 5.23.0 (latest)." in body
    assert "Passes on peft 0.22.0 (latest)." in body
    assert "Bisected: first passing: peft 0.22.0 (last failing 0.21.2), 3 runs." in body
    expected = body.split("### Expected behavior", 1)[1]
    assert '- device_map collapsed to one device: `{"": 0}`' in expected
    assert "dtype=torch.float16" not in expected
    capsys.readouterr()
    main(["file", "--dry-run", str(folder), "--repo", "peft"])
    out = capsys.readouterr().out
    # after the lines saying which steps `file` ran or kept, the headline comes first
    steps = ("route:", "environment:", "related issues:", "draft:", " ")
    first = next(line for line in out.splitlines() if line.strip() and not line.startswith(steps))
    assert first.startswith("Passes on peft 0.22.0 (latest)") and "likely fixed" in first


CPU_EXAMPLE_REPRO = '''\
from peft import LoraConfig, get_peft_model
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

text = Gemma4TextConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=16, global_head_dim=16,
                        vocab_size_per_layer_input=128, hidden_size_per_layer_input=8)
vision = Gemma4VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                            num_key_value_heads=2, head_dim=16, position_embedding_size=64)
model = Gemma4ForConditionalGeneration(Gemma4Config(text_config=text, vision_config=vision))
get_peft_model(model, LoraConfig(target_modules=["q_proj"]))
'''


@pytest.mark.slow
def test_cpu_example_repro_still_fails_on_the_latest_peft(tmp_path, monkeypatch, capsys):
    """The bundled CPU example's minimal repro (Gemma4ClippableLinear is not a LoRA target),
    locked at an older peft, against the latest peft from the package index."""
    pytest.importorskip("peft")
    from bot.rerun.releases import IndexOptions, list_releases
    releases = list_releases("peft", f"{sys.version_info[0]}.{sys.version_info[1]}", IndexOptions())
    if releases.error or len(releases.versions) < 2:
        pytest.skip(f"the package index is not reachable from here: {releases.error}")
    monkeypatch.setenv("REPROBOT_ENV_CACHE", str(tmp_path / "envs"))
    import importlib.metadata as md
    older = releases.between("0.21.0", None)[0]
    pins = {n: md.version(n) for n in ("torch", "transformers", "accelerate", "safetensors", "huggingface-hub",
                                      "tokenizers")}
    lock = "".join(f"{n}=={v}\n" for n, v in pins.items()) + f"peft=={older}\n"
    folder = make_repro(tmp_path, Path(sys.executable), CPU_EXAMPLE_REPRO, lock, "cpu-example")
    assert main(["versions", str(folder), "--packages", "peft"]) == 0
    print(capsys.readouterr().out)  # the table, for the log
    rows = {r["label"]: r for r in json.loads((folder / "versions.json").read_text())["rows"]}
    assert rows["locked"]["versions"]["peft"] == older
    assert rows["locked"]["verdict"]["kind"] == "same failure"
    latest = rows["peft latest"]
    assert latest["versions"]["peft"] == releases.latest
    assert latest["verdict"]["kind"] == "same failure", latest


# fakemsg's story: 1.2 rewords the error (same type, same function), 1.4 fixes it.
_MSG_BODIES = {
    "old": 'def compute(x):\n    raise ValueError(f"bad input: {x}")\n',
    "reworded": 'def compute(x):\n    raise ValueError(f"input out of range: {x}")\n',
    "fixed": 'def compute(x):\n    return x * 2\n',
}
MSG_RELEASES = {"1.0": "old", "1.1": "old", "1.2": "reworded", "1.3": "reworded", "1.4": "fixed", "1.5": "fixed"}


def test_bisect_reports_the_reworded_message_and_the_fix(world, env_cache, tmp_path, capsys):
    root, _, python = world
    wheels = tmp_path / "msg-wheels"
    wheels.mkdir()
    for version, kind in MSG_RELEASES.items():
        build_wheel(wheels, "fakemsg", version, _MSG_BODIES[kind])
    site = subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True).strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
                    "--target", site, "--no-deps", "fakemsg==1.0"], check=True)
    folder = make_repro(root, python, "import fakemsg\nfakemsg.compute(3)\n", "fakemsg==1.0\n", "msg")
    assert main(["versions", str(folder), "--python", str(python), "--bisect", "fakemsg",
                 "--no-index", "--find-links", str(wheels)]) == 0
    b = json.loads((folder / "versions.json").read_text())["bisect"]
    assert (b["first_changed"], b["last_same"]) == ("1.2", "1.1")
    assert (b["then_changed"], b["then_last"], b["first_passing"]) == ("1.4", "1.3", "1.4")
    assert b["same_bug"] is True
    assert b["runs"] <= math.ceil(math.log2(len(MSG_RELEASES))) + 3
    out = " ".join(capsys.readouterr().out.split())
    assert ("first different failure: fakemsg 1.2 (last failing 1.1) — same bug, message changed; "
            "first passing: fakemsg 1.4 (last different failure 1.3)") in out



def test_a_resolution_failure_names_the_conflicting_requirements(tmp_path):
    """pip's last line ("ResolutionImpossible: for help visit ...") is no reason; the requirements
    that conflict are (watch printed only the former)."""
    from bot.rerun.environments import NotInstallable, _install
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "fakeapp", "1.0", "", requires=("fakebase<2",))
    build_wheel(wheels, "fakebase", "2.0", "")
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
           "--find-links", str(wheels), "--target", str(tmp_path / "site")]
    with pytest.raises(NotInstallable) as e:
        _install(cmd, ["fakeapp==1.0", "fakebase==2.0"])
    reason = str(e.value)
    assert reason.startswith("conflicting requirements: "), reason
    assert "fakebase==2.0" in reason and "fakeapp 1.0 depends on fakebase<2" in reason
    assert "for help visit" not in reason
