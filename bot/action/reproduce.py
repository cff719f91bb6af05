"""The reproduce job: discussion body → script → `reprobot reduce` in a clean environment →
an artifact folder (result.json + the repro folder's files) for the publish job.

This job runs code that anyone could have posted, so:
- it is handed no token and no secret by the workflow, and on top of that the reduction is a
  child process whose environment is an allow-list (``clean_env``): nothing named like a
  credential, and no ``GITHUB_*``/``ACTIONS_*`` variable, reaches the user's script;
- the script lives in a fresh scratch folder outside the checkout, and every candidate run gets
  its own copy of that folder (reducer/runner.py); HOME points into the scratch folder;
- every limit is enforced here and not trusted to the child: body size, one run's time, the
  whole reduction's time (the process group is killed), the size of every file copied out.
- the reduction runs in Linux namespaces (bot/action/sandbox.py): its own PID namespace and
  /proc, no network, the runner's credential stores covered, no capabilities; a runner that
  cannot do that gets no run at all ("not-isolated") unless the maintainer chose
  ``--isolation none`` for a runner that is itself a sandbox.
What this does NOT do: the script can still write to paths the runner's user can write outside
the hidden ones; that is what the ephemeral runner / container in docs/ACTION.md is for.
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
from typing import Any

from bot.action.event import DiscussionEvent, configured_label
from bot.action.extract import extract
from bot.action.result import REPRO_SUBDIR, RESULT_FILE, ActionResult
from reducer.errors import ExitCode
from reducer.processes import kill_group

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
    scratch_root: Path | None = None            # default: $RUNNER_TEMP, else the system temp dir
    keep_scratch: bool = False
    offline: bool = False                       # no index lookups while pinning the environment
    # "namespaces": refuse to run the posted code unless it can be isolated (bot/action/sandbox.py);
    # "none": a maintainer's choice for a runner that is itself a sandbox (ephemeral, no network).
    isolation: str = "namespaces"


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


def _reprobot_cmd() -> list[str]:
    """`reprobot` as a child process, importable whether reprobot is installed or run from a
    checkout, without PYTHONPATH (which the user's script would inherit)."""
    root = str(Path(__file__).resolve().parents[2])
    return [sys.executable, "-c",
            "import sys; sys.path.insert(0, sys.argv.pop(1)); from bot.cli import main; "
            "raise SystemExit(main(sys.argv[1:]))", root]


def _tail(path: Path, limit: int = TAIL_BYTES) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _run_bounded(cmd: list[str], *, cwd: Path, env: dict[str, str], wall: float,
                 log_dir: Path, name: str) -> tuple[int | None, str, float]:
    """Run ``cmd`` in its own process group; kill the group at ``wall`` seconds.

    Returns (exit code or None when killed, tail of stderr, seconds). Output goes to files,
    not pipes, so a chatty child can neither fill memory nor block.
    """
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    start = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=wall)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            # The group, not just the child: the user's script may have forked workers.
            kill_group(proc.pid)
            proc.wait()
    return code, _tail(err_path), time.monotonic() - start


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


def _find_repro(root: Path) -> Path | None:
    found = sorted(p.parent for p in root.glob("*/signature.json") if not p.is_symlink())
    return found[0] if found else None


def copy_repro(src: Path, dest: Path) -> list[str]:
    """Copy the repro folder's plain files into the artifact: no links, no sub-folders, bounded,
    and scrubbed. Artifacts of a public repository can be downloaded by anyone signed in, and a
    credential the script printed can sit in an exception message (signature.json keeps it)."""
    from bot.scrub import scrub, scrub_tree

    dest.mkdir(parents=True, exist_ok=True)
    copied, total = [], 0
    for p in sorted(src.iterdir()):
        if p.is_symlink() or not p.is_file() or not _ARTIFACT_NAME.match(p.name):
            continue
        size = p.stat().st_size
        if size > MAX_ARTIFACT_FILE or total + size > MAX_ARTIFACT_TOTAL:
            continue
        text = p.read_bytes().decode("utf-8", "replace")
        if p.suffix == ".json":
            try:
                text = json.dumps(scrub_tree(json.loads(text)), indent=2) + "\n"
            except json.JSONDecodeError:
                text = scrub(text).text
        else:
            text = scrub(text).text
        (dest / p.name).write_text(text, encoding="utf-8")
        total += size
        copied.append(p.name)
    return copied


def _install_requirements(reqs: list[str], opts: ReproduceOptions, env: dict[str, str], work: Path,
                          iso: Any) -> bool:
    # Every entry was checked to be a plain PEP 508 requirement (bot/action/extract.py): no
    # options, no URLs, no file paths, so nothing here can redirect pip. A source build runs
    # code too: it gets the network (pip needs it) but the same hidden home and PID namespace.
    cmd = [opts.python, "-m", "pip", "install", "--no-input", "--disable-pip-version-check", *reqs]
    code, _, _ = _run_bounded(iso.wrap(cmd, network=True), cwd=work, env=env, wall=min(opts.max_time, 900.0), log_dir=work, name="pip")
    return code == 0


