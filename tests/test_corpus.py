"""The reduction corpus (bench/corpus): each script fails as its MANIFEST entry says, and
`reprobot reduce` turns each into a script that fails the same way within the size bound.

The reduction tests drive the real CLI in a subprocess, then check the result independently of
the reducer: repro.py is run on its own (plain subprocess, its own temp dir) and its traceback is
read with the contract parser; the failure must have the stored Signature.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reducer.failure.normalize import library_path
from reducer.failure.signature import MatchOptions, Signature, signature_of
from reducer.failure.tracebacks import all_records, parse_tracebacks

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "bench" / "corpus"
ALL_ENTRIES = json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8"))["scripts"]
# The issue-29 shapes need torch and transformers (and a launch line): tests/test_ranks.py and
# bench/reduce_ranks.py run them; the stdlib corpus is the rest.
MANIFEST = [s for s in ALL_ENTRIES if not s.get("requires")]
# Issue #31: scripts of shapes the first corpus lacked, each bound at the hand floor, written before
# any pass was changed; MANIFEST_heldout.json is the part no pass is tuned on.
PARTS = {path.stem.removeprefix("MANIFEST_"): json.loads(path.read_text(encoding="utf-8"))["scripts"]
         for path in sorted(CORPUS.glob("MANIFEST_*.json"))}
MANIFEST = MANIFEST + [s for scripts in PARTS.values() for s in scripts]
IDS = [Path(s["file"]).stem for s in MANIFEST]


def _load_bench(name: str):
    """bench/ is not a package: load its modules by path."""
    bench = str(ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


compare = _load_bench("compare")


def _run_script(path: Path, args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, TMPDIR=str(cwd), PYTHONFAULTHANDLER="1")
    try:
        return subprocess.run([sys.executable, str(path), *args], cwd=cwd, env=env,
                              check=False, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        # A repro a maintainer runs must end on its own, not print the failure and then hang.
        pytest.fail(f"{path.name} did not terminate within {timeout:.0f}s")


def _records(proc: subprocess.CompletedProcess):
    return all_records(parse_tracebacks(proc.stderr, "stderr") + parse_tracebacks(proc.stdout, "stdout"))


# ------------------------------------------------------------------ the corpus itself

def test_manifest_lists_every_script_and_enough_of_them():
    on_disk = sorted(p.name for p in CORPUS.glob("*.py"))
    assert sorted(s["file"] for s in ALL_ENTRIES + [s for scripts in PARTS.values() for s in scripts]) == on_disk
    assert len(on_disk) >= 6


@pytest.mark.parametrize("entry", MANIFEST, ids=IDS)
def test_corpus_script_fails_as_documented(entry, tmp_path):
    path = CORPUS / entry["file"]
    source = path.read_text(encoding="utf-8")
    assert 80 <= len(source.splitlines()) <= 400
    header = source.splitlines()[:12]
    assert any("Expected failure:" in line for line in header), "header must name the expected failure"
    statements = compare.count_statements(source)
    assert statements > 3 * entry["max_statements"], "the bound must be a real reduction"
    assert entry["ideal_statements"] <= entry["max_statements"]

    proc = _run_script(path, entry["args"], tmp_path)
    assert (proc.returncode == 0) == entry["exits_zero"], proc.stderr[-2000:]
    hits = [r for r in _records(proc) if r.exc_type == entry["exc_type"]
            and entry["message_substring"] in r.message]
    assert hits, f"expected {entry['exc_type']}: {entry['message_substring']!r}\n{proc.stderr[-3000:]}"
    # The failure is raised inside the standard library, so the Signature has library frames
    # and only the same call can match it.
    assert signature_of(hits[0]).frames
    # The header's "line N, marked FAILING LINE" is where the user's code calls into the library.
    documented = re.search(r"line (\d+), marked FAILING LINE", "\n".join(header))
    assert documented, "header must give the failing line"
    line = int(documented.group(1))
    assert "# FAILING LINE" in source.splitlines()[line - 1]
    user_frames = [f for f in hits[0].frames if library_path(f.path) is None and not f.path.startswith("<")]
    assert user_frames and user_frames[-1].lineno == line


def test_ideal_repros_fail_the_same_way(tmp_path):
    """The 'ideal' results the bounds are derived from really are repros (for the scripts where
    the ideal is a two-line call): same Signature as the original, and the ideal raises it
    itself, uncaught (not logged by a worker, not as another exception's context)."""
    ideals = {
        "constants_dead_code.py": "import shlex\nshlex.split('\"')\n",
        "classes_metrics.py": "import statistics\nstatistics.mean([])\n",
        "nested_config_registry.py": "import textwrap\ntextwrap.wrap('', width=0)\n",
        "argparse_main.py": "import datetime\ndatetime.datetime.strptime('2024-13-01', '%Y-%m-%d')\n",
        "worker_swallow.py": "import json\njson.loads('{\"id\": 2, \"text\": \"bad\" \"lang\": \"en\"}')\n",
        "threadpool_service.py": "import urllib.parse\nurllib.parse.parse_qs('page=2&verbose', strict_parsing=True)\n",
        "executor_map.py": "import configparser\n"
                           "configparser.ConfigParser().read_string('[fetch]\\nretries = 3\\nretries = 5\\n')\n",
        "mp_process_target.py": "import urllib.parse\nurllib.parse.urljoin('http://[fe80::1/simple/', 'numpy/')\n",
        "handler_hides_failure.py": "import csv, sys\ncsv.DictWriter(sys.stdout, ['id']).writerow({'region': 'eu'})\n",
        "merged_config.py": "import logging\nlogging.basicConfig(level='verbose')\n",
    }
    ideals.update({e["file"]: e["ideal"] for e in MANIFEST if "ideal" in e})
    for entry in MANIFEST:
        if entry["file"] not in ideals:
            continue
        original = [signature_of(r) for r in _records(_run_script(CORPUS / entry["file"], entry["args"], tmp_path))
                    if r.exc_type == entry["exc_type"]]
        ideal = tmp_path / "ideal.py"
        ideal.write_text(ideals[entry["file"]], encoding="utf-8")
        proc = _run_script(ideal, [], tmp_path)
        got = [signature_of(r) for r in _records(proc)]
        assert compare.count_statements(ideals[entry["file"]]) == entry["ideal_statements"]
        assert original and original[0] in got, (entry["file"], original, got)
        assert _ends_uncaught_with(proc, original[0]), (entry["file"], proc.stderr[-2000:])


def _ends_uncaught_with(proc: subprocess.CompletedProcess, target: Signature) -> bool:
    """The run dies of ``target`` itself: the last traceback on stderr is it, not a wrapper
    raised while handling it, and nothing caught it (a non-zero exit)."""
    last = parse_tracebacks(proc.stderr, "stderr")[-1:]
    return proc.returncode != 0 and bool(last) and signature_of(last[0]) == target


# ------------------------------------------------------------------ bench measures and checker

def test_statement_count():
    src = "import os\nx = 1; y = 2\ndef f(a):\n    if a:\n        return a\n    pass\nclass C:\n    z = 3\n"
    # import, x=, y=, def, if, return, pass, class, z=
    assert compare.count_statements(src) == 9
    assert compare.count_statements("") == 0


def test_interestingness_check_and_run_counter(tmp_path):
    """bench/interesting.py accepts the original, rejects a non-failing and a non-compiling
    candidate, and the counting interpreter counts exactly the script runs."""
    entry = next(e for e in compare.load_manifest() if e.name == "constants_dead_code")
    signature = compare.establish_target(entry, tmp_path / "target", sys.executable)
    counter = tmp_path / "runs.txt"
    wrapper = compare.make_counting_python(sys.executable, counter, tmp_path)

    def check(text: str) -> int:
        cand = tmp_path / "cand.py"
        cand.write_text(text, encoding="utf-8")
        return subprocess.run([sys.executable, str(ROOT / "bench" / "interesting.py"), "--signature",
                               str(signature), "--script", str(entry.path), "--python", str(wrapper),
                               "--timeout", "30", str(cand)], check=False, capture_output=True, text=True).returncode

    assert check(entry.path.read_text(encoding="utf-8")) == 0
    assert check("import shlex\nshlex.split('\"')\n") == 0
    assert check("import shlex\nshlex.split('fine')\n") == 1          # runs, no failure
    assert check("import textwrap\ntextwrap.wrap('', width=0)\n") == 1  # runs, another failure
    assert check("def broken(:\n") == 1                               # never runs
    assert compare.count_runs(counter) == 4


# ------------------------------------------------------------------ reduction through the CLI

# Per script. A run takes ~50 ms, so a few hundred runs fit easily; a reduction that needs more is too slow.
MAX_TIME = 120


def _reduce(script: Path, args: list[str], out: Path) -> Path:
    cmd = [sys.executable, "-m", "bot", "reduce", str(script), "--out", str(out), "--jobs", "2",
           "--max-time", str(MAX_TIME), "--no-env"]
    if args:
        cmd += ["--", *args]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=MAX_TIME + 300, cwd=out.parent)
    # 14: stopped at --max-time with the best result so far kept (a loaded machine)
    assert proc.returncode in (0, 14), proc.stderr[-3000:] + proc.stdout[-3000:]
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


