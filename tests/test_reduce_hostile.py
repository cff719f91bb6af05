"""`reprobot reduce` on hostile scripts: each ends with one line and a documented exit status
(reducer/errors.py), or works; never with a traceback of reprobot's own.

Before issue #39, a 6,000-term expression crashed reprobot with its own RecursionError while
checking that the script compiles, and a 600-term one (which compiles) crashed it later, in
libcst's recursive code generation.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reducer.errors import ExitCode
from reducer.failure.original import MAX_NESTING, check_nesting, nesting_depth

ROOT = Path(__file__).resolve().parents[1]


def reduce(tmp: Path, name: str, source: str, *args: str) -> subprocess.CompletedProcess:
    script = tmp / name
    script.write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REPROBOT_OFFLINE": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "bot", "reduce", name, "--out", "repros", "--no-env", *args],
                          cwd=tmp, capture_output=True, text=True, timeout=240, env=env)


def one_line(proc: subprocess.CompletedProcess) -> str:
    """The refusal: one line on stderr, no traceback anywhere."""
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("reprobot: ")
    return lines[0]


def long_sum(terms: int) -> str:
    return "x = " + "+".join(["1"] * terms) + "\nraise ValueError(f'boom {x}')\n"


@pytest.mark.parametrize("terms", [6000, 600])
def test_a_deeply_nested_script_is_refused_in_one_line(tmp_path: Path, terms: int) -> None:
    proc = reduce(tmp_path, "deep.py", long_sum(terms))
    assert proc.returncode == ExitCode.TOO_LARGE
    line = one_line(proc)
    assert "deep.py: nested" in line and f"{MAX_NESTING}-level cap" in line
    assert not (tmp_path / "repros").exists()  # refused before anything ran


def test_a_script_at_the_nesting_cap_is_taken(tmp_path: Path) -> None:
    source = long_sum(MAX_NESTING - 2)
    assert nesting_depth(source) == MAX_NESTING
    check_nesting(source)
    proc = reduce(tmp_path, "at_cap.py", source, "--no-reduce")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ValueError: boom" in proc.stdout


def test_a_five_megabyte_script_is_refused_in_one_line(tmp_path: Path) -> None:
    body = "# " + "x" * 98 + "\n"
    proc = reduce(tmp_path, "huge.py", body * (5 * 1024 * 1024 // len(body)) + "raise ValueError('boom')\n")
    assert proc.returncode == ExitCode.TOO_LARGE
    assert "bytes, over the 1,000,000-byte cap" in one_line(proc)


def test_a_failure_with_a_ten_megabyte_message_is_stored(tmp_path: Path) -> None:
    """The red team's message (``a%a%...``, quadratic in the old e-mail pattern), 10 MB of it:
    the failure is found and stored, its output shown and kept bounded and scrubbed."""
    proc = reduce(tmp_path, "loud.py", "raise ValueError('a%' * (5 * 1024 * 1024))\n", "--no-reduce")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback (most recent call last)" not in proc.stderr
    (folder,) = (tmp_path / "repros").iterdir()
    stored = (folder / "traceback.txt").read_text(encoding="utf-8")
    assert "ValueError: a%a%a%" in stored and len(stored) < 3_000_000


# What a run printed is parsed and normalised: the script chooses every character of it.
MB = 1_000_000
HOSTILE_OUTPUT = {
    "a frame line ending in spaces and a letter":
        'Traceback (most recent call last):\n  File "x.py", line 1, in f' + " " * MB + "x\nValueError: boom\n",
    "a fatal error ending in spaces and a letter": "Fatal Python error: a" + " " * MB + "x\n",
    "a dotted message": "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nValueError: " + "a." * (MB // 2),
    "the red team's message": "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nValueError: " + "a%" * (MB // 2),
}


@pytest.mark.parametrize("label", sorted(HOSTILE_OUTPUT))
def test_parsing_and_normalising_a_hostile_megabyte_is_bounded(label: str) -> None:
    import time

    from reducer.failure.normalize import normalize_message
    from reducer.failure.tracebacks import parse_tracebacks
    text = HOSTILE_OUTPUT[label]
    t0 = time.process_time()
    records = parse_tracebacks(text)
    for record in records:
        normalize_message(record.message)
    normalize_message(text)
    took = time.process_time() - t0
    assert took < 2.0, f"{label}: {took:.2f} s CPU"   # quadratic before issue #39: hours on 1 MB
