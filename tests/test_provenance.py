"""What the script read from outside (the environment, a file) and the environment's secrets are
never written into a repro by recorded values or constant folding. End to end through real
`reprobot reduce` runs, and layer by layer: the static taint, the launcher's run-time check and
the gate."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reducer.analysis.provenance import Provenance, leaked, secret_values
from reducer.analysis.trace import subprocess_run_fn, trace_run
from reducer.search.driver import Reducer

ROOT = Path(__file__).resolve().parents[1]     # this checkout's reprobot, not an installed one
PLANTED = "planted3c1f0d9e77"

# A stand-in for a service the script talks to: it accepts only the key it issued, then fails
# on something else, so the key reaches the failing call and the reducer is tempted to inline it.
SERVICE = """\
import os


def login(cfg):
    if cfg.get("token") == os.environ.get("{var}", "{fallback}") and cfg["lr"] > 0.01:
        raise ValueError("lr too high for this project")
"""


def _reduce(tmp_path: Path, script: str, env: dict[str, str], var: str, fallback: str = "-",
            files: dict[str, str] | None = None) -> Path:
    (tmp_path / "service.py").write_text(SERVICE.format(var=var, fallback=fallback))
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "train.py", "--out", "store", "--no-env", "--cold"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT), **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (folder,) = (tmp_path / "store").iterdir()
    return folder


def _everything(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_a_value_read_from_the_environment_is_never_inlined(tmp_path) -> None:
    folder = _reduce(tmp_path, """\
        import os

        from service import login


        def make_cfg():
            return {"project": "demo", "token": os.environ["WANDB_API_KEY"], "lr": 0.1}


        cfg = make_cfg()
        login(cfg)
        """, {"WANDB_API_KEY": PLANTED}, "WANDB_API_KEY")
    repro = (folder / "repro.py").read_text()
    assert PLANTED not in _everything(folder), repro
    # the repro reads the variable as the original did
    assert 'os.environ["WANDB_API_KEY"]' in repro, repro


def test_a_value_read_from_a_file_is_never_inlined(tmp_path) -> None:
    folder = _reduce(tmp_path, """\
        import json

        from service import login


        def make_cfg():
            cfg = json.load(open("train_config.json"))
            return {"token": cfg["token"], "lr": cfg["lr"]}


        cfg = make_cfg()
        login(cfg)
        """, {}, "NO_SUCH_VARIABLE", fallback=PLANTED,
        files={"train_config.json": '{"token": "%s", "lr": 0.1}' % PLANTED})
    repro = (folder / "repro.py").read_text()
    assert PLANTED not in repro and PLANTED not in (folder / "reduction.json").read_text(), repro
    assert "train_config.json" in repro, repro


def test_a_value_equal_to_a_secret_of_the_environment_is_never_inlined(tmp_path) -> None:
    # nothing in the script reads the environment: the value is computed, and happens to be the
    # token the environment holds
    folder = _reduce(tmp_path, """\
        from service import login


        def make_cfg():
            return {"token": "hf_" + "%s", "lr": 0.1}


        cfg = make_cfg()
        login(cfg)
        """ % PLANTED, {"HF_TOKEN": "hf_" + PLANTED}, "HF_TOKEN")
    assert "hf_" + PLANTED not in _everything(folder), (folder / "repro.py").read_text()


def test_an_ordinary_recorded_value_is_still_inlined(tmp_path) -> None:
    # the control: the same script with the key spelled in it is reduced as before
    folder = _reduce(tmp_path, """\
        from service import login


        def make_cfg():
            return {"project": "demo", "token": "abc", "lr": 0.1}


        cfg = make_cfg()
        login(cfg)
        """, {}, "NO_SUCH_VARIABLE", fallback="abc")
    repro = (folder / "repro.py").read_text()
    assert "make_cfg" not in repro and "login({" in repro, repro


# ---- the layers -----------------------------------------------------------------------------
def test_static_taint_follows_assignments_containers_helpers_and_loops() -> None:
    p = Provenance(textwrap.dedent("""\
        import json, os
        from os import environ as E
        from pathlib import Path

        def secret():
            return E.get("K")

        def plain(x):
            return x + 1

        with open("c.json") as f:
            conf = json.load(f)
        token = conf["token"]
        bag = []
        bag.append(token)
        text = Path("notes.txt").read_text()
        for line in text.splitlines():
            last = line
        lr = 0.1
        steps = plain(3)
        """))
    for expr in ("secret()", "conf", "token", "bag", "**conf", "last", "dict(os.environ)", 'os.getenv("A")',
                 "torch.load('w.pt')", "yaml.safe_load(f)"):
        assert p.tainted(expr), expr
    for expr in ("lr", "steps", "plain(lr)", "{'a': 1}", "[lr, steps]"):
        assert not p.tainted(expr), expr


def test_the_trace_keeps_no_value_read_from_a_file_whatever_code_read_it(tmp_path) -> None:
    # `getattr(..., "read_" + "text")` hides the read from the static layer: the launcher sees the
    # file opened and drops the value that came out of it
    (tmp_path / "notes.txt").write_text("secret-ish note " + PLANTED)
    src = textwrap.dedent(f"""\
        import pathlib

        def load():
            return getattr(pathlib.Path({str(tmp_path / 'notes.txt')!r}), "read_" + "text")()

        note = load()
        word = note.split()[-1]
        print(repr(word))
        """)
    trace = trace_run(src, subprocess_run_fn())
    values = [b.value for b in trace.binds if b.name in ("note", "word")]
    assert values == [None, None], trace.binds
    # the control: without the file the same bindings are recorded
    plain = trace_run(src.replace(f"getattr(pathlib.Path({str(tmp_path / 'notes.txt')!r}), \"read_\" + \"text\")()",
                                  repr("secret-ish note " + PLANTED)), subprocess_run_fn())
    assert [b.value for b in plain.binds if b.name == "word"] == [repr(PLANTED)]


def test_the_gate_refuses_a_candidate_that_spells_a_new_secret(monkeypatch) -> None:
    monkeypatch.setenv("MY_API_TOKEN", PLANTED)
    assert PLANTED in secret_values() and leaked(f"x = {PLANTED!r}", [PLANTED]) == PLANTED
    runs: list[str] = []

    def oracle(source: str) -> bool:
        runs.append(source)
        return True

    best = "a = 'x' + 'y'\nb = 1\nraise ValueError(a)\n"
    reducer = Reducer(best, oracle, format_result=False)
    assert not reducer.consider(f"a = {PLANTED!r}\nraise ValueError(a)\n")
    assert runs == [] and reducer.stats.passes["setup"].secret == 1
    assert reducer.consider("a = 'x'\nraise ValueError(a)\n")


@pytest.mark.parametrize("name,value,hidden", [("HF_TOKEN", "hf_abcdef", True), ("HF_TOKEN", "short", False),
                                               ("MODEL_NAME", "gpt2-large", False)])
def test_secret_values_are_the_secret_looking_variables(name, value, hidden) -> None:
    assert (value in secret_values({name: value})) is hidden