@pytest.mark.slow
@pytest.mark.parametrize("entry", MANIFEST, ids=IDS)
def test_reduce_keeps_signature_and_meets_bound(entry, tmp_path):
    script = CORPUS / entry["file"]
    # The original's Signature, established independently of the CLI.
    original = [r for r in _records(_run_script(script, entry["args"], tmp_path))
                if r.exc_type == entry["exc_type"]]
    assert original
    target = signature_of(original[0])

    folder = _reduce(script, entry["args"], tmp_path / "repros")
    stored = json.loads((folder / "signature.json").read_text(encoding="utf-8"))
    assert stored["signature"]["id"] == target.id
    assert folder.name.endswith("-" + target.id)
    options = MatchOptions.from_dict(stored["options"])

    repro = (folder / "repro.py").read_text(encoding="utf-8")
    n = compare.count_statements(repro)
    assert n < compare.count_statements(script.read_text(encoding="utf-8"))
    assert compare.count_tokens(repro) < compare.count_tokens(script.read_text(encoding="utf-8"))

    # repro.py on its own, outside reprobot, still fails the same way.
    run_dir = tmp_path / "rerun"
    run_dir.mkdir()
    (run_dir / entry["file"]).write_text(repro, encoding="utf-8")
    proc = _run_script(run_dir / entry["file"], entry["args"], run_dir)
    got = {signature_of(r, options) for r in _records(proc)}
    assert Signature.from_dict(stored["signature"]) in got, proc.stderr[-3000:]
    # What a maintainer reads: the target failure is the run's last traceback, reported as itself
    # (not as the context of another exception), with the original's own message, values and all.
    last = parse_tracebacks(proc.stderr, "stderr")[-1]
    assert signature_of(last, options) == Signature.from_dict(stored["signature"]), proc.stderr[-3000:]
    assert last.message == original[0].message

    reduction = json.loads((folder / "reduction.json").read_text(encoding="utf-8"))
    assert reduction["runs"] > 0
    if n > entry["max_statements"]:
        # The bound a 1-minimal reducer reaches; the engine does not reach it on every script yet
        # (bench/README.md has the figures). Reported as an expected failure, not hidden.
        pytest.xfail(f"{n} statements > bound {entry['max_statements']} after {reduction['runs']} runs")


def test_mlfloor_floors_are_counted_as_the_reduction_counts_them():
    # the goal compares a repro's statements_after (count_statements: every statement, nested ones
    # too) with the floor's count in the manifest; one counted top-level statements only (heldout3's
    # spawn_multitask_ddp: 5 for a 12-statement floor) and read as a miss it was not
    from reducer.analysis.size import count_statements
    wrong = {}
    for manifest in sorted((ROOT / "bench" / "mlfloor").glob("*/MANIFEST.json")):
        for e in json.loads(manifest.read_text(encoding="utf-8"))["scripts"]:
            n = count_statements((manifest.parent / e["floor"]).read_text(encoding="utf-8"))
            if n != e["floor_statements"]:
                wrong[f"{manifest.parent.name}/{e['floor']}"] = (e["floor_statements"], n)
    assert wrong == {}
