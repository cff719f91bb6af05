"""Self-contained repros (issue #30): the local artefacts a script reads are found statically, each
rewrite is verified by a run of repro.py alone in an empty folder with the Hub offline, and the
draft's steps are that run's. The corpus is tests/data/selfcontained/: one script per kind of
artefact, each failing in library code in a way the artefact's exact weights do not decide."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reducer.analysis.artefacts import Context, find_artefacts
from reducer.failure.signature import MatchOptions, Signature, signature_of
from reducer.failure.tracebacks import parse_tracebacks
from reducer.run.runner import OFFLINE_ENV

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "selfcontained"
# case folder -> (script, kind of artefact it reads, the path text that must leave the repro)
CASES = {
    "ckpt_model": ("finetune.py", "model", "tiny-llama"),
    "tokenizer_dir": ("batch.py", "tokenizer", "tiny-tokenizer"),
    "adapter_dir": ("serve.py", "adapter", "ADAPTER"),
    "json_config": ("train.py", "data", "train_config.json"),
    "csv_data": ("embed.py", "data", "tokens.csv"),
    "env_path": ("encode.py", "config", "TINY_BERT_CONFIG"),
}
needs_hf = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "peft")),
                              reason="needs the hf extra (torch, transformers, peft)")


def _case(tmp_path: Path, name: str) -> tuple[Path, dict[str, str]]:
    """A copy of the case with its binary artefacts built, and the environment it runs in."""
    folder = tmp_path / name
    shutil.copytree(CORPUS / name, folder)
    subprocess.run([sys.executable, str(CORPUS / "build_artefacts.py"), str(folder)], check=True,
                   capture_output=True, timeout=300)
    env = {**os.environ, "TINY_BERT_CONFIG": str(folder / "bert-config")}
    return folder, env


# ---- finding what a script reads (no runs) ----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_corpus_script_reads_its_artefact_and_it_is_found(tmp_path, name):
    script, kind, _ = CASES[name]
    folder = tmp_path / name
    shutil.copytree(CORPUS / name, folder)
    (folder / "tiny-llama").mkdir(exist_ok=True)      # stands for the built checkpoint
    (folder / "adapter").mkdir(exist_ok=True)
    ctx = Context(folder / script, {"TINY_BERT_CONFIG": str(folder / "bert-config")})
    found = find_artefacts((folder / script).read_text(encoding="utf-8"), ctx)
    assert [a.kind for a in found] == [kind], found
    assert found[0].path.is_relative_to(folder)


def test_paths_shared_with_a_maintainer_are_not_artefacts(tmp_path):
    """A model in the interpreter's tree or the Hub cache is one a maintainer has or downloads."""
    (tmp_path / "cfg").mkdir()
    source = "from transformers import AutoConfig\nAutoConfig.from_pretrained('cfg')\nopen('missing.txt')\n"
    ctx = Context(tmp_path / "s.py", {})
    assert [a.label for a in find_artefacts(source, ctx)] == ["cfg"]
    shared = Context(tmp_path / "s.py", {}, shared=[tmp_path])
    assert find_artefacts(source, shared) == []


def test_writes_are_not_reads_and_unset_variables_are_not_guessed(tmp_path):
    (tmp_path / "out.json").write_text("{}")
    (tmp_path / "in.json").write_text("{}")
    source = ("import os, json\njson.dump({}, open('out.json', 'w'))\n"
              "open(os.environ['NOT_SET_ANYWHERE'])\nopen(os.getenv('ALSO_NOT', 'in.json'))\n")
    found = find_artefacts(source, Context(tmp_path / "s.py", {}))
    assert [(a.label, a.argument) for a in found] == [("in.json", "os.getenv('ALSO_NOT', 'in.json')")]


def test_what_the_script_saves_before_it_loads_is_its_own_not_the_users(tmp_path):
    """The GPU example's repro saves a tiny model and adapter into its folder and loads them back
    (`PeftModel.from_pretrained(..., '')`): it needs nothing from anyone's disk. A read before the
    save, or of another file in the folder it saved into, still is the user's."""
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "tokens.csv").write_text("a\n")
    (tmp_path / "out.json").write_text("{}")
    source = ("from transformers import AutoModel\nfrom peft import PeftModel, get_peft_model\n"
              "AutoModel.from_pretrained('ckpt')\n"
              "AutoModel.from_config(cfg).save_pretrained('.')\n"
              "get_peft_model(AutoModel.from_config(cfg), lora).save_pretrained(save_directory='')\n"
              "PeftModel.from_pretrained(AutoModel.from_pretrained('.'), '')\n"
              "open('tokens.csv')\n"
              "AutoModel.from_pretrained('x').save_pretrained('ckpt')\nAutoModel.from_pretrained('ckpt')\n"
              "from pathlib import Path\nPath('out.json').write_text('{}')\nopen('out.json')\n")
    found = find_artefacts(source, Context(tmp_path / "s.py", {}))
    assert [(a.kind, a.argument) for a in found] == [("model", "'ckpt'"), ("data", "'tokens.csv'")]


def test_argparse_option_given_on_the_command_line_wins_over_its_default(tmp_path):
    (tmp_path / "a.csv").write_text("x\n")
    (tmp_path / "b.csv").write_text("x\n")
    source = ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--data-file', default='a.csv')\n"
              "args = p.parse_args()\nopen(args.data_file)\n")
    assert [a.label for a in find_artefacts(source, Context(tmp_path / "s.py", {}))] == ["a.csv"]
    given = Context(tmp_path / "s.py", {}, argv=("--data-file", "b.csv"))
    assert [a.label for a in find_artefacts(source, given)] == ["b.csv"]


# ---- the step, with real runs -----------------------------------------------------------------------
def _run_alone(source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """What a maintainer does: repro.py alone in an empty folder, offline, none of our variables."""
    empty = tmp_path / "maintainer"
    empty.mkdir()
    (empty / "repro.py").write_text(source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TINY_BERT_CONFIG"}
    env.update(OFFLINE_ENV, TMPDIR=str(empty))
    return subprocess.run([sys.executable, "repro.py"], cwd=empty, env=env, capture_output=True, text=True,
                          timeout=300)


def _assert_same_failure(proc: subprocess.CompletedProcess, signature: Signature, options: MatchOptions) -> None:
    last = parse_tracebacks(proc.stderr, "stderr")[-1]
    assert proc.returncode != 0 and signature_of(last, options) == signature, proc.stderr[-3000:]


@needs_hf
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_reduced_repro_runs_alone_offline_with_the_same_signature(tmp_path, name):
    script, _kind, path_text = CASES[name]
    folder, env = _case(tmp_path, name)
    out = tmp_path / "repros"
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", script, "--out", str(out), "--no-env",
                           "--max-time", "900"], cwd=folder, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=1000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (repro_dir,) = out.iterdir()
    reduction = json.loads((repro_dir / "reduction.json").read_text(encoding="utf-8"))
    assert reduction["verified"] == "alone, offline" and reduction["needs"] == [], reduction.get("standalone")
    repro = (repro_dir / "repro.py").read_text(encoding="utf-8")
    # The path is no longer read from the user's disk: gone, or only the name of a file the
    # repro writes itself into a temporary folder before reading it.
    if path_text in repro:
        assert "tempfile.mkdtemp()" in repro and ".write_text(" in repro, repro
    stored = json.loads((repro_dir / "signature.json").read_text(encoding="utf-8"))
    _assert_same_failure(_run_alone(repro, tmp_path), Signature.from_dict(stored["signature"]),
                         MatchOptions.from_dict(stored["options"]))
    print(f"\n{name}:\n{repro}")
