"""A repro folder made by a real `reprobot reduce` run, shared by the draft and filing tests.

The reduction runs once per test process (about 15 s: two confirming runs, the reduction,
the environment capture); each test copies the folder and changes its copy.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED_FORMS = Path(__file__).resolve().parents[2] / "shared" / "upstream-forms"

# A config loader with a trailing comma in its JSON: fails in json.loads, called through a
# helper, with some unrelated statements for the reducer to remove.
FAILING_SCRIPT = '''\
import json
import os

DEFAULTS = {"lr": 0.001, "epochs": 3}


def read_config(text):
    cfg = dict(DEFAULTS)
    cfg.update(json.loads(text))
    return cfg


def main():
    raw = '{"lr": 0.01, "epochs": 5,}'
    print("loading", len(raw), os.sep)
    cfg = read_config(raw)
    print(cfg)


main()
'''


@functools.lru_cache(maxsize=1)
def reduced_folder() -> Path:
    work = Path(tempfile.mkdtemp(prefix="reprobot-draft-tests-"))
    (work / "cfgload.py").write_text(FAILING_SCRIPT, encoding="utf-8")
    cmd = [sys.executable, "-m", "bot", "reduce", "cfgload.py", "--out", str(work / "repros"), "--max-time", "120"]
    if importlib.util.find_spec("bot.reduction") is None:  # the engine not built: the run stage only
        cmd.append("--no-reduce")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600, env=env)
    folders = [p.parent for p in (work / "repros").glob("*/signature.json")]
    if proc.returncode not in (0, 14) or len(folders) != 1:
        raise RuntimeError(f"reprobot reduce failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return folders[0]


def copy_repro(dest: Path) -> Path:
    """A private copy of the reduced folder, without drafts or filing records."""
    target = dest / reduced_folder().name
    shutil.copytree(reduced_folder(), target)
    for p in list(target.glob("draft-*")) + [target / "filed.json"]:
        p.unlink(missing_ok=True)
    return target


def add_route_and_related(folder: Path, target: str = "huggingface/transformers") -> None:
    """route.json and related.json in the shapes docs/CONTRACTS.md gives (what `route` and
    `dedup` write), for the tests of how a draft uses them."""
    (folder / "route.json").write_text(json.dumps({
        "target": target,
        "ranked": [
            {"repo": target, "score": 0.8, "reasons": ["the call that fails is json.loads"]},
            {"repo": "huggingface/peft", "score": 0.3, "reasons": ["peft is imported by the script"]},
        ],
        "cross_links": ["huggingface/peft"],
        "who_can_help": ["@maintainer-one", "@maintainer-two", "@maintainer-three"],
        "entry_point": "read_config",
        "raised_in": "json",
        "verdict": "test routing",
    }), encoding="utf-8")
    (folder / "related.json").write_text(json.dumps({"results": [
        {"repo": target, "number": 101, "title": "json.loads fails on trailing commas", "url":
         f"https://github.com/{target}/issues/101", "state": "closed", "score": 0.9,
         "reason": "same exception and frames", "likely_fixed_in": "v9.9.9", "is_pr": False},
    ]}), encoding="utf-8")
