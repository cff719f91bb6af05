"""Run one candidate in the user's interpreter and capture what happened as an Outcome.

Each run gets a fresh scratch copy of the script's directory (so relative paths and
sibling imports work, and no candidate can lean on files an earlier one left behind),
its own TMPDIR, a timeout that kills the whole process group, bounded output, and
PYTHONFAULTHANDLER=1 so hard crashes leave a Python stack.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from reducer.run.launch import LaunchLine

from reducer.errors import ExitCode, ReprobotError
from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.failure.tracebacks import HANG_ENV, hang_record, parse_tracebacks
from reducer.run.guard import RunGuard, enter as enter_cgroup, file_limit_text
from reducer.run.guard import remove_stale as remove_stale_cgroups
from reducer.run.home import HOME_DIR, make_home, run_home_environment, user_caches
from reducer.run.limits import Quota, RunLimits, apply_limits
from reducer.run.processes import kill_group, pids, resolve_python, script_argument
from reducer.run.raised import EXCEPTIONS_ENV, hook_environment, mark, read_raised
from reducer.run.rank_launch import RANKS_ENV, warm_plan, write_launcher as write_rank_launcher
from reducer.run.rendezvous import PORTS, RENDEZVOUS_ENV, needs_rendezvous, run_environment

# Directories never copied into a scratch dir: they are big, or they are ours.
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache",
              ".pytest_cache", "node_modules", "repros", ".hypothesis", ".ipynb_checkpoints"}
# Files above this size are symlinked into the scratch dir rather than copied
# (model weights, datasets): copying them per candidate would dominate run time.
_LINK_ABOVE_BYTES = 4 * 1024 * 1024
_MAX_COPIED_FILES = 2000
_OUTPUT_HEAD = 256 * 1024
_OUTPUT_TAIL = 1024 * 1024
# A collective that timed out is a hang seen by a watchdog, not a bug's signature: the
# same script hangs at whichever collective it reaches first.
_NCCL_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout|NCCL.*tim(ed|ing) out", re.IGNORECASE)


@dataclass
class RunSpec:
    script: Path
    python: str = sys.executable
    args: tuple[str, ...] = ()
    timeout: float = 600.0
    env: dict[str, str] = field(default_factory=dict)
    gpu: str | None = None
    # Replace the inherited environment instead of extending it (the Action passes an
    # allow-listed environment so the user's script never sees a secret).
    clean_env: bool = False
    # rlimits of every run (reducer/run/limits.py): resolved once, so all runs get the same ones
    limits: dict[str, int] = field(default_factory=lambda: RunLimits().resolved())
    # what the runner watches and stops a run at: processes at once, disk (reducer/run/guard.py)
    quota: Quota = field(default_factory=Quota)
    # A launch line (torchrun, accelerate launch, python -m): every run runs it with the
    # candidate in the script's place (reducer/run/launch.py).
    launch: "LaunchLine | None" = None
    # Each run gets its own rendezvous port (reducer/run/rendezvous.py); None: decided from the script.
    rendezvous: bool | None = None


class _BoundedBuffer:
    """Keeps the first and last bytes of a stream; the middle is dropped with a marker.

    Tracebacks are at the end of an uncaught failure and anywhere for a logged one, so
    both ends are kept; a script that prints gigabytes cannot exhaust our memory.
    """

    def __init__(self, head: int = _OUTPUT_HEAD, tail: int = _OUTPUT_TAIL) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.lock = threading.Lock()
        self.version = 0

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self.version += 1
            room = self.head_limit - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                excess = len(self.tail) - self.tail_limit
                if excess > 0:
                    del self.tail[:excess]
                    self.dropped += excess

    def text(self) -> str:
        with self.lock:
            head = bytes(self.head).decode("utf-8", "replace")
            tail = bytes(self.tail).decode("utf-8", "replace")
            if self.dropped:
                return f"{head}\n[... reprobot: {self.dropped} bytes of output elided ...]\n{tail}"
            return head + tail


def _pump(stream, buf: _BoundedBuffer) -> None:
    for chunk in iter(lambda: stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536), b""):
        buf.feed(chunk)
    stream.close()


class _ColdChild:
    """A candidate started by Popen: `python script.py`."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.pid = proc, proc.pid

    def wait(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode


def group_usage(pgid: int) -> tuple[int, float]:
    """Resident memory (bytes) and CPU time so far (seconds) of every live process in a process
    group (Linux /proc; nothing elsewhere)."""
    rss, cpu = 0, 0.0
    for entry in pids():
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
            # Fields after the parenthesised command name: state ppid pgrp ...; utime and stime
            # are fields 14 and 15, rss field 24.
            fields = stat[stat.rindex(b")") + 2:].split()
            if int(fields[2]) != pgid:
                continue
            rss += int(fields[21]) * _PAGE
            cpu += (int(fields[11]) + int(fields[12])) / _TICKS
        except (OSError, ValueError, IndexError):
            continue
    return rss, cpu


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MEMORY_POLL = 0.25

# Set when the reduction stops early (Ctrl-C, SIGTERM, --max-time): every run in flight, in
# any thread, kills its process group at once instead of running to its own end.
_STOP_ALL = threading.Event()


# Every run's environment carries its own tag. A process the run started that left its group
# (setsid, a double-forked daemon) still inherits it, so it can be found and killed when the
# run ends, wherever it was reparented.
RUN_TAG_ENV = "REPROBOT_RUN_TAG"


_PF_EXITING = 0x4


def _may_carry(name: int, ticks: int) -> bool:
    """Whether process ``name`` could carry a tag made at ``ticks`` (clock ticks since boot, as
    /proc/PID/stat's starttime counts them): it started since, and it is not already exiting
    (reading an exiting process's environment waits until the kernel has torn its memory down).
    True when its stat line cannot be read."""
    try:
        with open(f"/proc/{name}/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rindex(b")") + 2:].split()
        return int(fields[19]) >= ticks and not int(fields[6]) & _PF_EXITING
    except (OSError, ValueError, IndexError):
        return True


def boot_ticks() -> int | None:
    """Now, in the clock ticks since boot that /proc/PID/stat's starttime uses (None off Linux)."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    if clock is None or not hasattr(os, "sysconf"):
        return None
    try:
        return int(time.clock_gettime(clock) * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None


def _tagged_processes(since: int | None = None) -> Iterator[tuple[int, str]]:
    """(pid, run tag) of every process we can read that carries a run tag. ``since``: only
    processes started at or after that many ticks since boot (``boot_ticks``) that are not
    exiting. A run's tag is new, so no process older than the run can carry it, and one that is
    exiting needs no kill; reading the environment of every process on a busy machine is slow
    (each read waits for that process's memory map lock), and the stat line is cheap."""
    prefix = f"{RUN_TAG_ENV}=".encode()
    me = os.getpid()
    for name in pids():  # no /proc (macOS): the process group kill is all there is
        if name == me or (since is not None and not _may_carry(name, since)):
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(prefix):
                yield int(name), item[len(prefix):].decode("ascii", "replace")
                break


def _child_setup(limits: dict[str, int], cgroup_procs: str | None) -> Callable[[], None] | None:
    """What a cold run's child does between fork and exec: enter the run's pids cgroup, then
    set its rlimits."""
    if not limits and not cgroup_procs:
        return None

    def setup() -> None:
        enter_cgroup(cgroup_procs)
        apply_limits(limits)
    return setup


def _killed(pid: int) -> bool:
    """SIGKILL one process (it left its run's group, so a group kill does not reach it)."""
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except OSError:
        return False


def kill_tagged(tag: str, since: int | None = None) -> int:
    """SIGKILL every process whose environment holds this run's tag; how many. ``since``: when
    the run started (``boot_ticks``), to look only at processes started since."""
    return sum(_killed(pid) for pid, found in _tagged_processes(since) if found == tag)


def reap_leftovers() -> int:
    """Kill what an earlier reprobot that was itself killed (SIGKILL, a crash) left running: its
    runs' tags name its pid, and that pid is gone. How many were killed. Its runs' pids cgroups
    are emptied and removed too."""
    remove_stale_cgroups()
    killed = 0
    for pid, tag in _tagged_processes():
        owner = tag.split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid():
            continue
        try:
            os.kill(int(owner), 0)
            continue  # that reprobot is still running
        except ProcessLookupError:
            pass
        except OSError:
            continue
        killed += _killed(pid)
    return killed


def stop_runs_in_flight() -> None:
    _STOP_ALL.set()


def stop_requested() -> bool:
    """Whether the reduction is stopping (a runner elsewhere stops its runs in flight too)."""
    return _STOP_ALL.is_set()


def allow_runs() -> None:
    _STOP_ALL.clear()


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


# What "offline" means to the Hugging Face libraries: the Hub is never asked, only the cache.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def alone_environment(env: dict[str, str], source: str) -> dict[str, str]:
    """A run's environment as a maintainer's would be: offline, without the variables the
    script reads (they point at the user's files), reprobot's own run variables kept."""
    from reducer.analysis.artefacts import env_names
    out = {k: v for k, v in env.items() if k not in env_names(source) or k in _RUN_VARIABLES}
    out.update(OFFLINE_ENV)
    # nor the run-time rendezvous patch (reducer/run/rendezvous.py), which gives a run a port
    # and a file of its own: a repro that runs only with it (a file:// path a reduction emptied)
    # is not one a maintainer can run
    out.pop(RENDEZVOUS_ENV, None)
    return out


_RUN_VARIABLES = {"TMPDIR", "TEMP", "TMP", "PYTHONPATH", "PATH", "HOME", "CUDA_VISIBLE_DEVICES", RUN_TAG_ENV,
                  EXCEPTIONS_ENV}


# What a traced run of a launch line gives every interpreter of the run (reducer/analysis/trace.py's
# launcher, exception_hook/sitecustomize.py): not imported, reducer.analysis.trace needs libcst.
_TRACE_OUT, _TRACE_LAUNCHER, _TRACE_SCRIPT = "REPROBOT_TRACE_OUT", "REPROBOT_TRACE_LAUNCHER", "REPROBOT_TRACE_SCRIPT"

_DUMP_WAIT = 1.0     # seconds the processes of a hung run get to write their stacks


# Above this share of one core while quiet, a run is spinning; a sleeping or blocked loop uses
# about none. Low enough that a busy loop on a loaded 2-core machine still reads as spinning.
SPIN_SHARE = 0.25


def _spinning(cpu_seconds: float, quiet_seconds: float) -> bool:
    return quiet_seconds > 0 and cpu_seconds / quiet_seconds >= SPIN_SHARE


def dump_stacks(pgid: int) -> None:
    """SIGUSR1 to every process of the group, its children before its leader, so that their
    faulthandler dumps (reducer/run/exception_hook) do not interleave on the shared stderr."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit() and int(entry) != pgid:
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid:
                    members.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    for pid in [*sorted(members), pgid]:
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            pass
        time.sleep(0.1)


class Runner:
    """Runs candidates of one script. Thread-safe: each run has its own scratch dir.

    With ``zygotes`` (reducer/run/zygote.py), plain runs are forked from a warm interpreter that
    already imported the script's stack; everything else about the run is the same."""

    def __init__(self, spec: RunSpec, zygotes: "ZygotePool | None" = None) -> None:
        if not spec.script.is_file():
            raise ReprobotError(f"{spec.script}: no such file", ExitCode.FILE_MISSING)
        self.spec = spec
        self.python = resolve_python(spec.python)
        launch = spec.launch
        self.script_dir = launch.root.resolve() if launch is not None else spec.script.resolve().parent
        # where the candidate goes, relative to the run's cwd (a package's module for python -m)
        self.script_rel = launch.relpath if launch is not None else spec.script.name
        if spec.rendezvous is None:
            try:
                text = spec.script.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            spec.rendezvous = (launch is not None and launch.needs_launcher) or needs_rendezvous(text)
        self._files = self._scan()
        # Where the user's caches are (the HF cache, torch hub...), read before any run's HOME
        # moves into its scratch folder (reducer/run/home.py).
        self.caches = user_caches({**({} if spec.clean_env else os.environ), **spec.env})
        self.zygotes = zygotes
        # A one-node torchrun line whose ranks a warm run can start (reducer/run/rank_launch.py).
        self.rank_plan = warm_plan(launch) if launch is not None and launch.needs_launcher else None
        self.warm_runs = 0
        self.warm_fallbacks = 0

    def _scan(self) -> list[tuple[Path, bool]]:
        """The script directory's files (relative path, symlink-instead-of-copy?), once."""
        files: list[tuple[Path, bool]] = []
        for root, dirs, names in os.walk(self.script_dir):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".reprobot"))
            for name in sorted(names):
                full = Path(root, name)
                rel = full.relative_to(self.script_dir)
                try:
                    big = full.stat().st_size > _LINK_ABOVE_BYTES
                except OSError:
                    continue
                files.append((rel, big))
                if len(files) > _MAX_COPIED_FILES:
                    # A script living in a huge tree (home dir, repo root): copying it per run
                    # would be wrong and slow. Link the top-level entries instead.
                    return [(Path(p.name), True) for p in sorted(self.script_dir.iterdir())
                            if p.name not in _SKIP_DIRS]
        return files

    def _make_scratch(self, keep_dir: Path | None, alone: bool = False) -> Path:
        scratch = Path(tempfile.mkdtemp(prefix="reprobot-run-")) if keep_dir is None else keep_dir
        work = scratch / "work"
        work.mkdir(parents=True, exist_ok=True)
        (scratch / "tmp").mkdir(exist_ok=True)
        make_home(scratch)
        for rel, link in ([] if alone else self._files):
            dst = work / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            src = self.script_dir / rel
            if link:
                dst.symlink_to(src)
            else:
                try:
                    shutil.copy2(src, dst)
                except OSError:
                    continue
        return scratch

    @property
    def launched(self) -> bool:
        """Runs go through a launcher (torchrun, accelerate launch, python -m): cold, except a
        one-node torchrun or accelerate launch line's when the runner has warm interpreters
        (``rank_plan``)."""
        return self.spec.launch is not None and self.spec.launch.needs_launcher

    def base_environment(self) -> dict[str, str]:
        """The environment every run shares (what a warm interpreter starts with)."""
        env = self._environment(Path(tempfile.gettempdir()), None)
        # the user's caches as every run sees them; the zygote gives itself a home of its own
        env.update({k: v for k, v in self.caches.items() if k not in env})
        for k in ("TMPDIR", "TEMP", "TMP", RUN_TAG_ENV, EXCEPTIONS_ENV):
            env.pop(k, None)
        if self.rank_plan is not None and self.rank_plan.nproc > 1:
            # torchrun's ranks run with one OpenMP thread unless told otherwise; torch reads it on import
            env.setdefault("OMP_NUM_THREADS", "1")
        return env

    def _environment(self, scratch: Path, extra_env: dict[str, str] | None) -> dict[str, str]:
        env = {} if self.spec.clean_env else dict(os.environ)
        env.update(self.spec.env)
        env.update(extra_env or {})
        tmp = str(scratch / "tmp")
        env.update({
            "PYTHONFAULTHANDLER": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "TMPDIR": tmp, "TEMP": tmp, "TMP": tmp,
            RUN_TAG_ENV: f"{os.getpid()}-{uuid.uuid4().hex}",
            # Rich and tqdm decorate tracebacks and progress bars when they see a terminal.
            "TERM": "dumb", "NO_COLOR": "1",
        })
        env.pop("PYTHONSTARTUP", None)
        if self.spec.rendezvous:
            env[RENDEZVOUS_ENV] = "1"
        hook_environment(env, scratch / "exceptions.jsonl")
        if self.spec.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.spec.gpu
        return env

    def run(self, source: str, *, launcher: list[str] | None = None,
            extra_env: dict[str, str] | None = None, timeout: float | None = None,
            stop_when: Callable[[list[TracebackRecord]], bool] | None = None,
            keep_dir: Path | None = None, max_rss: int | None = None,
            stop_grace: float = 2.0, warm: bool | None = None, alone: bool = False,
            cancel: threading.Event | None = None) -> Outcome:
        """Warm when the runner has warm interpreters, except: ``warm=False`` forces a cold run,
        and a run with a launcher is cold unless ``warm=True`` says the launcher is a script
        (interpreter flags such as ``-S`` cannot be forked from a running interpreter).

        ``alone``: the way a maintainer runs a repro (always cold): ``repro.py`` by itself in an
        empty folder, the Hub offline, and none of the environment variables it names (a
        maintainer has no ``DATA_DIR`` of the user's).

        ``cancel``: the run stops (its group killed) once it is set: the search sets it when a
        run made ahead can no longer be needed (the best changed under it)."""
        timeout = self.spec.timeout if timeout is None else timeout
        scratch = self._make_scratch(keep_dir, alone)
        port = PORTS.acquire() if self.spec.rendezvous else None
        try:
            target = scratch / "work" / ("repro.py" if alone else self.script_rel)
            if target.is_symlink():
                target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source, encoding="utf-8")
            if port is not None:
                inherited = {**({} if self.spec.clean_env else os.environ), **self.spec.env, **(extra_env or {})}
                extra_env = {**(extra_env or {}), **run_environment(port, inherited)}
            env = self._environment(scratch, extra_env)
            if alone:
                env = alone_environment(env, source)
                warm = False
            # HOME and the XDG folders in the scratch folder, after ``alone`` removed what the
            # script names: a candidate's ~/.bashrc is the scratch's, never the user's
            env = run_home_environment(env, scratch / HOME_DIR, self.caches)
            if self.launched:
                # The same launch line for every run; its ranks start their own interpreters.
                rel = target.relative_to(scratch / "work").as_posix()
                if launcher and _TRACE_OUT in env:
                    # A traced run: the line's ranks trace themselves (exception_hook/sitecustomize.py
                    # runs the trace launcher in child mode in every interpreter that sees these).
                    env[_TRACE_LAUNCHER] = os.path.abspath(launcher[0])
                    env[_TRACE_SCRIPT] = os.path.abspath(target)
                if self.zygotes is not None and self.rank_plan is not None and warm is not False:
                    env[RANKS_ENV] = self.rank_plan.to_json()
                    cmd = [self.python, str(write_rank_launcher(scratch)), script_argument(rel), *self.spec.launch.args]
                    # the candidate's leading environment settings pick the zygote, as for a
                    # script run alone: its ranks are served from that image (a script that sets
                    # HF_HUB_OFFLINE before importing torch otherwise got an image without torch)
                    outcome = self._warm(cmd, scratch / "work", env, timeout, stop_when, max_rss, stop_grace,
                                         cancel=cancel, source=source)
                    if outcome is not None:
                        return outcome
                    env.pop(RANKS_ENV, None)
                cmd = self.spec.launch.command(self.python, script_argument(rel), port)
                return self._execute(cmd, scratch / "work", env, timeout, stop_when, max_rss, stop_grace, cancel=cancel)
            cmd = [self.python, *(launcher or []), script_argument(target.name), *self.spec.args]
            if self.zygotes is not None and (warm or (warm is None and launcher is None)):
                outcome = self._warm(cmd, scratch / "work", env, timeout, stop_when, max_rss, stop_grace, cancel=cancel,
                                     source=source)
                if outcome is not None:
                    return outcome
            return self._execute(cmd, scratch / "work", env, timeout, stop_when, max_rss, stop_grace, cancel=cancel)
        finally:
            if port is not None:
                PORTS.release(port)
            if keep_dir is None:
                shutil.rmtree(scratch, ignore_errors=True)

    def _warm(self, cmd: list[str], cwd: Path, env: dict[str, str], timeout: float,
              stop_when: Callable[[list[TracebackRecord]], bool] | None, max_rss: int | None,
              stop_grace: float, cancel: threading.Event | None = None, source: str | None = None) -> Outcome | None:
        """The run forked from a warm interpreter; None when the zygote died (the caller runs it
        cold: a dead zygote takes no verdict with it). ``source``: the candidate, whose leading
        environment settings pick the zygote (one whose imports ran with those settings)."""
        from reducer.run.zygote import ZygoteError, leading_environment, warm_imports
        zygote = None
        settings = leading_environment(source) if source is not None else ()
        try:
            zygote = self.zygotes.acquire(settings, None if source is None else
                                          warm_imports(source, self.script_dir, through_environment=True))
            outcome = self._execute(cmd, cwd, env, timeout, stop_when, max_rss, stop_grace, zygote=zygote,
                                    cancel=cancel)
            self.zygotes.release(zygote)
            self.warm_runs += 1
            return outcome
        except ZygoteError:
            if zygote is not None:
                self.zygotes.release(zygote, healthy=False)
            self.warm_fallbacks += 1
            return None

    def _file_limit(self, sig: str | None, records: list[TracebackRecord]) -> str | None:
        """The file size limit's line when a write of the run hit RLIMIT_FSIZE: SIGXFSZ, or
        Python's EFBIG (the interpreter ignores the signal)."""
        size = self.spec.limits.get("FSIZE")
        if not size:
            return None
        if sig == "SIGXFSZ" or any("[Errno 27] File too large" in r.message for r in records):
            return file_limit_text(size)
        return None

    @staticmethod
    def _unscratch(text: str, work: Path) -> str:
        """Show the script's frames as "worker.py", not under this run's throwaway directory."""
        text = text.replace(str(work / "tmp"), "<tmp>").replace(str(work) + os.sep, "")
        text = text.replace(str(work.parent / "tmp"), "<tmp>")
        # the run's own home reads as the home it stands for: a path under it is the same in every run
        return text.replace(str(work.parent / HOME_DIR), "~")

    def _records(self, stdout: str, stderr: str, cwd: Path, env: dict[str, str],
                 clean: bool = True) -> list[TracebackRecord]:
        """Every traceback in the output, marked raised or printed where the run recorded its
        exceptions (reducer/run/raised.py)."""
        if clean:
            stdout, stderr = self._unscratch(stdout, cwd), self._unscratch(stderr, cwd)
        # stderr first: uncaught exceptions and logging's default handler both go there.
        records = parse_tracebacks(stderr, "stderr") + parse_tracebacks(stdout, "stdout")
        exceptions = env.get(EXCEPTIONS_ENV)
        if not records or not exceptions:
            return records
        return mark(records, read_raised(Path(exceptions), lambda text: self._unscratch(text, cwd)))

    def _execute(self, cmd: list[str], cwd: Path, env: dict[str, str], timeout: float,
                 stop_when: Callable[[list[TracebackRecord]], bool] | None,
                 max_rss: int | None = None, stop_grace: float = 2.0, zygote=None,
                 cancel: threading.Event | None = None) -> Outcome:
        out, err = _BoundedBuffer(), _BoundedBuffer()
        start = time.monotonic()
        started_ticks = boot_ticks()
        if started_ticks is not None:
            started_ticks -= 1  # a tick of margin: starttime is rounded down to a tick
        # the run's pids cgroup (where one can be made) and the measure of its folder: cwd is scratch/work
        guard = RunGuard.start(self.spec.quota, cwd.parent)
        try:
            if zygote is None:
                # in the forked child before exec: os calls and setrlimit only, no lock another
                # thread could hold
                popen = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                         preexec_fn=_child_setup(dict(self.spec.limits), guard.procs))
                proc, streams = _ColdChild(popen), [popen.stdout, popen.stderr]
            else:
                out_r, out_w = os.pipe()
                err_r, err_w = os.pipe()
                try:
                    proc = zygote.fork(cmd[1], cmd[2:], cwd, env, out_w, err_w, self.spec.limits,
                                       cgroup=guard.procs)
                except BaseException:
                    os.close(out_r)
                    os.close(err_r)
                    raise
                finally:
                    os.close(out_w)
                    os.close(err_w)
                streams = [os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb")]
        except BaseException:
            guard.finish()
            raise
        pumps = [threading.Thread(target=_pump, args=(streams[0], out), daemon=True),
                 threading.Thread(target=_pump, args=(streams[1], err), daemon=True)]
        for t in pumps:
            t.start()
        timed_out = stopped = over_memory = False
        limited = False     # stopped at the process or disk limit (guard.hit says which)
        seen_version = -1
        peak_rss, next_poll = 0, 0.0
        stop_deadline: float | None = None
        # --hang-after S: no new output for S seconds is a hang; every process of the run dumps
        # its threads (SIGUSR1, armed by the exception hook) and the run stops a moment later.
        hang_after = float(env.get(HANG_ENV) or 0) or None
        last_output, last_version, dumped_at = start, 0, None
        hung = False
        # CPU time of the group at the last poll and when output last changed: a run that went
        # quiet while spinning a core is not the same hang as one that went quiet waiting.
        cpu_polled = cpu_at_output = 0.0
        spinning: bool | None = None
        try:
            while True:
                if proc.wait(0.05):
                    break
                if hang_after is not None:
                    now = time.monotonic()
                    version = out.version + err.version
                    if version != last_version:
                        last_version, last_output, cpu_at_output = version, now, cpu_polled
                    if dumped_at is None and now - last_output > hang_after:
                        dumped_at = now
                        spinning = _spinning(group_usage(proc.pid)[1] - cpu_at_output, now - last_output)
                        dump_stacks(proc.pid)
                    elif dumped_at is not None and now - dumped_at > _DUMP_WAIT:
                        hung = True
                        break
                if _STOP_ALL.is_set() or (cancel is not None and cancel.is_set()):
                    stopped = True
                    break
                now = time.monotonic()
                if now - start > timeout:
                    timed_out = True
                    break
                if now >= next_poll:
                    next_poll = now + _MEMORY_POLL
                    rss, cpu_polled = group_usage(proc.pid)
                    peak_rss = max(peak_rss, rss)
                    if max_rss is not None and peak_rss > max_rss:
                        # A candidate that made the model far bigger is rejected, not waited on:
                        # on a 24 GiB box two of them would take the machine down.
                        over_memory = True
                        break
                    if guard.poll(proc.pid, now) is not None:
                        limited = True
                        break
                if stop_deadline is not None:
                    if now >= stop_deadline:
                        stopped = True
                        break
                elif stop_when is not None:
                    version = out.version + err.version
                    if version != seen_version:
                        seen_version = version
                        if stop_when(self._records(out.text(), err.text(), cwd, env)):
                            # The target failure is on screen; the rest of the run only burns GPU
                            # time. It still gets a grace period to exit by itself, so that a repro
                            # which fails and then hangs can be told from one which fails and ends.
                            stop_deadline = now + stop_grace
        finally:
            # A last count before the kill: the leader may have ended with its forks still there.
            limited = limited or guard.poll(proc.pid, time.monotonic()) is not None
            # Kill the whole group: worker subprocesses (multiprocessing, DataLoader) included.
            kill_group(proc.pid)
            while not proc.wait(5.0):
                kill_group(proc.pid)
            # ...and whatever left the group: daemons that called setsid().
            if env.get(RUN_TAG_ENV):
                kill_tagged(env[RUN_TAG_ENV], started_ticks)
            # ...and whatever is left in its cgroup; the folder measured a last time
            guard.finish()
            for t in pumps:
                t.join(timeout=5)
        wall = time.monotonic() - start
        stdout, stderr = self._unscratch(out.text(), cwd), self._unscratch(err.text(), cwd)
        returncode = None if (timed_out or stopped or over_memory or hung or limited) else proc.returncode
        records = self._records(stdout, stderr, cwd, env, clean=False)
        timeout_reason = "wall clock" if timed_out else None
        if hung:
            record = hang_record(stderr, hang_after or 0.0, spinning=spinning)
            records = [r for r in records if r.kind != "crash"] + ([record] if record is not None else [])
            returncode, timed_out, timeout_reason = None, True, f"no progress for {hang_after:g}s"
        hangs = [r for r in records if _NCCL_TIMEOUT.search(r.message)]
        if hangs:
            records = [r for r in records if r not in hangs]
            timed_out, timeout_reason = True, "NCCL collective timeout"
        sig = _signal_name(returncode)
        if sig and not any(r.kind == "crash" for r in records):
            # Died by a signal without a faulthandler dump (SIGKILL from the OOM killer, say).
            records.append(TracebackRecord("Signal", sig, (), f"process killed by {sig}", "stderr", "crash"))
        limit = guard.hit or self._file_limit(sig, records)
        if limit is not None:
            # Whatever it printed, a run stopped at a limit is not the failure: one record says
            # which limit (the original hitting one is refused in one line: reducer/failure/original.py).
            records = [TracebackRecord("RunLimit", limit, (), f"reprobot: {limit}", "stderr", "crash")]
        return Outcome(returncode=returncode, wall_time=wall, stdout=stdout, stderr=stderr,
                       timed_out=timed_out, stopped_early=stopped, signal=sig, tracebacks=records,
                       timeout_reason=timeout_reason, pid=proc.pid, peak_rss=peak_rss,
                       over_memory=over_memory, limit=limit)
