"""Establish the target failure: the script parses, fails, and fails the same way again."""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import libcst as cst

from reducer.errors import ExitCode, ReprobotError
from reducer.failure.flaky import (DEFAULT_CAP, EARLY, MAX_CANDIDATE_RUNS, SEED_TRIES, Rate, keep_running, seeded_source,
                           too_rare)
from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.failure.ranks import WRAPPER, describe_wrapper, role
from reducer.failure.signature import MatchOptions, Signature, distinct_failures, find_match
from reducer.run.devices import DEVICES_ENV, DeviceUse, read_devices
from reducer.run.gpu import split_sets, visible_value
from reducer.run.launch import LaunchLine
from reducer.run.limits import RunLimits
from reducer.run.raised import RAISED
from reducer.run.runner import Runner, RunSpec


def load_script(path: Path) -> str:
    """The script's text, or a one-line error saying why it cannot be reduced."""
    if not path.exists():
        raise ReprobotError(f"{path}: no such file", ExitCode.FILE_MISSING)
    if not path.is_file():
        raise ReprobotError(f"{path}: not a file", ExitCode.FILE_MISSING)
    raw = path.read_bytes()
    if b"\x00" in raw[:8192]:
        raise ReprobotError(f"{path}: not a Python script (binary file)", ExitCode.NOT_PYTHON)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReprobotError(f"{path}: not a Python script (not UTF-8 text)", ExitCode.NOT_PYTHON) from None
    from reducer.failure.notebook import refuse_json
    refuse_json(path, text)     # JSON compiles as Python (`null` is a name): never run it (issue #43)
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"line {e.lineno}" + (f", column {e.offset}" if e.offset else "")
        raise ReprobotError(f"{path}: does not parse ({where}: {e.msg})", ExitCode.NOT_PYTHON) from None
    except ValueError as e:  # e.g. "source code string cannot contain null bytes"
        raise ReprobotError(f"{path}: does not parse ({e})", ExitCode.NOT_PYTHON) from None
    except (RecursionError, MemoryError):  # Python's own compiler gives up (a 6,000-term expression)
        raise ReprobotError(_too_deep(path), ExitCode.TOO_LARGE) from None
    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        raise ReprobotError(f"{path}: libcst cannot parse it (line {e.raw_line}: {e.message})",
                            ExitCode.NOT_PYTHON) from None
    except (RecursionError, MemoryError):
        raise ReprobotError(_too_deep(path), ExitCode.TOO_LARGE) from None
    check_nesting(text, path)
    return text


# libcst's visitors and code generation recurse once per level of the syntax tree, several Python
# frames a level: a script nested deeper than this crashed the reduction with reprobot's own
# RecursionError (a 600-term sum, 600 levels). A real script nests a few dozen levels.
MAX_NESTING = 100


def nesting_depth(source: str) -> int:
    """The deepest level of ``source``'s syntax tree, counted without recursion; a tree too deep for
    Python's own parser counts as deeper than any cap."""
    try:
        tree = ast.parse(source)
    except (RecursionError, MemoryError):
        return sys.maxsize
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _too_deep(where: object, depth: int | None = None) -> str:
    levels = f"{depth:,} levels" if depth is not None and depth != sys.maxsize else "too many levels"
    return (f"{where}: nested {levels} deep (a long chain such as a 600-term sum, or deeply nested calls): "
            f"over the {MAX_NESTING}-level cap of reprobot's syntax-tree passes; nothing to reduce")


def check_nesting(source: str, where: object = "the script") -> None:
    """One line of error (ExitCode.TOO_LARGE) for a script nested deeper than MAX_NESTING."""
    depth = nesting_depth(source)
    if depth > MAX_NESTING:
        raise ReprobotError(_too_deep(where, depth), ExitCode.TOO_LARGE)


