"""Compare reprobot, pysource-minimize and Shrink Ray on the same failing scripts.

    python bench/compare.py [--tools reprobot,pysource-minimize,shrinkray] [--scripts a,b]
                            [--limit 300] [--jobs 1] [--parallel 1] [--example] [--json results.json]

For every script of bench/corpus/MANIFEST.json (and, with --example, the bundled CPU Gemma 4
example) it
1. establishes the target failure once with `reprobot reduce --no-reduce` (the Signature every
   tool must preserve, in signature.json);
2. runs each tool under the same time limit, with the same interestingness test
   (bench/interesting.py: reprobot's own Runner + find_match) and the same way of counting runs:
   every tool runs candidates through a wrapper interpreter that appends one line to a counter
   file per script run and then execs the real Python (compile failures never reach it);
3. re-checks each tool's final script once (uncounted) and prints a table of final tokens,
   statements, runs of the script and wall time.

pysource-minimize has no parallel mode; Shrink Ray and reprobot get --jobs.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import libcst as cst

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / "corpus"
EXAMPLE = ROOT / "examples" / "cpu_gemma4_lora" / "train_lora.py"
INTERESTING = HERE / "interesting.py"
TOOLS = ("reprobot", "pysource-minimize", "shrinkray")

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


# ---------------------------------------------------------------- measures

def count_statements(source: str) -> int:
    """Simple statements plus compound statement headers (def, class, if, for, ...), any depth:
    reprobot's own measure, so the table and reduction.json agree."""
    from reducer.analysis.size import count_statements as statements
    return statements(source)


def count_tokens(source: str) -> int:
    from reducer.analysis.size import count_tokens as tokens
    return tokens(source)


# ---------------------------------------------------------------- plumbing

@dataclass
class Entry:
    """One script to reduce, as MANIFEST.json describes it."""

    name: str
    path: Path
    args: list[str]
    max_statements: int | None = None
    ideal_statements: int | None = None
    part: str = "corpus"     # which manifest: corpus (MANIFEST.json), floor, heldout (MANIFEST_<part>.json)


@dataclass
class Result:
    script: str
    tool: str
    status: str            # ok | timeout | error | lost (final script no longer fails the same way)
    tokens_before: int
    tokens_after: int | None
    statements_before: int
    statements_after: int | None
    runs: int
    wall: float
    bound: int | None = None
    tool_runs: int | None = None   # the tool's own count where it reports one (reprobot)
    tool_wall: float | None = None  # the tool's own reduction time (reprobot: without the
                                    # confirmation runs and the environment pinning)
    note: str = ""
    part: str = "corpus"


def manifest_files(corpus: Path = CORPUS) -> dict[str, Path]:
    """part -> manifest: MANIFEST.json is the corpus; MANIFEST_<part>.json add parts (issue #31's
    floor scripts, and a held-out part no pass is tuned on)."""
    found = {"corpus": corpus / "MANIFEST.json"}
    for path in sorted(corpus.glob("MANIFEST_*.json")):
        found[path.stem.removeprefix("MANIFEST_")] = path
    return found


def load_manifest(corpus: Path = CORPUS, parts: list[str] | None = None) -> list[Entry]:
    out: list[Entry] = []
    for part, path in manifest_files(corpus).items():
        if parts is not None and part not in parts:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        out += [Entry(Path(s["file"]).stem, corpus / s["file"], list(s.get("args", [])),
                      s.get("max_statements"), s.get("ideal_statements"), part) for s in data["scripts"]
                if not s.get("requires")]   # the issue-29 shapes need torch and a launch line
    return out


def example_entry() -> Entry:
    return Entry("cpu_gemma4_lora", EXAMPLE, [], 12, None)


