"""Ray is an optional extra: without it `reprobot reduce` behaves as before and never imports
Ray, and --cluster says in one line how to get it. The pieces of the cluster engine that need no
Ray (the env probe, the GPU mapping of a slot) are checked here too, with or without Ray."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from reducer.cluster.env_probe import EnvProbe, differences, probe, top_level_modules
from reducer.cluster.gpus import GPU_COUNT_ENV, ClusterGpus, slot_visible
from reducer.run.gpu import GpuPool

ROOT = Path(__file__).resolve().parents[1]

# Runs the CLI in a Python where `import ray` fails (as where the extra is not installed), and
# writes every attempt to import it to RAY_ATTEMPTS.
NO_RAY = textwrap.dedent("""
    import importlib.abc, os, sys
    class NoRay(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "ray" or name.startswith("ray."):
                with open(os.environ["RAY_ATTEMPTS"], "a") as f:
                    f.write(name + "\\n")
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, NoRay())
    from bot.cli import main
    sys.exit(main(sys.argv[1:]))
    """)


def _cli(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    attempts = tmp_path / "ray_attempts"
    proc = subprocess.run([sys.executable, "-c", NO_RAY, *args], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "RAY_ATTEMPTS": str(attempts),
                               "COLUMNS": "200"}, timeout=600)
    return proc, attempts.read_text().split() if attempts.is_file() else []


def test_without_ray_reduce_works_as_before_and_never_imports_it(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("import json\nsettings = {'a': 1}\nprint(settings)\njson.loads('{')\n")
    proc, attempts = _cli(tmp_path, "reduce", "job.py", "--no-env", "--cold", "--out", "repros")
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert attempts == []
    reduction = json.loads(next((tmp_path / "repros").glob("*/reduction.json")).read_text())
    assert reduction["status"] == "done" and "cluster" not in reduction


def test_without_ray_cluster_says_how_to_install_it_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("import json\njson.loads('{')\n")
    proc, attempts = _cli(tmp_path, "reduce", "job.py", "--cluster", "auto", "--out", "repros")
    assert proc.returncode != 0
    assert "pip install 'reprobot[ray]'" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "repros").exists()        # refused before the script ever ran
    assert attempts and attempts[0] == "ray"


def test_a_bad_cluster_address_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("import json\njson.loads('{')\n")
    proc, _ = _cli(tmp_path, "reduce", "job.py", "--cluster", "nowhere")
    assert proc.returncode != 0 and "expected ray://HOST:PORT, HOST:PORT or auto" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr


def _site(folder: Path, version: str) -> Path:
    (folder / "stackpkg").mkdir(parents=True)
    (folder / "stackpkg" / "__init__.py").write_text("")
    info = folder / f"stackpkg-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: stackpkg\nVersion: {version}\n")
    (info / "top_level.txt").write_text("stackpkg\n")
    return folder


def test_the_env_probe_sees_the_stack_the_candidates_would_see(tmp_path: Path) -> None:
    source = "import json\nimport stackpkg.sub\nfrom libcst import parse_module\n"
    modules = top_level_modules(source)
    assert modules == ["json", "libcst", "stackpkg"]
    env = lambda site: {**os.environ, "PYTHONPATH": str(site)}  # noqa: E731
    here = probe(sys.executable, modules, env(_site(tmp_path / "a", "1.0")))
    same = probe(sys.executable, modules, env(_site(tmp_path / "b", "1.0")))
    other = probe(sys.executable, modules, env(_site(tmp_path / "c", "2.0")))
    assert here.python == ".".join(map(str, sys.version_info[:3]))
    assert here.packages["stackpkg"] == "1.0" and here.packages["libcst"]
    assert "json" not in here.packages                 # the standard library has no distribution
    assert differences(here, same) == []
    assert differences(here, other) == ["stackpkg 1.0 here, 2.0 there"]
    older = EnvProbe.from_dict({**here.to_dict(), "python": "3.10.0"})
    assert differences(here, older) == [f"Python cpython {here.python} here, cpython 3.10.0 there"]


def test_a_slot_shows_its_own_gpus_as_many_as_the_run_asks_for() -> None:
    # the local pool named local GPUs 2,3: the slot shows two of its own
    assert slot_visible({"CUDA_VISIBLE_DEVICES": "2,3", "X": "1"}, ["0", "1"]) == {"CUDA_VISIBLE_DEVICES": "0,1", "X": "1"}
    assert slot_visible({GPU_COUNT_ENV: "1"}, ["4", "5"]) == {"CUDA_VISIBLE_DEVICES": "4"}
    assert slot_visible(None, ["4", "5"]) == {"CUDA_VISIBLE_DEVICES": "4,5"}
    assert slot_visible({GPU_COUNT_ENV: "1"}, []) == {}          # a CPU slot: nothing pinned
    pool = ClusterGpus(GpuPool([]))
    with pool.acquire(("0",)) as slot:
        assert slot.env(1) == {GPU_COUNT_ENV: "1"} and slot.env() is None