@dataclass
class FailureSpec:
    script: Path
    source: str
    python: str
    args: tuple[str, ...] = ()
    options: MatchOptions = field(default_factory=MatchOptions)
    pick: int = 1
    runs: int = 2
    timeout: float = 900.0
    env: dict[str, str] = field(default_factory=dict)
    gpu: str | None = None
    # GPUs the runs may use (--gpus; None: nothing is pinned). The first run of the original sees
    # all of them; the rest, and every later run, a set of as many as it used.
    gpus: list[str] | None = None
    gpus_per_job: int | None = None    # --gpus-per-job; None: as many as the original used
    clean_env: bool = False
    deadline: float | None = None      # time.monotonic() at which the whole command stops
    limits: RunLimits = field(default_factory=RunLimits)
    launch: LaunchLine | None = None   # torchrun / accelerate launch / python -m (reducer/run/launch.py)
    # runs of a flaky original at most, to measure how often it fails (reducer/failure/flaky.py);
    # a failure that shows in every one of the ``runs`` confirmation runs never gets past those
    flaky_runs: int = DEFAULT_CAP


@dataclass
class GpuPlan:
    """How the original used GPUs, and the one set its failure is judged on.

    ``set`` is CUDA_VISIBLE_DEVICES of the confirmation runs, and later of the warm-vs-cold check
    and the final verification, so a difference in pinning is never taken for anything else.
    ``needs_gpus``: the original, given only the set's first GPU, did not fail the same way (it
    passed, failed differently or hung: ``one_gpu`` says which), so the failure needs that many."""

    set: tuple[str, ...] = ()
    per_job: int = 1
    source: str = "default"            # "measured", "--gpus-per-job", "default" (nothing known)
    measured: dict = field(default_factory=dict)
    needs_gpus: int | None = None
    one_gpu: str | None = None
    one_gpu_hangs: bool = False

    def to_dict(self) -> dict:
        return {"set": list(self.set), "per_job": self.per_job, "source": self.source,
                "measured": self.measured, "needs_gpus": self.needs_gpus, "one_gpu": self.one_gpu,
                "one_gpu_hangs": self.one_gpu_hangs}

    @classmethod
    def from_dict(cls, d: dict | None, gpus: list[str] | None) -> "GpuPlan":
        """As stored; the set is taken again from this run's GPUs (--gpus may differ)."""
        d = d or {}
        per_job = int(d.get("per_job") or 1)
        needs = d.get("needs_gpus")
        return cls(set=split_sets(gpus, per_job)[0] if gpus else (), per_job=per_job,
                   source=str(d.get("source") or "default"), measured=dict(d.get("measured") or {}),
                   needs_gpus=needs if isinstance(needs, int) else None, one_gpu=d.get("one_gpu"),
                   one_gpu_hangs=bool(d.get("one_gpu_hangs")))

    def env(self, count: int | None = None) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": visible_value(self.set[:count] if count else self.set)} if self.set else {}


def plan_gpus(spec: "FailureSpec", use: DeviceUse) -> GpuPlan:
    """A job gets as many GPUs as the original used (``use``, measured in its first run), or
    --gpus-per-job; one when nothing is known."""
    if not spec.gpus:
        return GpuPlan(measured=use.to_dict())
    if spec.gpus_per_job:
        per_job, source = spec.gpus_per_job, "--gpus-per-job"
    elif use.used:
        per_job, source = min(len(use.used), len(spec.gpus)), "measured"
    else:
        per_job, source = 1, "default"
    return GpuPlan(set=split_sets(spec.gpus, per_job)[0], per_job=per_job, source=source,
                   measured=use.to_dict())


@dataclass
class Failure:
    """The failure chosen as the reduction target, with the evidence for it."""

    spec: FailureSpec
    signature: Signature
    record: TracebackRecord
    choices: list[tuple[Signature, TracebackRecord]]
    outcomes: list[Outcome]
    runner: Runner
    # The original reported the target as itself (not only as another exception's context).
    as_itself: bool = False
    gpu: GpuPlan = field(default_factory=GpuPlan)
    # How often the original failed this way (reducer/failure/flaky.py), and the seed that made it
    # deterministic: spec.source stays the user's script; ``source`` (what is reduced) then
    # starts by setting it.
    rate: Rate | None = None
    seed: int | None = None

    @property
    def source(self) -> str:
        """The text the reduction starts from: the script, with the fixed seed when one was found."""
        return self.spec.source if self.seed is None else seeded_source(self.spec.source, self.seed)

    @property
    def flaky(self) -> bool:
        """Fails only in some runs, and no fixed seed changed that: candidates are run to a rate."""
        return self.rate is not None and not self.rate.deterministic and self.seed is None

    @property
    def raised(self) -> bool:
        """The original raised the target (not only printed text that looks like it): a
        candidate must raise it too."""
        return self.record.origin == RAISED

    @property
    def wall_time(self) -> float:
        return max(o.wall_time for o in self.outcomes)

    @property
    def hangs(self) -> bool:
        """The original never exited by itself (it timed out after failing)."""
        return any(o.timed_out for o in self.outcomes)

    @property
    def peak_rss(self) -> int:
        return max(o.peak_rss for o in self.outcomes)