def make_counting_python(real_python: str, counter: Path, where: Path) -> Path:
    """A shell wrapper that counts script runs and then becomes the real interpreter.

    Interpreter probes (`python -c ...`, `python -m ...`, `--version`) are not runs of the script.
    The real interpreter is exec'd, so sys.executable (and multiprocessing children) is the real one.
    """
    wrapper = where / "python-counting"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$1" in -c|-m|-V|--version|-I|-E|-S|-s) ;; *) echo "run $1" >> '
        f"{shlex.quote(str(counter))} ;; esac\n"
        f'exec {shlex.quote(real_python)} "$@"\n', encoding="utf-8")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    counter.write_text("", encoding="utf-8")
    return wrapper


def count_runs(counter: Path) -> int:
    try:
        return sum(1 for line in counter.read_text(encoding="utf-8").splitlines() if line.strip())
    except FileNotFoundError:
        return 0


def run_bounded(cmd: list[str], timeout: float, log: Path, cwd: Path | None = None) -> tuple[int | None, float]:
    """Run a tool in its own process group; on timeout kill the whole group. (returncode|None, wall)."""
    start = time.monotonic()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
            try:
                os.killpg(proc.pid, signal.SIGINT)  # let the tool write its best result
                proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return rc, time.monotonic() - start


def establish_target(entry: Entry, out: Path, python: str) -> Path:
    """signature.json of the script's failure, by reprobot's own first step (uncounted)."""
    cmd = [sys.executable, "-m", "bot", "reduce", str(entry.path), "--no-reduce", "--out", str(out),
           "--python", python]
    if entry.args:
        cmd += ["--", *entry.args]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    found = sorted(out.glob("*/signature.json"))
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{entry.name}: could not establish the failure: {tail[0]}")
    return found[0]


def candidate_timeout(signature_json: Path) -> float:
    """reprobot's own per-candidate timeout, from the original's measured run time."""
    from reducer.failure.oracle import candidate_timeout as derive
    stored = json.loads(signature_json.read_text(encoding="utf-8"))
    walls = [r.get("wall_time", 0.0) for r in stored.get("runs", []) if isinstance(r, dict)]
    return derive(max(walls) if walls else 10.0)


# ---------------------------------------------------------------- the tools

@dataclass
class ToolOutput:
    final: str | None
    note: str = ""
    tool_runs: int | None = None
    tool_wall: float | None = None


@dataclass
class Job:
    entry: Entry
    signature: Path
    wrapper: Path
    workdir: Path
    jobs: int
    limit: float
    cand_timeout: float


def _note(rc: int | None) -> str:
    return "" if rc == 0 else f"exit {rc}" if rc is not None else "killed at the limit"


