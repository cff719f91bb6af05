# reprobot corpus: constants_dead_code
# Exercises: module constants that only carry pieces of a value to the failing call, a chain
#   of functions each called exactly once (inlining), string building through f-strings and
#   joins, and a long tail of code AFTER the failing statement that never runs (the trace
#   says so: one verified cut should drop it).
# Expected failure: ValueError: No closing quotation
#   raised by `shlex.split(command)` in tokenize_command (line 41, marked FAILING LINE): the run name
#   carries an unbalanced quote.
# Ideal result (2 statements): import shlex; shlex.split('"')
from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import time

PYTHON = "python"
ENTRY = "train.py"
RUN_NAME = 'baseline "v2'
LEARNING_RATES = (1e-4, 2e-4)
EXTRA_FLAGS = ["--bf16", "--gradient-checkpointing"]
OUTPUT_ROOT = "runs"
DRY_RUN = True


def base_command() -> str:
    return f"{PYTHON} {ENTRY}"


def flags_for(lr: float) -> str:
    return " ".join([f"--lr {lr}", f"--run-name {RUN_NAME}", *EXTRA_FLAGS])


def build_command(lr: float) -> str:
    return base_command() + " " + flags_for(lr)


def tokenize_command(command: str) -> list[str]:
    return shlex.split(command)  # FAILING LINE: RUN_NAME has an unbalanced quote


def run_dir(lr: float) -> str:
    digest = hashlib.sha1(str(lr).encode()).hexdigest()[:8]
    return os.path.join(OUTPUT_ROOT, f"lr-{digest}")


def launch(argv: list[str], cwd: str) -> int:
    if DRY_RUN:
        print("would run:", " ".join(shlex.quote(a) for a in argv), "in", cwd)
        return 0
    os.makedirs(cwd, exist_ok=True)
    return subprocess.call(argv, cwd=cwd)


def wait_for(paths: list[str], timeout: float) -> list[str]:
    deadline = time.time() + timeout
    missing = list(paths)
    while missing and time.time() < deadline:
        missing = [p for p in missing if not os.path.exists(p)]
        time.sleep(0.01)
    return missing


def summarise(codes: dict[float, int]) -> str:
    ok = sum(1 for c in codes.values() if c == 0)
    return f"{ok}/{len(codes)} runs launched"


def sweep() -> dict[float, int]:
    argv = tokenize_command(build_command(LEARNING_RATES[0]))
    # Everything below never runs: the first command already fails to tokenize.
    codes = {LEARNING_RATES[0]: launch(argv, run_dir(LEARNING_RATES[0]))}
    for lr in LEARNING_RATES[1:]:
        codes[lr] = launch(tokenize_command(build_command(lr)), run_dir(lr))
    print(summarise(codes))
    missing = wait_for([os.path.join(run_dir(lr), "done") for lr in codes], timeout=0.0)
    if missing and not DRY_RUN:
        print("still running:", ", ".join(missing))
    return codes


def write_manifest(codes: dict[float, int]) -> None:
    lines = [f"{lr}\t{code}\t{run_dir(lr)}" for lr, code in sorted(codes.items())]
    os.makedirs(OUTPUT_ROOT, exist_ok=True)
    with open(os.path.join(OUTPUT_ROOT, "manifest.tsv"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def check_environment() -> list[str]:
    problems = []
    if sys.version_info < (3, 9):
        problems.append("python too old")
    if not os.access(".", os.W_OK):
        problems.append("working directory is read-only")
    return problems


problems = check_environment()
if problems:
    print("environment problems:", "; ".join(problems))
codes = sweep()
write_manifest(codes)
print("manifest written")
if any(codes.values()):
    sys.exit(1)
print("all launched")
for lr, code in codes.items():
    print(f"  lr={lr}: exit {code}")
