"""Run the tests a node id or ``-k`` selects, once, under pytest in the user's interpreter, with
reprobot's probe plugin (reducer/run/pytest_probe.py): which tests pytest selected, which failed
and how, and what each failing one needs (issue #43).

pytest resolves the node ids, ``-k`` expressions, parametrized ids and fixtures itself: nothing
here re-implements its rules. The run is pytest's own, in the folder the user runs reprobot from
(their rootdir, ini file and conftest.py files apply), with three changes that keep it from
touching their tree or differing from a plain script: no cache folder (``-p no:cacheprovider``),
temporary folders under reprobot's own (``--basetemp``), and plain asserts (``--assert=plain``:
a rewritten assert's message is pytest's, and the script's must be the same). ``--maxfail``
stops it once the failure wanted (``--pick``) has been seen.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from reducer.errors import ExitCode, ReprobotError

PROBE = Path(__file__).with_name("pytest_probe.py")
PROBE_MODULE = "_reprobot_pytest_probe"
OUT_ENV = "REPROBOT_PYTEST_PROBE_OUT"


@dataclass
class PytestRun:
    """What one pytest run of the selection showed."""

    args: list[str]                      # pytest's arguments as the user gave them
    selected: list[str]                  # node ids pytest selected, in its order
    failures: list[dict]                 # each failing test, as the probe recorded it (in order)
    errors: list[dict] = field(default_factory=list)    # collection errors
    outcomes: dict = field(default_factory=dict)
    exitstatus: int = 0
    output: str = ""                     # the tail of pytest's own output


def run_pytest(args: list[str], python: str, cwd: Path, timeout: float, maxfail: int = 1) -> PytestRun:
    """Run ``python -m pytest ARGS`` with the probe; a one-line error when pytest is missing,
    cannot start, or runs past ``timeout``."""
    with tempfile.TemporaryDirectory(prefix="reprobot-pytest-") as tmp:
        home = Path(tmp)
        shutil.copyfile(PROBE, home / f"{PROBE_MODULE}.py")
        out = home / "probe.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(home), env.get("PYTHONPATH", "")) if p)
        env[OUT_ENV] = str(out)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        cmd = [python, "-m", "pytest", "-p", PROBE_MODULE, "-p", "no:cacheprovider", "--assert=plain",
               f"--basetemp={home / 'basetemp'}", f"--maxfail={maxfail}", "-q", "--tb=line", "-rN", *args]
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace", start_new_session=True)
        except OSError as e:
            raise ReprobotError(f"{python}: cannot run it ({e.strerror or e})", ExitCode.NO_INTERPRETER) from None
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ReprobotError(f"pytest {' '.join(args)}: still running after {timeout:g} s (--timeout)",
                                ExitCode.TIMEOUT) from None
        except BaseException:
            _kill_group(proc)
            raise
        tail = output[-3000:]
        if not out.is_file():
            if "No module named pytest" in output:
                raise ReprobotError(f"pytest is not installed in {python} (the interpreter that runs the tests; "
                                    "--python picks another)", ExitCode.NO_INTERPRETER)
            last = next((line for line in reversed(output.strip().splitlines()) if line.strip()), "no output")
            raise ReprobotError(f"pytest {' '.join(args)}: did not run ({last.strip()[:200]})", ExitCode.BAD_INPUT)
        data = json.loads(out.read_text(encoding="utf-8"))
    return PytestRun(list(args), list(data.get("selected") or []), list(data.get("failures") or []),
                     list(data.get("errors") or []), dict(data.get("outcomes") or {}),
                     int(data.get("exitstatus") or 0), tail)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