def _follow_ups(repro: Path, env: dict[str, str], work: Path) -> dict[str, int | None]:
    """route → dedup (local index only: this job has no token) → draft, each best-effort and
    bounded. They read the repro folder reprobot wrote; none of them runs the user's code."""
    steps: dict[str, int | None] = {}
    for name, extra in FOLLOW_UPS:
        if importlib.util.find_spec(f"bot.commands.{name}") is None:
            continue
        code, _, _ = _run_bounded([*_reprobot_cmd(), name, str(repro), *extra], cwd=work, env=env,
                                  wall=FOLLOW_UP_SECONDS, log_dir=work, name=name)
        steps[name] = code
    return steps


def reproduce(event: DiscussionEvent, opts: ReproduceOptions, *, environ: dict[str, str] | None = None) -> ActionResult:
    """Do the reproduce job's work and leave the artifact in ``opts.out``. Never raises for
    anything the discussion's author controls: every such outcome is a status."""
    src_env = os.environ if environ is None else environ
    opts.out.mkdir(parents=True, exist_ok=True)
    # A folder reused from an earlier run must not mix old files into this artifact; only our
    # own two names are removed, never the folder (it may be the current directory).
    (opts.out / RESULT_FILE).unlink(missing_ok=True)
    if (opts.out / REPRO_SUBDIR).is_symlink():
        (opts.out / REPRO_SUBDIR).unlink()
    shutil.rmtree(opts.out / REPRO_SUBDIR, ignore_errors=True)
    body_bytes = len(event.body.encode("utf-8", "replace"))
    result = ActionResult(status="ignored", discussion=event.number, body_bytes=body_bytes, max_body=opts.max_body,
                          max_time=opts.max_time, timeout=opts.timeout)

    def done(status: str, detail: str = "") -> ActionResult:
        result.status = status
        result.detail = detail or result.detail
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
    if ex.status != "ok" or ex.script is None:
        return done(ex.status, ex.syntax_error or ex.why)

    from bot.action.sandbox import Isolation, probe
    iso = probe([src_env.get("HOME"), str(Path.home())]) if opts.isolation == "namespaces" else Isolation("none")
    if opts.isolation == "namespaces" and iso.mode != "namespaces":
        return done("not-isolated", iso.reason)
    result.isolation = iso.mode

    root = opts.scratch_root or Path(src_env.get("RUNNER_TEMP") or tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="reprobot-action-", dir=root))
    try:
        home = work / "home"
        home.mkdir()
        script = work / "input" / f"discussion_{event.number}.py"
        script.parent.mkdir()
        script.write_text(ex.script, encoding="utf-8")
        env = child_env(home, opts.pass_env, dict(src_env))
        # Scratch copies of every candidate run live under the work folder, which is removed at the end.
        (work / "tmp").mkdir()
        env["TMPDIR"] = env["TEMP"] = env["TMP"] = str(work / "tmp")
        if opts.offline or iso.mode == "namespaces":
            # bot/env/lockfile.py pins from what is installed instead of asking the package index: the
            # reduction has no network (a namespace with no interface up, or a hardened runner).
            env["REPROBOT_OFFLINE"] = "1"
        if iso.mode == "namespaces":
            env["HF_HUB_OFFLINE"] = "1"     # fail at once, not after the hub's retries
        if opts.install_deps and ex.requirements:
            result.requirements_installed = _install_requirements(ex.requirements, opts, env, work, iso)

        store = work / "repros"
        cmd = [*_reprobot_cmd(), "reduce", str(script), "--out", str(store),
               "--python", opts.python, "--timeout", f"{opts.timeout:g}", "--max-time", f"{opts.max_time:g}",
               "--runs", str(max(1, opts.runs))]
        if importlib.util.find_spec("bot.reduction") is None:
            # The reduction engine is not installed in this build: record the failure only.
            cmd.append("--no-reduce")
        # The reduction bounds itself by --max-time; this is the backstop for when it cannot
        # (a run that ignores SIGTERM, the first runs of the original, environment probing).
        wall = opts.max_time + opts.timeout * max(1, opts.runs) + 60.0
        # No network; the PID namespace ends every process the script left when the reduction ends.
        code, stderr, seconds = _run_bounded(iso.wrap(cmd), cwd=work, env=env, wall=wall, log_dir=work, name="reduce")
        repro = _find_repro(store)
        result.reduce_exit, result.wall_time = code, round(seconds, 2)
        status = _status_of(code, repro)
        detail = (f"stopped at the {wall:.0f}s limit" if code is None else _last_line(stderr, script))
        if status == "syntax-error" and not result.syntax_error:
            # Python parsed it but libcst did not (the reducer needs both): its words say where.
            result.syntax_error = detail[:200]
        if repro is not None:
            if status in ("reduced", "reproduced"):
                result.steps = _follow_ups(repro, env, work)
            copy_repro(repro, opts.out / REPRO_SUBDIR)
        return done(status, detail)
    finally:
        if not opts.keep_scratch:
            shutil.rmtree(work, ignore_errors=True)
