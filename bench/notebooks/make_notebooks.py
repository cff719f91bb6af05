"""Write the notebook corpus of issue #43: bench/notebooks/*.ipynb and bench/notebooks/heldout/*.ipynb.

    python bench/notebooks/make_notebooks.py [--check]

Each notebook is nbformat 4 JSON as Jupyter saves it: a `!pip install` cell, `%%time` / `%time`,
`%matplotlib inline` or `%load_ext autoreload` in some, a `display(...)` call and a bare expression
at a cell's end, a cell defining a helper used later, and the failing cell in the middle (cells
after it exist). The failing cell carries the saved error output a notebook run leaves
(`output_type: "error"`, `ename`, `evalue`, `traceback`), taken from running its hand floor
(`NAME.floor.py`, what a person writes for the maintainer), so `reduce --from-outputs` has
something to read. Cells before the failing one carry plausible stream outputs; cells after it
none (a notebook run stops at the error).

`--check` runs every floor and says whether it fails with the notebook's expected exception type
and message (the notebook itself is checked by `reprobot reduce NB --no-reduce`).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Runs a floor and prints its exception as a notebook's error output would hold it.
_CAPTURE = r"""
import json, runpy, sys, traceback
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
except BaseException as e:
    print("\n@@ERROR@@" + json.dumps({"ename": type(e).__name__, "evalue": str(e),
          "traceback": traceback.format_exception(type(e), e, e.__traceback__)}))
