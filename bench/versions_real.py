"""A real bisection on the real stack, on a CPU, with the package index: which transformers release
made a tiny Gemma4 stop loading with attn_implementation="sdpa"?

The device matrix (examples/gpu_gemma4_bnb/results/RESULTS.md, scenario f5) saw it load on
transformers 5.17.0 and fail on 5.23.0 with `Gemma4AudioModel does not support an attention
implementation through torch.nn.functional.scaled_dot_product_attention`. This builds that repro
folder (signature from a real run, the lock from this interpreter), then runs
`reprobot versions --bisect transformers --range 5.17.0..5.23.0` and prints what it found.

    python bench/versions_real.py [--python PY] [--range 5.17.0..5.23.0] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPRO = '''\
from transformers import (Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration,
                          Gemma4TextConfig, Gemma4VisionConfig)

text = Gemma4TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=32,
                        vocab_size_per_layer_input=128, hidden_size_per_layer_input=16,
                        layer_types=["sliding_attention", "full_attention"], sliding_window=32)
vision = Gemma4VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                            num_key_value_heads=2, head_dim=16, position_embedding_size=64)
audio = Gemma4AudioConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, output_proj_dims=32)
config = Gemma4Config(text_config=text, vision_config=vision, audio_config=audio)
Gemma4ForConditionalGeneration._from_config(config, attn_implementation="sdpa")
'''


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--range", default="5.17.0..5.23.0")
    ap.add_argument("--keep", type=Path, default=None, help="keep the repro folder here")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reducer.failure.signature import MatchOptions, distinct_failures
    from reducer.run.runner import Runner, RunSpec

    root = args.keep or Path(tempfile.mkdtemp(prefix="reprobot-bench-versions-"))
    folder = root / "gemma4-sdpa"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "repro.py").write_text(REPRO)
    started = time.monotonic()
    outcome = Runner(RunSpec(script=folder / "repro.py", python=args.python, timeout=300)).run(REPRO)
    failures = distinct_failures(outcome, MatchOptions())
    if not failures:
        print(f"the repro passes with this interpreter's transformers: nothing to bisect (exit {outcome.returncode})")
        return 1
    sig, record = failures[0]
    print(f"failure: {sig.one_line()[:160]} ({outcome.wall_time:.1f}s)")
    (folder / "signature.json").write_text(json.dumps({
        "signature": sig.to_dict(), "options": MatchOptions().to_dict(), "record": record.to_dict(),
        "script": "repro.py", "args": [], "runs": [{"wall_time": outcome.wall_time}]}))
    freeze = subprocess.run([args.python, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True,
                            text=True, check=True).stdout
    (folder / "requirements.lock").write_text(freeze)
    cmd = [sys.executable, "-m", "bot", "versions", str(folder), "--python", args.python,
           "--bisect", "transformers", "--range", args.range]
    print("$", " ".join(cmd[1:]))
    subprocess.run(cmd, check=False)
    data = json.loads((folder / "versions.json").read_text())
    b = data["bisect"]
    print(f"RESULT: {b['sentence']}; releases in range {b['releases_in_range']}; "
          f"runs {data['runs']}; wall {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