def _describe(outcome: Outcome) -> str:
    if outcome.timed_out:
        return f"timed out after {outcome.wall_time:.0f}s"
    if not outcome.tracebacks:
        return f"exited {outcome.returncode} without a traceback"
    return "failed with " + "; ".join(r.headline.splitlines()[0][:120] for r in outcome.tracebacks[:2])


def _timed_run(runner: Runner, spec: FailureSpec, extra_env: dict[str, str] | None = None,
               timeout: float | None = None) -> Outcome:
    """One run of the original, cut at the command's deadline (which then ends the command)."""
    timeout = spec.timeout if timeout is None else min(timeout, spec.timeout)
    own = timeout
    if spec.deadline is not None:
        left = spec.deadline - time.monotonic()
        if left <= 0:
            raise ReprobotError("stopped at the time limit (--max-time) before the failure was confirmed",
                                ExitCode.TIME_LIMIT)
        timeout = min(timeout, left)
    cap = original_memory_cap()
    outcome = runner.run(spec.source, timeout=timeout, warm=False, max_rss=cap, extra_env=extra_env)
    if outcome.timed_out and timeout < own:
        raise ReprobotError("stopped at the time limit (--max-time) before the failure was confirmed",
                            ExitCode.TIME_LIMIT)
    _refuse_out_of_memory(spec, outcome, cap)
    _refuse_over_limit(spec, outcome)
    return outcome


def _refuse_over_limit(spec: FailureSpec, outcome: Outcome) -> None:
    """A run limit the original itself hits is the machine's guard, not a bug to report upstream."""
    if outcome.limit:
        raise ReprobotError(f"{spec.script}: {outcome.limit.replace('the run hit', 'hit', 1)}; "
                            "nothing to reduce: raise the limit if the script needs that much",
                            ExitCode.RUN_LIMIT)


MEMORY_ENV = "REPROBOT_MAX_RSS"


