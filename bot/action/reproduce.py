"""The reproduce job: discussion body → script → a sandbox that runs `reprobot reduce`, `route`,
`dedup` and `draft` → an artifact folder (result.json + the repro folder's files) for the
publish job.

This job runs code that anyone could have posted, so (docs/ACTION.md, issues #18 and #28):
- it is handed no token and no secret by the workflow, and the steps get an allow-listed
  environment (``child_env``): nothing named like a credential, no ``GITHUB_*``/``ACTIONS_*``;
- every step that touches the posted code or its outputs runs in one sandbox
  (bot/action/sandbox.py, bot/action/jail.py): its own PID namespace and /proc, no network, a
  root of read-only system folders, a read-only interpreter and a read-only snapshot of reprobot,
  a size-capped scratch; the runner's home, temp folder (its command files), workspace, own
  folder and sockets are not in it. A runner that cannot do that gets no run at all
  ("not-isolated") unless the maintainer chose ``--isolation none`` for a runner that is itself
  a sandbox;
- this process imports and executes nothing the posted code wrote: it reads back regular files
  only (no links, bounded, opened with ``O_NOFOLLOW``), which the sandbox's first process copied
  out after killing everything else, and assembles the artifact from an allow-list of names;
- every limit is enforced here and not trusted to the child: body size, one run's time, each
  step's and the whole sandbox's time, processes, file sizes, disk, the size of every file copied out.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.action.event import DiscussionEvent, configured_label
from bot.action.extract import extract
from bot.action.result import REPRO_SUBDIR, RESULT_FILE, ActionResult
from bot.action.sandbox import Layout, Limits, Step

if TYPE_CHECKING:
    from bot.action.attachment import Hosts, Link
from reducer.errors import ExitCode, ReprobotError
from reducer.run.guard import enter as enter_cgroup
from reducer.run.processes import kill_group

DEFAULT_MAX_BODY = 1_000_000
DEFAULT_MAX_TIME = 900.0
DEFAULT_TIMEOUT = 300.0
GATE_ENV = "REPROBOT_GATE_ALLOWED"
# Copied into the artifact; anything else in the repro folder stays behind.
_ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}\.(?:py|json|md|txt|lock|in)$")
MAX_ARTIFACT_FILE = 2 * 1024 * 1024
MAX_ARTIFACT_TOTAL = 16 * 1024 * 1024
TAIL_BYTES = 16 * 1024
# What a reply shows besides the repro; none of these needs the network or a token.
FOLLOW_UPS: tuple[tuple[str, tuple[str, ...]], ...] = (("route", ()), ("dedup", ("--no-search",)), ("draft", ()))
FOLLOW_UP_SECONDS = 120.0
# The reduce exits after which a repro folder is worth routing and drafting.
FOLLOW_EXITS = [0, int(ExitCode.TIME_LIMIT), int(ExitCode.INTERRUPTED), None]

# The environment a reduction gets: what a Python program needs to run and find a GPU.
ENV_ALLOW = frozenset({
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONIOENCODING", "PYTHONUTF8",
    "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
    "SYSTEMROOT", "COMSPEC", "PATHEXT",
})
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)


@dataclass
class ReproduceOptions:
    out: Path                                   # the artifact folder to fill
    label: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    max_time: float = DEFAULT_MAX_TIME
    timeout: float = DEFAULT_TIMEOUT
    runs: int = 2
    install_deps: bool = False
    python: str = sys.executable
    pass_env: tuple[str, ...] = ()              # extra variable names the maintainer allows
    scratch_root: Path | None = None            # default: the system temp dir (never $RUNNER_TEMP)
    keep_scratch: bool = False
    offline: bool = False                       # no index lookups while pinning the environment
    # "namespaces": refuse to run the posted code unless it can be isolated (bot/action/sandbox.py);
    # "none": a maintainer's choice for a runner that is itself a sandbox (ephemeral, no network).
    isolation: str = "namespaces"
    read_only: tuple[str, ...] = ()             # host paths shared read-only with the sandbox (a model cache)
    limits: Limits = Limits()
    # Where attached files may be fetched from (bot/action/attachment.py); None: $REPROBOT_ATTACHMENT_*
    # or GitHub's own hosts.
    attachment_hosts: "Hosts | None" = None


def _attached(body: str) -> "Link | None":
    """The first notebook or test file the post links as a reader sees it, or None."""
    from bot.action.attachment import runnable_links
    try:
        links = runnable_links(body)
    except Exception:  # noqa: BLE001 - the body is the public's: an unreadable one runs nothing
        return None
    return links[0] if links else None


def child_env(home: Path, pass_env: tuple[str, ...] = (), environ: dict[str, str] | None = None) -> dict[str, str]:
    """The allow-listed environment for the reduction and the user's script.

    A name is passed only if it is allowed, does not look like a credential's name, and its value
    holds nothing ``find_secrets`` recognises; GITHUB_*/ACTIONS_*/RUNNER_* never are.
    """
    from bot.scrub import find_secrets

    src = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for name in ENV_ALLOW | set(pass_env):
        value = src.get(name)
        if value is None or _SECRET_NAME.search(name) or name.startswith(("GITHUB_", "ACTIONS_", "RUNNER_")):
            continue
        if find_secrets(value):
            continue
        env[name] = value
    env["PATH"] = env.get("PATH") or os.defpath
    # A home of its own: ~/.cache writes land in scratch, and ~/.netrc, ~/.git-credentials,
    # ~/.cache/huggingface/token are not where a library would look for them.
    env["HOME"] = str(home)
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def _run_bounded(cmd: list[str], *, cwd: Path, env: dict[str, str], wall: float,
                 log_dir: Path, name: str, cgroup: str | None = None) -> tuple[int | None, str, float]:
    """Run ``cmd`` in its own process group (and in the pids cgroup whose ``cgroup.procs`` is
    ``cgroup``, entered before it starts); kill the group at ``wall`` seconds.

    Returns (exit code or None when killed, tail of stderr, seconds). Output goes to files,
    not pipes, so a chatty child can neither fill memory nor block.
    """
    from bot.action.jail import _tail

    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    start = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True, preexec_fn=(lambda: enter_cgroup(cgroup)) if cgroup else None)
        try:
            code: int | None = proc.wait(timeout=wall)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            # The group, not just the child: with --isolation none the script may have forked workers.
            kill_group(proc.pid)
            proc.wait()
    return code, _tail(str(err_path), TAIL_BYTES), time.monotonic() - start


def _scratch_root(opts: ReproduceOptions, environ: dict[str, str]) -> Path:
    """Where the job's own folder goes: never under the runner's temp (its command files), the
    workspace or the artifact folder, whatever the sandbox hides."""
    root = (opts.scratch_root or Path(tempfile.gettempdir())).resolve()
    for name, value in (("RUNNER_TEMP", environ.get("RUNNER_TEMP")), ("GITHUB_WORKSPACE", environ.get("GITHUB_WORKSPACE")),
                        ("the artifact folder", str(opts.out))):
        if value and (root == Path(value).resolve() or Path(value).resolve() in root.parents):
            raise ReprobotError(f"the scratch folder {root} is inside {name}; give --scratch elsewhere",
                                ExitCode.USAGE)
    root.mkdir(parents=True, exist_ok=True)
    return root


def _steps_env(layout: "Layout", opts: ReproduceOptions, environ: dict[str, str], *, deps: bool) -> dict[str, str]:
    scratch = Path(layout.scratch)
    env = child_env(scratch / "home", opts.pass_env, dict(environ))
    env["TMPDIR"] = env["TEMP"] = env["TMP"] = str(scratch / "tmp")
    if opts.offline or layout.isolate:
        # bot/env/lockfile.py pins from what is installed instead of asking the package index: the
        # steps have no network (a namespace with no interface up, or a hardened runner).
        env["REPROBOT_OFFLINE"] = "1"
    if layout.isolate:
        env["HF_HUB_OFFLINE"] = "1"     # fail at once, not after the hub's retries
    if deps:
        # The interpreter is read-only: the post's requirements go into scratch, for this run only.
        env["PYTHONPATH"] = str(scratch / "deps")
    return env


def run_limit_args(limits: Limits) -> list[str]:
    """Each run's own limits inside the sandbox, so that the run that reaches one is stopped and
    named (and the original reaching one is the reply's one line): its processes, the file size,
    and half the scratch tmpfs, so that a run filling it is caught at its limit before reprobot's
    own files have no room."""
    return ["--max-processes", str(limits.procs), "--max-disk", str(limits.disk // 2),
            "--max-file-size", str(limits.file_size)]


# reduce's limit flags, as the maintainer sets them here (run_limit_args)
_ACTION_FLAGS = {"--max-processes)": "--max-procs)", "--max-disk)": "half of --max-disk-mb)",
                 "--max-file-size)": "--max-file-mb)"}


def action_flags(line: str) -> str:
    """A limit named in reduce's words, in the words of the Action's settings."""
    for flag, ours in _ACTION_FLAGS.items():
        line = line.replace(flag, ours)
    return line


def _steps(layout: "Layout", opts: ReproduceOptions, requirements: list[str], script_name: str) -> list["Step"]:
    from bot.action.sandbox import Step

    steps: list[Step] = []
    if requirements:
        # Every entry was checked to be a plain PEP 508 requirement (bot/action/extract.py): no
        # options, no URLs, no file paths, so nothing here can redirect pip. A source build runs
        # code too: it gets the network (pip needs it), inside the same sandbox.
        steps.append(Step("pip", [opts.python, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                                  "--target", f"{layout.scratch}/deps", *requirements],
                          wall=min(opts.max_time, 900.0), network=True))
    reduce = ["reduce", f"{layout.scratch}/input/{script_name}", "--out", f"{layout.scratch}/repros",
              "--python", opts.python, "--timeout", f"{opts.timeout:g}", "--max-time", f"{opts.max_time:g}",
              "--runs", str(max(1, opts.runs)), *run_limit_args(opts.limits)]
    if importlib.util.find_spec("bot.reduction") is None:
        reduce.append("--no-reduce")        # the reduction engine is not in this build: record only
    # The reduction bounds itself by --max-time plus its stated graces (a stopped result's cold
    # check: four runs of the original, at least 60 s; pinning: 60 s more); the step's wall is for
    # when it cannot: the confirmation runs, those four runs and the graces, with a minute to spare.
    steps.append(Step("reduce", layout.reprobot_cmd(*reduce),
                      wall=opts.max_time + opts.timeout * (max(1, opts.runs) + 4) + 180.0))
    for name, extra in FOLLOW_UPS:
        if importlib.util.find_spec(f"bot.commands.{name}") is not None:
            steps.append(Step(name, layout.reprobot_cmd(name, "{repro}", *extra),
                              wall=FOLLOW_UP_SECONDS, needs_repro=True, after={"step": "reduce", "exit": FOLLOW_EXITS}))
    return steps


def _remove_entry(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def _remove(work: Path) -> None:
    # The snapshot is read-only on purpose; its folders must be writable again to be removed.
    for folder in [work, *(p for p in work.rglob("*") if p.is_dir() and not p.is_symlink())]:
        try:
            folder.chmod(0o700)
        except OSError:
            pass
    shutil.rmtree(work, ignore_errors=True)


def steps_wall(steps: list["Step"], name: str) -> float:
    return next(s.wall for s in steps if s.name == name)


def _last_line(stderr: str, script: Path) -> str:
    from bot.scrub import scrub

    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    line = re.sub(r"^reprobot:\s*", "", line)
    # The scratch path is ours and says nothing to a reader: name the script only.
    line = line.replace(str(script), script.name).replace(str(script.parent) + os.sep, "")
    return scrub(line).text[:300]


def _status_of(code: int | None, repro: Path | None) -> str:
    if code is None:
        # Killed at the wall limit: a failure already recorded is still worth a reply.
        return "reproduced" if repro is not None else "timeout"
    if code == 0:
        return "reduced" if repro is not None and (repro / "repro.py").is_file() else (
            "reproduced" if repro is not None else "error")
    if code in (ExitCode.INTERRUPTED, ExitCode.TIME_LIMIT):
        # --max-time ran out mid-reduction: repro.py holds the best so far, and it was checked.
        if repro is None:
            return "timeout"
        return "reduced" if (repro / "repro.py").is_file() else "reproduced"
    return {ExitCode.NO_FAILURE: "no-failure", ExitCode.TIMEOUT: "timeout", ExitCode.NOT_PYTHON: "syntax-error",
            ExitCode.FLAKY: "flaky"}.get(code, "error")


def copy_repro(src: Path, dest: Path) -> list[str]:
    """Copy the repro folder's plain files into the artifact: no links, no sub-folders, bounded,
    and scrubbed. Each file is opened without following links and checked to be a regular file
    after opening, so a file swapped for a link meanwhile is not read through. Artifacts of a
    public repository can be downloaded by anyone signed in, and a credential the script printed
    can sit in an exception message (signature.json keeps it)."""
    from bot.action.jail import read_plain
    from bot.scrub import scrub, scrub_tree

    dest.mkdir(parents=True, exist_ok=True)
    copied, total = [], 0
    folder = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in sorted(os.listdir(folder)):
            data = read_plain(folder, name, MAX_ARTIFACT_FILE) if _ARTIFACT_NAME.match(name) else None
            if data is None or total + len(data) > MAX_ARTIFACT_TOTAL:
                continue
            text = data.decode("utf-8", "replace")
            if name.endswith(".json"):
                try:
                    text = json.dumps(scrub_tree(json.loads(text)), indent=2) + "\n"
                except json.JSONDecodeError:
                    text = scrub(text).text
            else:
                text = scrub(text).text
            (dest / name).write_text(text, encoding="utf-8")
            total += len(data)
            copied.append(name)
    finally:
        os.close(folder)
    return copied


def reproduce(event: DiscussionEvent, opts: ReproduceOptions, *, environ: dict[str, str] | None = None) -> ActionResult:
    """Do the reproduce job's work and leave the artifact in ``opts.out``. Never raises for
    anything the discussion's author controls: every such outcome is a status."""
    src_env = os.environ if environ is None else environ
    opts.out.mkdir(parents=True, exist_ok=True)
    # A folder reused from an earlier run must not mix old files into this artifact; only our
    # own two names are removed, never the folder (it may be the current directory).
    _remove_entry(opts.out / RESULT_FILE)
    _remove_entry(opts.out / REPRO_SUBDIR)
    # What was there before is the maintainer's; anything that appears meanwhile and is not
    # ours is removed before the artifact is final (with --isolation none the script can
    # reach this folder).
    before = set(os.listdir(opts.out))
    body_bytes = len(event.body.encode("utf-8", "replace"))
    result = ActionResult(status="ignored", discussion=event.number, body_bytes=body_bytes, max_body=opts.max_body,
                          max_time=opts.max_time, timeout=opts.timeout, body_sha256=event.body_sha256)

    def done(status: str, detail: str = "") -> ActionResult:
        result.status = status
        result.detail = detail or result.detail
        for name in set(os.listdir(opts.out)) - before - {REPRO_SUBDIR}:
            _remove_entry(opts.out / name)
        _remove_entry(opts.out / RESULT_FILE)
        result.write(opts.out)
        return result

    if event.action != "labeled" or event.label != configured_label(opts.label):
        return done("ignored", "not the configured label being added")
    gate = src_env.get(GATE_ENV)
    if gate is None:
        # Untrusted code runs only on the gate job's word; no word is a no.
        return done("not-allowed", f"the gate's decision is missing ({GATE_ENV} is not set)")
    if gate.strip().lower() != "true":
        # Set by the workflow from the gate job's output: anything but "true" means no.
        return done("not-allowed", "the sender does not have triage access")
    if body_bytes > opts.max_body:
        return done("too-large", f"the discussion body is {body_bytes} bytes; the limit is {opts.max_body}")

    try:
        ex = extract(event.body)
    except Exception as e:  # noqa: BLE001 - the body is the public's; whatever it does, the job replies
        return done("error", f"the post could not be read ({type(e).__name__})")
    result.block, result.candidates, result.marked, result.why = ex.block, ex.candidates, ex.marked, ex.why
    result.requirements, result.rejected_requirements = ex.requirements, ex.rejected
    result.attachments, result.syntax_error = ex.attachments, ex.syntax_error
    result.hidden, result.hidden_why, result.info_marker = ex.hidden, ex.hidden_why, ex.info_marker
    # No runnable code block: a notebook or a test file the post links as an attachment is run
    # instead (bot/action/attachment.py); it is fetched only once the sandbox is known to work.
    attached = _attached(event.body) if ex.status in ("attachment-only", "no-script") else None
    if (ex.status != "ok" or ex.script is None) and attached is None:
        return done(ex.status, ex.syntax_error or ex.why)
    if attached is not None and attached.kind == "test" and importlib.util.find_spec("bot.pytest_input") is None:
        return done("attachment-error", f"{attached.name} is a test file, and this Action cannot take tests yet")

    from bot.action import sandbox
    iso = sandbox.probe() if opts.isolation == "namespaces" else sandbox.Isolation("none")
    if opts.isolation == "namespaces" and iso.mode != "namespaces":
        return done("not-isolated", iso.reason)
    result.isolation = iso.mode

    script_name, script = f"discussion_{event.number}.py", ex.script or ""
    if attached is not None:
        from bot.action.attachment import AttachmentError, Hosts, fetch
        result.attachment, result.block, result.candidates = attached.name, None, 0
        result.why = f"the attached {attached.kind} file (the post has no runnable code block)"
        try:
            script = fetch(attached, opts.attachment_hosts or Hosts.from_env(dict(src_env)))
        except AttachmentError as e:
            return done("attachment-error", str(e))
        # Its own name: a notebook is read as one (.ipynb), a test module is found by pytest's rules.
        script_name = attached.name
    work = Path(tempfile.mkdtemp(prefix="reprobot-action-", dir=_scratch_root(opts, src_env)))
    try:
        isolate = iso.mode == "namespaces"
        sandbox.stage_workdir(work, script_name, script, isolate=isolate)
        sandbox.snapshot(work)
        layout = sandbox.Layout(work=work, isolate=isolate, python=opts.python, read_only=opts.read_only,
                                hide=(*sandbox.runner_folders(src_env), str(opts.out.resolve())), limits=opts.limits)
        env = _steps_env(layout, opts, src_env, deps=bool(opts.install_deps and ex.requirements))
        steps = _steps(layout, opts, ex.requirements if opts.install_deps else [], script_name)
        plan = sandbox.plan(layout, steps, env, script_name, export_names=_ARTIFACT_NAME.pattern,
                            max_file=MAX_ARTIFACT_FILE, max_total=MAX_ARTIFACT_TOTAL)
        (work / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
        # The jail bounds each step; this is the backstop for when it cannot.
        wall = sum(s.wall for s in steps) + 60.0
        cap = sandbox.process_cgroup(opts.limits)
        try:
            code, stderr, seconds = _run_bounded(sandbox.command(layout, work / "plan.json"), cwd=work, env=env,
                                                 wall=wall, log_dir=work, name="sandbox",
                                                 cgroup=cap.procs if cap is not None else None)
        finally:
            if cap is not None:
                cap.kill()      # the jail ended them all; a process that left its namespace would not be
        status = sandbox.read_status(layout.export)
        hit = sandbox.limits_hit(status, cap, opts.limits)
        if cap is not None:
            cap.remove()
        if status is None or code == sandbox.JAIL_FAILED:
            why = (status or {}).get("error") or _last_line(stderr, work / "input" / script_name) or f"exit {code}"
            return done("error", "; ".join([f"the sandbox did not finish: {why}", *hit])[:300])
        ran = {s["name"]: s for s in status["steps"]}
        reduce_step = ran.get("reduce", {"exit": None, "stderr_tail": "", "seconds": seconds})
        repro = layout.export / REPRO_SUBDIR if status["repro"] else None
        if repro is not None and (repro.is_symlink() or not repro.is_dir()):
            repro = None
        result.reduce_exit, result.wall_time = reduce_step["exit"], round(float(reduce_step.get("seconds") or 0), 2)
        result.requirements_installed = ran.get("pip", {}).get("exit") == 0
        status_name = _status_of(reduce_step["exit"], repro)
        detail = (f"stopped at the {steps_wall(steps, 'reduce'):.0f}s limit" if reduce_step["exit"] is None
                  else _last_line(reduce_step["stderr_tail"], Path(layout.scratch) / "input" / script_name))
        detail = action_flags(detail)
        if hit:
            # which of the sandbox's own limits the posted code reached, for the reply
            detail = "; ".join([*hit, detail] if detail else hit)
        if status_name == "syntax-error" and not result.syntax_error:
            # Python parsed it but libcst did not (the reducer needs both): its words say where.
            result.syntax_error = detail[:200]
        if repro is not None:
            if status_name in ("reduced", "reproduced"):
                result.steps = {name: ran[name]["exit"] for name, _ in FOLLOW_UPS if name in ran}
            _remove_entry(opts.out / REPRO_SUBDIR)
            copy_repro(repro, opts.out / REPRO_SUBDIR)
        else:
            _remove_entry(opts.out / REPRO_SUBDIR)
        return done(status_name, detail)
    finally:
        if not opts.keep_scratch:
            _remove(work)
