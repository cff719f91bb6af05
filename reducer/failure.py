"""Establish the target failure: the script parses, fails, and fails the same way again."""
from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import libcst as cst

from reducer.errors import ExitCode, ReprobotError
from reducer.launch import LaunchLine
from reducer.limits import RunLimits
from reducer.outcome import Outcome, TracebackRecord
from reducer.raised import RAISED
from reducer.ranks import WRAPPER, describe_wrapper, role
from reducer.runner import Runner, RunSpec
from reducer.signature import MatchOptions, Signature, distinct_failures, find_match


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
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"line {e.lineno}" + (f", column {e.offset}" if e.offset else "")
        raise ReprobotError(f"{path}: does not parse ({where}: {e.msg})", ExitCode.NOT_PYTHON) from None
    except ValueError as e:  # e.g. "source code string cannot contain null bytes"
        raise ReprobotError(f"{path}: does not parse ({e})", ExitCode.NOT_PYTHON) from None
    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        raise ReprobotError(f"{path}: libcst cannot parse it (line {e.raw_line}: {e.message})",
                            ExitCode.NOT_PYTHON) from None
    return text


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
    clean_env: bool = False
    deadline: float | None = None      # time.monotonic() at which the whole command stops
    limits: RunLimits = field(default_factory=RunLimits)
    launch: LaunchLine | None = None   # torchrun / accelerate launch / python -m (reducer/launch.py)


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


def _timed_run(runner: Runner, spec: FailureSpec) -> Outcome:
    """One run of the original, cut at the command's deadline (which then ends the command)."""
    timeout = spec.timeout
    if spec.deadline is not None:
        left = spec.deadline - time.monotonic()
        if left <= 0:
            raise ReprobotError("stopped at the time limit (--max-time) before the failure was confirmed",
                                ExitCode.TIME_LIMIT)
        timeout = min(timeout, left)
    cap = original_memory_cap()
    outcome = runner.run(spec.source, timeout=timeout, warm=False, max_rss=cap)
    if outcome.timed_out and timeout < spec.timeout:
        raise ReprobotError("stopped at the time limit (--max-time) before the failure was confirmed",
                            ExitCode.TIME_LIMIT)
    _refuse_out_of_memory(spec, outcome, cap)
    return outcome


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
                          clean_env=spec.clean_env, limits=spec.limits.resolved(), launch=spec.launch))


def stored_failure(spec: FailureSpec, signature: Signature, record: TracebackRecord,
                   runs: list[dict], as_itself: bool = False) -> Failure:
    """The failure as an earlier `reduce` established it, trusted without running it again
    (--resume): its signature, and the wall time and memory of the runs that confirmed it."""
    outcomes = [Outcome(returncode=r.get("returncode"), wall_time=float(r.get("wall_time") or 0.0),
                        stdout="", stderr="", timed_out=bool(r.get("timed_out")),
                        peak_rss=int(r.get("peak_rss") or 0)) for r in runs] or \
        [Outcome(returncode=1, wall_time=spec.timeout / 3, stdout="", stderr="", timed_out=False)]
    return Failure(spec, signature, record, [(signature, record)], outcomes, make_runner(spec), as_itself)


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


def find_failure(spec: FailureSpec, notify: Callable[[str], None] | None = None) -> Failure:
    """Run the original until its failure is established (``spec.runs`` matching runs);
    ``notify`` hears one line before each run and one every 30 s while it goes on, so a long or
    hanging script is not silent."""
    runner = make_runner(spec)
    say = notify or (lambda _msg: None)
    say(f"running {spec.script.name} (run 1 of {spec.runs}, up to {spec.timeout:.0f}s)")
    with _heartbeat(say, spec.script.name) if notify else contextlib.nullcontext():
        first = _timed_run(runner, spec)
    choices = distinct_failures(first, spec.options)
    if not choices:
        if first.timed_out and first.timeout_reason != "wall clock":
            raise ReprobotError(f"{spec.script}: hung ({first.timeout_reason}) without another failure",
                                ExitCode.TIMEOUT)
        if first.timed_out:
            raise ReprobotError(f"{spec.script}: timed out after {spec.timeout:.0f}s without a traceback "
                                f"(raise --timeout, or make it fail sooner)", ExitCode.TIMEOUT)
        raise ReprobotError(f"{spec.script}: ran to completion (exit {first.returncode}) without any "
                            f"traceback: nothing to reduce (if it fails only some of the time, run "
                            f"`reprobot reduce` again; --runs sets how many runs must fail)", ExitCode.NO_FAILURE)
    if not 1 <= spec.pick <= len(choices):
        raise ReprobotError(f"--pick {spec.pick}: the run showed {len(choices)} distinct "
                            f"failure{'s' if len(choices) > 1 else ''}", ExitCode.USAGE)
    signature, record = choices[spec.pick - 1]
    if role(record) == WRAPPER:
        raise ReprobotError(f"{spec.script}: {describe_wrapper(record)}; the child's own traceback is not in "
                            f"the output (let the child print it, or run it without the pool)",
                            ExitCode.NO_FAILURE)
    outcomes = [first]
    for n in range(2, spec.runs + 1):
        say(f"confirming the failure (run {n} of {spec.runs}, {first.wall_time:.0f}s the first time)")
        with _heartbeat(say, spec.script.name) if notify else contextlib.nullcontext():
            again = _timed_run(runner, spec)
        outcomes.append(again)
        if find_match(again.tracebacks, signature, spec.options, raised=record.origin == RAISED) is None:
            raise ReprobotError(f"{spec.script}: flaky: run 1 failed with {signature.one_line()[:150]} "
                                f"but run {n} {_describe(again)}", ExitCode.FLAKY)
    as_itself = all(find_match(o.tracebacks, signature, spec.options, as_itself=True,
                               raised=record.origin == RAISED) is not None
                    for o in outcomes)
    return Failure(spec, signature, record, choices, outcomes, runner, as_itself)