def original_memory_cap() -> int | None:
    """Resident memory the original may use: $REPROBOT_MAX_RSS (bytes, or with K/M/G suffix),
    else 90% of this machine's memory, so a runaway script is stopped before the kernel starts
    killing processes (reprobot's own among them)."""
    raw = os.environ.get(MEMORY_ENV, "").strip()
    if raw:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)i?b?", raw, re.IGNORECASE)
        if not m:
            raise ReprobotError(f"{MEMORY_ENV}={raw!r}: expected bytes, or a number with K, M or G",
                                ExitCode.USAGE)
        return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()])
    try:
        return int(0.9 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _refuse_out_of_memory(spec: FailureSpec, outcome: Outcome, cap: int | None) -> None:
    """Running out of memory is the machine's problem, not a failure to report upstream."""
    gib = outcome.peak_rss / (1 << 30)
    if outcome.over_memory:
        raise ReprobotError(f"{spec.script}: used more than {cap / (1 << 30):.1f} GiB of memory and was stopped: "
                            f"the machine would run out of memory (set {MEMORY_ENV} to allow more)",
                            ExitCode.OUT_OF_MEMORY)
    python_failures = [r for r in outcome.tracebacks if r.kind != "crash"]
    if outcome.signal == "SIGKILL" and not python_failures:
        raise ReprobotError(f"{spec.script}: killed by SIGKILL without a Python traceback (peak {gib:.1f} GiB): "
                            "most likely the machine ran out of memory and the kernel killed it; "
                            "that is not a bug to report upstream", ExitCode.OUT_OF_MEMORY)


def make_runner(spec: FailureSpec) -> Runner:
    return Runner(RunSpec(script=spec.script, python=spec.python, args=spec.args,
                          timeout=spec.timeout, env=dict(spec.env), gpu=spec.gpu,
                          clean_env=spec.clean_env, limits=spec.limits.resolved(), quota=spec.limits.quota(),
                          launch=spec.launch))


def stored_failure(spec: FailureSpec, signature: Signature, record: TracebackRecord,
                   runs: list[dict], as_itself: bool = False, gpus: dict | None = None,
                   rate: dict | None = None, seed: int | None = None) -> Failure:
    """The failure as an earlier `reduce` established it, trusted without running it again
    (--resume): its signature, the wall time and memory of the runs that confirmed it, and how
    often it failed (a flaky failure resumes flaky; a seeded one from its seeded text)."""
    outcomes = [Outcome(returncode=r.get("returncode"), wall_time=float(r.get("wall_time") or 0.0),
                        stdout="", stderr="", timed_out=bool(r.get("timed_out")),
                        peak_rss=int(r.get("peak_rss") or 0)) for r in runs] or \
        [Outcome(returncode=1, wall_time=spec.timeout / 3, stdout="", stderr="", timed_out=False)]
    return Failure(spec, signature, record, [(signature, record)], outcomes, make_runner(spec), as_itself,
                   GpuPlan.from_dict({**(gpus or {}), **({"per_job": spec.gpus_per_job, "source": "--gpus-per-job"}
                                                         if spec.gpus_per_job else {})}, spec.gpus),
                   rate=Rate.from_dict(rate), seed=None if seed is None else int(seed))


HEARTBEAT = 30.0


@contextlib.contextmanager
def _heartbeat(say: Callable[[str], None], what: str, every: float | None = None) -> Iterator[None]:
    """A line every ``every`` seconds (default HEARTBEAT) while a run of the original goes on."""
    every = every or HEARTBEAT
    done = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            say(f"{what}: still running after {time.monotonic() - t0:.0f}s")

    thread = threading.Thread(target=beat, name="reprobot-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()


def _no_traceback(spec: FailureSpec, outcome: Outcome) -> str:
    """One line: what the script said on its way out (argparse's usage error, a sys.exit message)
    and, when it stopped with an error code, how to give it its arguments."""
    said = [ln.strip() for ln in (outcome.stderr or outcome.stdout).splitlines() if ln.strip()][-2:]
    line = f"{spec.script}: {_how_it_ended(outcome, said)} without any traceback: nothing to reduce"
    if said:
        line += " — it printed: " + " / ".join(s[:200] for s in said)
    if outcome.returncode not in (0, None):
        line += f"; if it needs arguments, pass them after --: reprobot reduce {spec.script.name} -- ARGS"
    else:
        line += ("; if it fails only some of the time, run `reprobot reduce` again (--runs sets how many runs "
                 "must fail)")
    return line


def _how_it_ended(outcome: Outcome, said: list[str]) -> str:
    """Exit 0 ran to completion; argparse's exit 2 after its ``usage:`` lines refused the
    arguments (it did not "complete"); any other status is an exit with that status."""
    code = outcome.returncode
    if code in (0, None):
        return f"ran to completion (exit {code})"
    if code == 2 and any(s.startswith("usage:") or ": error: " in s for s in said):
        return "refused its arguments (argparse's usage error, exit 2)"
    return f"exited with status {code}"


def find_failure(spec: FailureSpec, notify: Callable[[str], None] | None = None) -> Failure:
    """Run the original until its failure is established (``spec.runs`` matching runs; when one
    of them does not match, until its rate is measured in ``spec.flaky_runs`` runs);
    ``notify`` hears one line before each run and one every 30 s while it goes on, so a long or
    hanging script is not silent."""
    runner = make_runner(spec)
    say = notify or (lambda _msg: None)
    say(f"running {spec.script.name} (run 1 of {spec.runs}, up to {spec.timeout:.0f}s"
        + (f", GPUs {visible_value(spec.gpus)}" if spec.gpus else "") + ")")
    with _heartbeat(say, spec.script.name) if notify else contextlib.nullcontext():
        first, use = _measured_run(runner, spec)
    choices = distinct_failures(first, spec.options)
    if not choices:
        if first.timed_out and first.timeout_reason != "wall clock":
            raise ReprobotError(f"{spec.script}: hung ({first.timeout_reason}) without another failure",
                                ExitCode.TIMEOUT)
        if first.timed_out:
            raise ReprobotError(f"{spec.script}: timed out after {spec.timeout:.0f}s without a traceback "
                                f"(raise --timeout, or make it fail sooner)", ExitCode.TIMEOUT)
        raise ReprobotError(_no_traceback(spec, first), ExitCode.NO_FAILURE)
    if not 1 <= spec.pick <= len(choices):
        raise ReprobotError(f"--pick {spec.pick}: the run showed {len(choices)} distinct "
                            f"failure{'s' if len(choices) > 1 else ''}", ExitCode.USAGE)
    signature, record = choices[spec.pick - 1]
    if role(record) == WRAPPER:
        raise ReprobotError(f"{spec.script}: {describe_wrapper(record)}; the child's own traceback is not in "
                            f"the output (let the child print it, or run it without the pool)",
                            ExitCode.NO_FAILURE)
    plan = plan_gpus(spec, use)
    outcomes = [first]
    # The confirmation runs see the set every later run will see; when that is not what run 1
    # saw, at least one of them runs whatever --runs says.
    runs = max(spec.runs, 2) if plan.set and plan.set != tuple(spec.gpus or ()) else spec.runs
    on = f" on GPU{'s' if len(plan.set) > 1 else ''} {visible_value(plan.set)}" if plan.set else ""
    hits = [True]
    n = 1
    while keep_running(sum(hits), len(hits), runs, spec.flaky_runs):
        n += 1
        upto = runs if all(hits) else f"{max(runs, spec.flaky_runs)}, measuring how often it fails"
        say(f"confirming the failure (run {n} of {upto}{on}, {first.wall_time:.0f}s the first time)")
        with _heartbeat(say, spec.script.name) if notify else contextlib.nullcontext():
            again = _timed_run(runner, spec, plan.env())
        hit = find_match(again.tracebacks, signature, spec.options, raised=record.origin == RAISED) is not None
        if hit:
            outcomes.append(again)
        hits.append(hit)
        if not hit and plan.set and plan.set != tuple(spec.gpus or ()):
            # Not flakiness to measure: run 1 saw other GPUs than the rest will.
            hint = (f" (run 1 saw GPUs {visible_value(spec.gpus or [])}, run {n} only {visible_value(plan.set)}, "
                    f"{plan.per_job} per job [{plan.source}]: --gpus-per-job {len(spec.gpus or [])} gives every "
                    f"run all of them)")
            raise ReprobotError(f"{spec.script}: flaky: run 1 failed with {signature.one_line()[:150]} "
                                f"but run {n} {_describe(again)}{hint}", ExitCode.FLAKY)
    rate = Rate(sum(hits), len(hits))
    seed = _seed_if_flaky(runner, spec, signature, record, plan, outcomes, rate, say)
    as_itself = all(find_match(o.tracebacks, signature, spec.options, as_itself=True,
                               raised=record.origin == RAISED) is not None
                    for o in outcomes)
    failure = Failure(spec, signature, record, choices, outcomes, runner, as_itself, plan,
                      rate=rate, seed=seed)
    if len(plan.set) >= 2:
        say(f"checking whether it fails on one GPU ({plan.set[0]} of {visible_value(plan.set)})")
        check_one_gpu(failure)
    return failure


def _seed_if_flaky(runner: Runner, spec: FailureSpec, signature: Signature, record: TracebackRecord,
                   plan: GpuPlan, outcomes: list[Outcome], rate: Rate, say: Callable[[str], None]) -> int | None:
    """A flaky original: the seed that makes it fail every time, or None; too rare to reduce
    is one line and exit 7."""
    if rate.deterministic:
        return None
    say(f"{spec.script.name} {rate.words()}: trying fixed seeds")
    seed = _deterministic_seed(runner, spec, signature, record, plan, outcomes)
    if seed is not None:
        # spec.source stays the user's script (original.py); Failure.source is what is reduced
        say(f"with random seed {seed} it fails every time: reducing that")
    elif too_rare(rate.value):
        raise ReprobotError(
            f"{spec.script}: flaky: {rate.words()} ({rate.value:.0%}), with fixed seeds too: too rare to "
            f"reduce (each candidate would need over {MAX_CANDIDATE_RUNS} runs); make it fail more often, "
            f"or raise --runs to measure the rate better", ExitCode.FLAKY)
    return seed


# After a clean pass elsewhere (the warm check), this many more cold runs decide between "flaky"
# and "the warm start changes it": a script that fails half the time fails 2 + 3 runs in a row
# once in 32.
RECHECK_RUNS = 3


def remeasure(failure: Failure, say: Callable[[str], None] | None = None) -> Failure | None:
    """A run of the original passed where every confirmation run failed: evidence about the
    failure's rate before it is evidence about anything else. Run it cold ``RECHECK_RUNS`` more
    times; when all of them fail too, None (the pass came from what differed, e.g. a warm start).
    When one passes, the rate is measured as for any flaky original (to ``--runs``/the cap, then
    the seeds) and the failure comes back with it."""
    say = say or (lambda _msg: None)
    spec, runner = failure.spec, failure.runner
    raised = failure.record.origin == RAISED
    outcomes = list(failure.outcomes)
    hits = [True] * len(outcomes)

    def one_more(n: int) -> bool:
        say(f"a clean pass: running {spec.script.name} cold again (run {n}), to tell flakiness from a warm-start "
            f"difference")
        again = _timed_run(runner, spec, failure.gpu.env())
        hit = find_match(again.tracebacks, failure.signature, spec.options, raised=raised) is not None
        if hit:
            outcomes.append(again)
        hits.append(hit)
        return hit

    if all(one_more(len(hits) + 1) for _ in range(RECHECK_RUNS)):
        return None
    while len(hits) < max(spec.runs, spec.flaky_runs):
        one_more(len(hits) + 1)
    rate = Rate(sum(hits), len(hits))
    seed = _seed_if_flaky(runner, spec, failure.signature, failure.record, failure.gpu, outcomes, rate, say)
    return dataclasses.replace(failure, outcomes=outcomes, rate=rate, seed=seed)


def _deterministic_seed(runner: Runner, spec: FailureSpec, signature: Signature, record: TracebackRecord,
                        plan: GpuPlan, outcomes: list[Outcome]) -> int | None:
    """A seed under which the original fails EARLY runs of EARLY; a seed whose first run
    does not fail is dropped after that one run."""
    for seed in range(SEED_TRIES):
        source = seeded_source(spec.source, seed)
        seen = []
        for _ in range(EARLY):
            outcome = runner.run(source, timeout=spec.timeout, warm=False, extra_env=plan.env())
            if find_match(outcome.tracebacks, signature, spec.options, raised=record.origin == RAISED) is None:
                break
            seen.append(outcome)
        if len(seen) == EARLY:
            outcomes[:] = seen
            return seed
    return None


def _measured_run(runner: Runner, spec: FailureSpec) -> tuple[Outcome, DeviceUse]:
    """Run 1 of the original, with every GPU of --gpus visible, recording which it used."""
    fd, name = tempfile.mkstemp(prefix="reprobot-devices-", suffix=".jsonl")
    os.close(fd)
    path = Path(name)
    try:
        env = {DEVICES_ENV: str(path)}
        if spec.gpus:
            env["CUDA_VISIBLE_DEVICES"] = visible_value(spec.gpus)
        outcome = _timed_run(runner, spec, env)
        return outcome, read_devices(path)
    finally:
        path.unlink(missing_ok=True)


def fails_on_one_gpu(failure: Failure, outcome: Outcome) -> bool:
    return find_match(outcome.tracebacks, failure.signature, failure.spec.options, raised=failure.raised) is not None


def check_one_gpu(failure: Failure) -> None:
    """Run the original once more with only the set's first GPU visible. Unless it fails the
    same way there, the failure needs the whole set: ``failure.gpu.needs_gpus``."""
    from reducer.failure.oracle import candidate_timeout
    plan = failure.gpu
    outcome = _timed_run(failure.runner, failure.spec, plan.env(1), timeout=candidate_timeout(failure.wall_time))
    if fails_on_one_gpu(failure, outcome):
        plan.needs_gpus, plan.one_gpu, plan.one_gpu_hangs = None, "fails the same way", False
        return
    plan.needs_gpus = len(plan.set)
    plan.one_gpu = _describe(outcome) if outcome.tracebacks or outcome.timed_out else (
        "passes" if outcome.returncode == 0 else _describe(outcome))
    plan.one_gpu_hangs = outcome.timed_out
