"""Drafts name the library call, never the user's helper (issue #40): five real failures raised in
library code called from a helper of the script, each routed from its own traceback; the entry
point, the title and the Expected-behaviour line name the library function the helper entered
(its class read from the library's source where the user called it through a variable), and an
error the user's own code raises is never titled ``RuntimeError: RuntimeError: ...``."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.issue.draft import _expected, make_title
from bot.upstream.failure import failure_from_text
from bot.upstream.route import route
from reducer.failure.tracebacks import parse_tracebacks

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytestmark = pytest.mark.slow

CASES = {
    # a @torch.no_grad() helper: the outer step into the library is torch's decorate_context
    "generate_in_a_no_grad_helper": ('''
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        @torch.no_grad()
        def sample(model, ids, n):
            return model.generate(ids, do_sample=False, num_return_sequences=n, max_new_tokens=2)

        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=1, vocab_size=16)).eval()
        sample(model, torch.tensor([[1, 2]]), 3)
        ''', "GenerationMixin.generate"),
    # a module called through a variable: past torch's _call_impl plumbing to DDP's forward
    "ddp_model_called_in_a_helper": ('''
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        def step(model, x):
            return model(x)

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
        dist.init_process_group("gloo", rank=0, world_size=1)
        step(DDP(torch.nn.Linear(4, 2)), torch.zeros(3, 5))
        ''', "DistributedDataParallel.forward"),
    # a tokenizer called through a variable
    "tokenizer_called_in_a_helper": ('''
        from tokenizers import Tokenizer
        from tokenizers.models import WordLevel
        from transformers import PreTrainedTokenizerFast

        def encode(tok, texts):
            return tok(texts, padding=True)

        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")))
        encode(tok, ["a", "a a"])
        ''', "PreTrainedTokenizerBase.__call__"),
    # a library function called by its own name: as the user spelled it
    "peft_function_in_a_helper": ('''
        import torch
        from peft import LoraConfig, get_peft_model

        def wrap(model):
            return get_peft_model(model, LoraConfig(target_modules=["nowhere"]))

        wrap(torch.nn.Sequential(torch.nn.Linear(2, 2)))
        ''', "get_peft_model"),
    # a classmethod spelled through its class: as the user spelled it
    "from_pretrained_in_a_helper": ('''
        from transformers import GPT2LMHeadModel

        def load(path):
            return GPT2LMHeadModel.from_pretrained(path, local_files_only=True)

        load("no-such-local-folder")
        ''', "GPT2LMHeadModel.from_pretrained"),
}


def _failure(source: str, tmp_path: Path) -> str:
    (tmp_path / "script.py").write_text(textwrap.dedent(source))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PORT": str(29600 + os.getpid() % 300)}
    proc = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode != 0 and "Traceback" in proc.stderr, proc.stderr[-2000:]
    return proc.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_entry_point_is_the_library_call_not_the_helper(name: str, tmp_path: Path) -> None:
    source, entry = CASES[name]
    text = _failure(source, tmp_path)
    r = route(failure_from_text(text))
    assert r.entry_point == entry, (r.entry_point, text[-1500:])
    record = parse_tracebacks(text)[-1]
    title = make_title(r.entry_point, record, r.model_family)
    assert title.startswith(entry) and f"{record.exc_type}: {record.exc_type}" not in title
    helper = {"generate_in_a_no_grad_helper": "sample", "ddp_model_called_in_a_helper": "step",
              "tokenizer_called_in_a_helper": "encode", "peft_function_in_a_helper": "wrap",
              "from_pretrained_in_a_helper": "load"}[name]
    assert f"`{helper}(" not in _expected(r.entry_point, record) and f"`{entry}(...)`" in _expected(r.entry_point, record)


def test_the_users_own_raise_is_not_titled_twice(tmp_path: Path) -> None:
    text = _failure('''
        def load(path):
            raise RuntimeError("cannot load " + path)

        load("weights.bin")
        ''', tmp_path)
    r = route(failure_from_text(text))
    record = parse_tracebacks(text)[-1]
    title = make_title(r.entry_point, record, r.model_family)
    assert title == "RuntimeError: cannot load weights.bin", title


def test_without_routing_a_called_module_is_named_by_the_method_past_the_plumbing() -> None:
    # a draft built before `route` ran (no route.json): the stored traceback's frames alone, paths
    # written ``<env>/...`` as reprobot stores them, the class read from this interpreter's torch
    from bot.issue.draft import entry_point
    from reducer.failure.outcome import Frame, TracebackRecord
    import torch.nn.parallel.distributed as ddp
    line = next(i for i, text in enumerate(Path(ddp.__file__).read_text().splitlines(), 1)
                if text.strip().startswith("def forward(self, *inputs"))
    plumbing = [Frame("<env>/torch/nn/modules/module.py", 1, "_wrapped_call_impl", "return self._call_impl(*args)"),
                Frame("<env>/torch/nn/modules/module.py", 2, "_call_impl", "return forward_call(*args)"),
                Frame("<env>/torch/nn/parallel/distributed.py", line + 2, "forward", "self._pre_forward(*inputs)")]
    for script_line in ("loss = model(x).sum()", "DDP(nn.Linear(4, 4))(torch.randn(3, 4)).sum()"):
        record = TracebackRecord(exc_type="RuntimeError", message="Expected to have finished reduction",
                                 frames=[Frame("/w/train.py", 9, "step", script_line), *plumbing], text="")
        assert entry_point(record, "train.py", None) == "DistributedDataParallel.forward"
    # no script frame shown at all: the first library function that is not plumbing
    record = TracebackRecord(exc_type="RuntimeError", message="m", frames=plumbing, text="")
    assert entry_point(record, "train.py", None) == "DistributedDataParallel.forward"