def run_reprobot(job: Job) -> ToolOutput:
    out = job.workdir / "out"
    cmd = [sys.executable, "-m", "bot", "reduce", str(job.entry.path), "--out", str(out),
           "--python", str(job.wrapper), "--jobs", str(job.jobs), "--max-time", str(job.limit)]
    if job.entry.args:
        cmd += ["--", *job.entry.args]
    # --max-time is reprobot's own bound; the grace covers its final check and the environment pinning.
    rc, _ = run_bounded(cmd, job.limit + 120.0 + 3 * job.cand_timeout, job.workdir / "log.txt")
    repros = sorted(out.glob("*/repro.py"))
    if not repros:
        return ToolOutput(None, _note(rc))
    result = ToolOutput(repros[0].read_text(encoding="utf-8"), _note(rc))
    try:
        stats = json.loads((repros[0].parent / "reduction.json").read_text(encoding="utf-8"))
        result.tool_runs, result.tool_wall = int(stats["runs"]), float(stats["wall_time"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return result


def run_pysource(job: Job) -> ToolOutput:
    best = job.workdir / "best.py"
    shutil.copyfile(job.entry.path, best)
    cmd = [sys.executable, str(Path(__file__).resolve()), "_pysource", "--signature", str(job.signature),
           "--script", str(job.entry.path), "--python", str(job.wrapper),
           "--timeout", str(job.cand_timeout), "--best", str(best)]
    rc, _ = run_bounded(cmd, job.limit, job.workdir / "log.txt")
    return ToolOutput(best.read_text(encoding="utf-8"), _note(rc))


def _shrinkray_is_modern(exe: str) -> bool:
    """Shrink Ray 0.0.x (the newest on Python < 3.12) has no --version and a different CLI."""
    try:
        proc = subprocess.run([exe, "--version"], check=False, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def run_shrinkray(job: Job) -> ToolOutput:
    exe = shutil.which("shrinkray", path=str(Path(sys.executable).parent)) or shutil.which("shrinkray")
    if exe is None:
        return ToolOutput(None, "shrinkray not installed (pip install -e '.[bench]')")
    test = " ".join(shlex.quote(p) for p in [
        sys.executable, str(INTERESTING), "--signature", str(job.signature), "--script",
        str(job.entry.path), "--python", str(job.wrapper), "--timeout", str(job.cand_timeout), "-"])
    target = job.workdir / "best.py"
    shutil.copyfile(job.entry.path, target)
    if _shrinkray_is_modern(exe):
        # Reduces the file in place, writing every improvement; the candidate goes to the test on stdin.
        # --no-llm: the LLM passes download a model (no network here) and are not what is compared
        cmd = [exe, "--no-llm", "--ui", "basic", "--no-history", "--input-type", "stdin", "--formatter", "none",
               "--trivial-is-not-error", "--parallelism", str(job.jobs), "--timeout", str(job.cand_timeout),
               "--backup", str(job.workdir / "original.bak"), test, str(target)]
    else:
        initial = job.workdir / job.entry.path.name
        shutil.copyfile(job.entry.path, initial)
        # Shrink Ray 0.0.x multiplies --timeout by 10 and writes improvements to --target.
        cmd = [exe, "--timeout", str(job.cand_timeout / 10 + 1), "--parallelism", str(job.jobs),
               "--target", str(target), test, str(initial)]
    rc, _ = run_bounded(cmd, job.limit, job.workdir / "log.txt", cwd=job.workdir)
    return ToolOutput(target.read_text(encoding="utf-8"), _note(rc))


RUNNERS: dict[str, Callable[[Job], ToolOutput]] = {
    "reprobot": run_reprobot, "pysource-minimize": run_pysource, "shrinkray": run_shrinkray}


def _pysource_main(argv: list[str]) -> int:
    """Driver run in a subprocess so that the time limit can kill it: the best candidate so far
    is written after every accepted step."""
    from interesting import is_interesting
    from pysource_minimize import minimize

    p = argparse.ArgumentParser(prog="compare.py _pysource")
    p.add_argument("--signature", type=Path, required=True)
    p.add_argument("--script", type=Path, required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--best", type=Path, required=True)
    a = p.parse_args(argv)
    from bot.store import write_text_atomic

    def checker(candidate: str) -> bool:
        ok = is_interesting(candidate, a.signature, a.script, a.python, a.timeout)
        if ok:
            write_text_atomic(a.best, candidate)
        return ok

    result = minimize(a.script.read_text(encoding="utf-8"), checker)
    write_text_atomic(a.best, result)
    return 0


# ---------------------------------------------------------------- the comparison

def _reduce_one(entry: Entry, tool: str, signature: Path, limit: float, jobs: int, workroot: Path,
                python: str, progress: Callable[[str], None]) -> Result:
    original = entry.path.read_text(encoding="utf-8")
    tok0, st0 = count_tokens(original), count_statements(original)
    cand_timeout = candidate_timeout(signature)
    wd = workroot / entry.name / tool
    wd.mkdir(parents=True, exist_ok=True)
    counter = wd / "runs.txt"
    wrapper = make_counting_python(python, counter, wd)
    progress(f"{entry.name}: {tool} (limit {limit:.0f}s) ...")
    start = time.monotonic()
    got = RUNNERS[tool](Job(entry, signature, wrapper, wd, jobs, limit, cand_timeout))
    result = _judge(entry, tool, got, signature, python, cand_timeout, tok0, st0, runs_of=counter,
                    wall=time.monotonic() - start, wd=wd)
    result.part = entry.part
    progress(f"{entry.name}: {tool} {result.status}, {result.runs} runs, {result.wall:.1f}s")
    return result


def _judge(entry: Entry, tool: str, got: ToolOutput, signature: Path, python: str, cand_timeout: float,
           tok0: int, st0: int, runs_of: Path, wall: float, wd: Path) -> Result:
    from interesting import is_interesting

    counter = runs_of
    runs = count_runs(counter)
    if got.final is None:
        return Result(entry.name, tool, "error", tok0, None, st0, None, runs, wall,
                      entry.max_statements, got.tool_runs, got.tool_wall, got.note or "no result")
    (wd / "final.py").write_text(got.final, encoding="utf-8")
    # One more, uncounted run with the real interpreter: does the result still fail the same way?
    same = is_interesting(got.final, signature, entry.path, python, cand_timeout)
    status = "lost" if not same else ("timeout" if "limit" in got.note else "ok")
    try:
        st1: int | None = count_statements(got.final)
    except cst.ParserSyntaxError:
        st1 = None
    return Result(entry.name, tool, status, tok0, count_tokens(got.final), st0, st1, runs, wall,
                  entry.max_statements, got.tool_runs, got.tool_wall, got.note)


def compare(entries: list[Entry], tools: list[str], limit: float, jobs: int, workroot: Path,
            python: str = sys.executable, progress: Callable[[str], None] = print,
            parallel: int = 1) -> list[Result]:
    """Every (script, tool) pair; with parallel > 1, that many pairs at a time (for a machine
    with cores to spare: each pair then competes less for the CPU than it would for one core)."""
    from concurrent.futures import ThreadPoolExecutor

    targets = {e.name: establish_target(e, workroot / e.name / "target", python) for e in entries}
    pairs = [(e, t) for e in entries for t in tools]
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = [pool.submit(_reduce_one, e, t, targets[e.name], limit, jobs, workroot, python, progress)
                   for e, t in pairs]
        return [f.result() for f in futures]


def print_table(results: list[Result]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="reprobot vs pysource-minimize vs Shrink Ray (same test, same run counter)",
                  caption="runs: runs of the script, counted by the wrapper interpreter for every tool "
                          "(in parentheses: reprobot's own count of candidate runs). wall s: the tool's "
                          "whole process (in parentheses: reprobot's own reduction time, without its "
                          "confirmation runs and environment pinning).")
    for col, justify in [("script", "left"), ("tool", "left"), ("status", "left"), ("tokens", "right"),
                         ("statements", "right"), ("bound", "right"), ("runs", "right"), ("wall s", "right"),
                         ("note", "left")]:
        table.add_column(col, justify=justify)
    for r in results:
        toks = f"{r.tokens_before} -> {r.tokens_after if r.tokens_after is not None else '?'}"
        stmts = f"{r.statements_before} -> {r.statements_after if r.statements_after is not None else '?'}"
        runs = str(r.runs) + (f" ({r.tool_runs})" if r.tool_runs is not None and r.tool_runs != r.runs else "")
        wall = f"{r.wall:.1f}" + (f" ({r.tool_wall:.1f})" if r.tool_wall is not None else "")
        table.add_row(r.script + ("" if r.part == "corpus" else f" [{r.part}]"), r.tool, r.status, toks, stmts, str(r.bound or ""), runs, wall, r.note)
    totals = Table(title="totals per part and tool")
    for col in ("part", "tool", "scripts ok", "at/under bound", "final statements", "final tokens", "runs", "wall s"):
        totals.add_column(col, justify="left" if col in ("part", "tool") else "right")
    parts = list(dict.fromkeys(r.part for r in results))
    for part in parts + (["all"] if len(parts) > 1 else []):
        for tool in dict.fromkeys(r.tool for r in results):
            rs = [r for r in results if r.tool == tool and part in ("all", r.part)]
            at = sum(r.bound is not None and r.statements_after is not None and r.statements_after <= r.bound
                     and r.status in ("ok", "timeout") for r in rs)
            totals.add_row(part, tool, f"{sum(r.status in ('ok', 'timeout') for r in rs)}/{len(rs)}",
                           f"{at}/{len(rs)}", str(sum(r.statements_after or r.statements_before for r in rs)),
                           str(sum(r.tokens_after or r.tokens_before for r in rs)),
                           str(sum(r.runs for r in rs)), f"{sum(r.wall for r in rs):.1f}")
    console = Console(width=160)
    console.print(table)
    console.print(totals)


def markdown_table(results: list[Result]) -> str:
    """The same table as Markdown, for bench/README.md."""
    lines = ["| script | tool | status | tokens | statements (bound) | runs | wall s |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        bound = f" ({r.bound})" if r.bound is not None and r.tool == "reprobot" else ""
        runs = str(r.runs) + (f" ({r.tool_runs})" if r.tool_runs is not None else "")
        wall = f"{r.wall:.1f}" + (f" ({r.tool_wall:.1f})" if r.tool_wall is not None else "")
        status = "limit" if r.status == "timeout" else r.status
        lines.append(f"| {r.script} | {r.tool} | {status} | {r.tokens_before} → {r.tokens_after} | "
                     f"{r.statements_before} → {r.statements_after}{bound} | {runs} | {wall} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_pysource"]:
        return _pysource_main(argv[1:])
    p = argparse.ArgumentParser(description="Compare reprobot, pysource-minimize and Shrink Ray on bench/corpus.")
    p.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of {', '.join(TOOLS)}")
    p.add_argument("--scripts", default="", help="comma-separated script names (default: the whole corpus)")
    p.add_argument("--parts", default="", help="comma-separated manifest parts: corpus, floor, heldout (default: all)")
    p.add_argument("--limit", type=float, default=300.0, help="seconds per tool per script (default: 300)")
    p.add_argument("--jobs", type=int, default=1, help="parallel candidates for reprobot and Shrink Ray")
    p.add_argument("--example", action="store_true", help="add the CPU Gemma 4 example (needs the hf extra)")
    p.add_argument("--python", default=sys.executable, help="interpreter that runs the scripts")
    p.add_argument("--workdir", type=Path, default=None, help="keep every tool's files here (default: a temp dir)")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    p.add_argument("--parallel", type=int, default=1,
                   help="(script, tool) pairs run at once; only on a machine with cores to spare")
    a = p.parse_args(argv)

    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        p.error(f"unknown tool(s): {', '.join(unknown)}")
    entries = load_manifest(parts=[x.strip() for x in a.parts.split(",") if x.strip()] or None)
    if a.scripts:
        wanted = {s.strip().removesuffix(".py") for s in a.scripts.split(",")}
        entries = [e for e in entries if e.name in wanted] + ([example_entry()] if "cpu_gemma4_lora" in wanted else [])
        if not entries:
            p.error(f"no such script in the corpus: {a.scripts}")
    if a.example and all(e.name != "cpu_gemma4_lora" for e in entries):
        entries.append(example_entry())

    workroot = a.workdir or Path(tempfile.mkdtemp(prefix="reprobot-bench-"))
    workroot.mkdir(parents=True, exist_ok=True)
    try:
        results = compare(entries, tools, a.limit, a.jobs, workroot, a.python,
                          progress=lambda msg: print(msg, file=sys.stderr, flush=True), parallel=a.parallel)
    except RuntimeError as e:  # a script whose failure cannot be established: one line, no traceback
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    print_table(results)
    if a.markdown:
        print(markdown_table(results))
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n", encoding="utf-8")
    print(f"tool logs and final scripts: {workroot}", file=sys.stderr)
    return 0 if all(r.status in ("ok", "timeout") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