"""

PIP = "!pip install -q transformers peft torch"


def notebooks() -> dict[str, dict]:
    """name -> {part, cells: [(source, failing?)], ename, message}."""
    return {
        # ---- the tuned part ----------------------------------------------------------------
        "lora_explore": dict(part="", ename="NoMatchingPeftModuleError", message="not found in the base model", cells=[
            PIP,
            "%load_ext autoreload\n%autoreload 2\nimport torch\nfrom transformers import GPT2Config, GPT2LMHeadModel\n"
            "from peft import LoraConfig, get_peft_model\ntorch.manual_seed(0)",
            "def count_trainable(model):\n    \"\"\"Trainable and total parameters.\"\"\"\n"
            "    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)\n"
            "    total = sum(p.numel() for p in model.parameters())\n    return trainable, total",
            "%%time\nconfig = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=64)\n"
            "base = GPT2LMHeadModel(config)\ncount_trainable(base)",
            "display(base.config)\nprint([name for name, _ in base.named_modules()][:8])",
            ("lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.05,\n"
             "                  target_modules=[\"q_proj\", \"v_proj\"], task_type=\"CAUSAL_LM\")\n"
             "model = get_peft_model(base, lora)\nmodel.print_trainable_parameters()", True),
            "trainable, total = count_trainable(model)\nprint(f\"{trainable}/{total}\")",
            "%time out = model(torch.randint(0, 64, (2, 8)))\nout.logits.shape",
        ]),
        "tokenizer_pad": dict(part="", ename="ValueError", message="Asking to pad but the tokenizer does not have a padding token", cells=[
            PIP + " tokenizers",
            "%matplotlib inline\nfrom tokenizers import Tokenizer\nfrom tokenizers.models import WordLevel\n"
            "from tokenizers.pre_tokenizers import Whitespace\nfrom transformers import PreTrainedTokenizerFast",
            "words = \"the cat sat on a mat while the dog ran\".split()\n"
            "vocab = {\"[UNK]\": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(words))}}\nlen(vocab)",
            "def build_tokenizer(vocab):\n    raw = Tokenizer(WordLevel(vocab, unk_token=\"[UNK]\"))\n"
            "    raw.pre_tokenizer = Whitespace()\n    return PreTrainedTokenizerFast(tokenizer_object=raw, unk_token=\"[UNK]\")",
            "%%time\ntok = build_tokenizer(vocab)\ndisplay(tok)\ntok(\"the cat sat\")",
            ("batch = [\"the cat sat on a mat\", \"the dog ran\"]\n"
             "enc = tok(batch, padding=True, return_tensors=\"pt\")\nenc[\"input_ids\"].shape", True),
            "enc[\"attention_mask\"]",
            "tok.batch_decode(enc[\"input_ids\"])",
        ]),
        "generate_context": dict(part="", ename="IndexError", message="index out of range in self", cells=[
            PIP,
            "import torch\nfrom transformers import GPT2Config, GPT2LMHeadModel, GenerationConfig",
            "%%time\ntorch.manual_seed(0)\nmodel = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2,\n"
            "                                          vocab_size=64, n_positions=16)).eval()\nmodel.config.n_positions",
            "def sample(model, prompt, **kw):\n    \"\"\"Greedy continuation of a prompt of token ids.\"\"\"\n"
            "    ids = torch.tensor([prompt])\n    with torch.no_grad():\n"
            "        return model.generate(ids, attention_mask=torch.ones_like(ids), pad_token_id=0, **kw)",
            "short = sample(model, [1, 2, 3], max_new_tokens=4)\ndisplay(short)",
            ("%time long = sample(model, list(range(1, 11)), max_new_tokens=20, do_sample=False)\nlong.shape", True),
            "long[0].tolist()",
            "print(\"done\")",
        ]),
        "classifier_labels": dict(part="", ename="IndexError", message="Target 3 is out of bounds.", cells=[
            PIP,
            "import torch\nfrom transformers import BertConfig, BertForSequenceClassification\n%matplotlib inline",
            "%%time\nconfig = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,\n"
            "                    intermediate_size=64, num_labels=3)\nclf = BertForSequenceClassification(config)\nclf.num_labels",
            "def make_batch(n, length=6, labels=None):\n    g = torch.Generator().manual_seed(n)\n"
            "    ids = torch.randint(1, 50, (n, length), generator=g)\n"
            "    return {\"input_ids\": ids, \"attention_mask\": torch.ones_like(ids),\n"
            "            \"labels\": torch.tensor(labels if labels is not None else [0] * n)}",
            "warm = make_batch(2)\ndisplay(clf(**warm).loss)",
            ("batch = make_batch(4, labels=[0, 1, 2, 3])\nout = clf(**batch)\nout.loss.backward()\nout.loss", True),
            "torch.nn.utils.clip_grad_norm_(clf.parameters(), 1.0)",
            "out.logits.argmax(-1)",
        ]),
        # ---- held out: written with the rest, not looked at until the code was done ----------
        "t5_forward": dict(part="heldout", ename="ValueError", message="You must specify exactly one of input_ids or inputs_embeds", cells=[
            PIP + " sentencepiece",
            "import torch\nfrom transformers import T5Config, T5ForConditionalGeneration",
            "def tiny_t5(**overrides):\n    cfg = dict(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1,\n"
            "               num_decoder_layers=1, num_heads=2, decoder_start_token_id=0)\n"
            "    cfg.update(overrides)\n    return T5ForConditionalGeneration(T5Config(**cfg)).eval()",
            "%%time\nt5 = tiny_t5()\ndisplay(t5.config.d_model)\nsum(p.numel() for p in t5.parameters())",
            "src = torch.randint(1, 64, (2, 7))\nsrc.shape",
            ("%time enc_out = t5(input_ids=src, attention_mask=torch.ones_like(src))\nenc_out.logits.shape", True),
            "gen = t5.generate(src, max_new_tokens=3)\ngen",
            "%timeit t5.generate(src, max_new_tokens=1)",
        ]),
        "bf16_embeds": dict(part="heldout", ename="RuntimeError", message="mixed dtype (CPU): expect parameter to have scalar type of Float", cells=[
            PIP + " accelerate",
            "%load_ext autoreload\n%autoreload 2\nimport torch\nfrom transformers import GPT2Config, GPT2LMHeadModel",
            "def half_model(dtype=torch.bfloat16):\n    torch.manual_seed(0)\n"
            "    m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64))\n    return m.to(dtype).eval()",
            "%%time\nmodel = half_model()\nnext(model.parameters()).dtype",
            "ids = torch.randint(0, 64, (1, 5))\nwith torch.no_grad():\n    display(model(ids).logits.dtype)",
            ("embeds = torch.randn(1, 5, 32)\nwith torch.no_grad():\n    out = model(inputs_embeds=embeds)\nout.logits.shape", True),
            "out.logits.float().softmax(-1)[0, -1].topk(3)",
            "print(\"ok\")",
        ]),
    }


def _cell(source: str, failing: bool, count: int | None, error: dict | None) -> dict:
    outputs = []
    if failing and error is not None:
        outputs = [{"output_type": "error", "ename": error["ename"], "evalue": error["evalue"],
                    # Jupyter stores the traceback as ANSI-coloured lines; one colour code kept for realism
                    "traceback": ["\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
                                  *[line.rstrip("\n") for line in error["traceback"]]]}]
    elif count is not None and source.startswith("!pip"):
        outputs = [{"output_type": "stream", "name": "stdout", "text": ["Requirement already satisfied: torch\n"]}]
    lines = source.splitlines(keepends=True)
    return {"cell_type": "code", "execution_count": count, "id": hashlib.sha1(source.encode()).hexdigest()[:8],
            "metadata": {}, "outputs": outputs, "source": lines}


def run_floor(floor: Path) -> dict | None:
    proc = subprocess.run([sys.executable, "-c", _CAPTURE, str(floor)], capture_output=True, text=True,
                          timeout=300, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    if "@@ERROR@@" not in proc.stdout:
        return None
    error = json.loads(proc.stdout.split("@@ERROR@@", 1)[1])
    # A notebook's saved traceback names the cell, not the floor's path, and no one's folders:
    # runpy's own frames go and the library's folder reads as a generic site-packages.
    site = str(Path(__import__("torch").__file__).parent.parent)
    lines = [line.replace(str(floor), "<ipython-input>").replace(site, "/usr/lib/python3/site-packages")
             for line in error["traceback"]]
    error["traceback"] = [line for line in lines if "<frozen runpy>" not in line and '"<string>"' not in line]
    return error


def write(name: str, spec: dict) -> tuple[Path, dict | None]:
    folder = HERE / spec["part"]
    error = run_floor(folder / f"{name}.floor.py")
    cells, count, failed = [], 0, False
    for item in spec["cells"]:
        source, failing = (item, False) if isinstance(item, str) else item
        count += 1
        cells.append(_cell(source, failing, None if failed else count, error if failing else None))
        failed = failed or failing
    nb = {"cells": [{"cell_type": "markdown", "id": "intro", "metadata": {},
                     "source": [f"# {name.replace('_', ' ')}\n", "Exploring a tiny model on CPU."]}, *cells],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                       "language_info": {"name": "python", "version": "3.11.9"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = folder / f"{name}.ipynb"
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path, error


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only say whether each floor fails as expected")
    args = p.parse_args()
    bad = 0
    for name, spec in notebooks().items():
        floor = HERE / spec["part"] / f"{name}.floor.py"
        error = run_floor(floor) if args.check else write(name, spec)[1]
        ok = error is not None and error["ename"] == spec["ename"] and spec["message"] in error["evalue"]
        bad += not ok
        said = f"{error['ename']}: {error['evalue'][:100]}" if error else "did not fail"
        print(f"{'ok ' if ok else 'BAD'} {spec['part'] or 'train'}/{name}: {said}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
