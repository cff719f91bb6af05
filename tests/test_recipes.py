"""Value recipes (issue #38): at the boundary call, a value no literal spells — a model built from a
config, a quantized or offloaded load, a PEFT wrapper, a tensor, a folder the script saved — is
rebuilt by its target's recipe (bot/targets/recipes/), wherever the failure was raised, a spawn
child included. Every test runs the real launcher over a real script with real transformers, peft
and torch, then runs the candidate it gives on its own and checks it fails the same way."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.targets.registry import recipe_files
from reducer.analysis.boundary import boundary_run, matching
from reducer.analysis.trace import subprocess_run_fn
from reducer.passes.boundary import candidates
from reducer.run.raised import HOOK_DIR

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytestmark = pytest.mark.slow

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _candidates(source: str, exc_type: str, monkeypatch) -> list[str]:
    """The boundary candidates of ``source`` (its own recorded failing call), as the search gets them."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HOOK_DIR), os.environ.get("PYTHONPATH", "")]))
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    found = boundary_run(source, subprocess_run_fn(sys.executable, timeout=300), recipe_files())
    assert found, "the launcher recorded no boundary"
    return candidates(source, matching(found, exc_type, ""), lambda expr, values: True)


def _fails(candidate: str, tmp_path: Path, needle: str) -> str:
    """Run the candidate alone in an empty folder; its stderr, which must show ``needle``."""
    folder = tmp_path / "alone"
    folder.mkdir(exist_ok=True)
    (folder / "repro.py").write_text(candidate)
    proc = subprocess.run([sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **OFFLINE})
    assert proc.returncode != 0 and needle in proc.stderr, proc.stderr[-3000:]
    return proc.stderr


def _first(found: list[str], *needles: str) -> str:
    for c in found:
        if all(n in c for n in needles):
            return c
    raise AssertionError("no candidate with " + ", ".join(needles) + ":\n" + "\n----\n".join(found))


def test_a_model_built_from_a_config_is_rebuilt_from_the_values_that_differ(tmp_path, monkeypatch):
    source = textwrap.dedent('''
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        PRESETS = {"tiny": {"n_layer": 1, "n_embd": 16, "n_head": 2, "vocab_size": 40}}
        SETTINGS = {"greedy": {"do_sample": False, "max_new_tokens": 2}}

        def build(name):
            return GPT2LMHeadModel(GPT2Config(**PRESETS[name])).eval()

        def sample(model, prompt, beams, setting):
            ids = torch.tensor([prompt])
            return model.generate(ids, num_return_sequences=beams, **SETTINGS[setting])

        sample(build("tiny"), [1, 2, 3], 2, "greedy")
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "GPT2Config(", ".generate(")
    assert "GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=16, n_layer=1, n_head=2)).eval()" in best
    assert "n_positions" not in best       # a class default is not written out
    assert "build(" not in best and "PRESETS" not in best
    _fails(best, tmp_path, "num_return_sequences")


def test_a_load_that_fails_is_written_as_that_load_of_a_checkpoint_the_recipe_saves(tmp_path, monkeypatch):
    """The load is the failure (a device_map with a disk entry: accelerate meets a meta tensor on
    this stack): the folder the script saved becomes the save that writes it, and the offload
    folder of the run a fresh relative name; the device map stays as the script gave it."""
    source = textwrap.dedent('''
        import os
        from transformers import GPT2Config, GPT2LMHeadModel

        HERE = os.path.dirname(os.path.abspath(__file__))
        CKPT, OFFLOAD = os.path.join(HERE, "ckpt"), os.path.join(HERE, "offload")

        def placement(layers):
            return {f"transformer.h.{layers - 1}": "disk", "": "cpu"}

        GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=40)).save_pretrained(CKPT)
        model = GPT2LMHeadModel.from_pretrained(CKPT, device_map=placement(2), offload_folder=OFFLOAD)
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "from_pretrained(", "save_pretrained(")
    assert ("GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=16, n_layer=2, n_head=2)).save_pretrained('reprobot_ckpt')"
            in best)
    assert "GPT2LMHeadModel.from_pretrained('reprobot_ckpt', device_map={'transformer.h.1': 'disk', '': 'cpu'}, " \
           "offload_folder='reprobot_offload')" in best
    assert "placement(" not in best and "HERE" not in best
    _fails(best, tmp_path, "is on the meta device")


def test_a_peft_wrapper_is_rebuilt_around_its_rebuilt_base(tmp_path, monkeypatch):
    source = textwrap.dedent('''
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import GPT2Config, GPT2LMHeadModel

        def wrap(base, rank):
            return get_peft_model(base, LoraConfig(r=rank, target_modules=["c_attn"], lora_dropout=0.0))

        model = wrap(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=40)), 2)
        model.generate(input_ids=torch.tensor([[1, 2]]), do_sample=False, num_return_sequences=3)
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "get_peft_model(", ".generate(")
    assert "LoraConfig(" in best and "r=2" in best and "target_modules=['c_attn']" in best
    assert "GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=16, n_layer=1, n_head=2))" in best
    assert "wrap(" not in best
    _fails(best, tmp_path, "num_return_sequences")


def test_a_tensor_is_rebuilt_by_its_shape_and_dtype(tmp_path, monkeypatch):
    source = textwrap.dedent('''
        import torch

        def features(batch, width):
            return torch.stack([torch.full((width,), float(i)) for i in range(batch)]).half()

        def project(x, layer):
            return layer(x)

        project(features(3, 20), torch.nn.Linear(20, 4))
        ''')
    found = _candidates(source, "RuntimeError", monkeypatch)
    best = _first(found, "torch.randn(")
    assert "torch.nn.Linear(in_features=20, out_features=4, bias=True)(torch.randn((3, 20), dtype=torch.float16))" in best
    assert "features(" not in best and "project(" not in best
    _fails(best, tmp_path, "RuntimeError")


def test_an_integer_tensor_keeps_the_values_that_are_the_bug(tmp_path, monkeypatch):
    # one -1 pad among 40 labels: randint over the range would hold it in about a third of the runs
    source = textwrap.dedent('''
        import torch
        import torch.nn.functional as F

        def labels_for(rows):
            out = [[(r * 7 + c) % 96 for c in range(10)] for r in range(rows)]
            out[2][9] = -1
            return torch.tensor(out)

        def loss(logits, labels):
            return F.cross_entropy(logits, labels.view(-1))

        loss(torch.zeros(40, 96), labels_for(4))
        ''')
    found = _candidates(source, "IndexError", monkeypatch)
    best = _first(found, "cross_entropy(")
    assert "randint" not in best and " -1, " in best, best
    for _ in range(3):
        _fails(best, tmp_path, "Target -1 is out of bounds")


def test_a_folder_the_script_saved_is_rebuilt_as_the_save_that_wrote_it(tmp_path, monkeypatch):
    adapter = tmp_path / "adapters" / "client"
    source = textwrap.dedent(f'''
        from peft import LoraConfig, PeftModel, get_peft_model
        from transformers import GPT2Config, GPT2LMHeadModel

        def config():
            return GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=40)

        def options(name):
            return {{"adapter_name": name, "is_trainable": False}}

        get_peft_model(GPT2LMHeadModel(config()), LoraConfig(r=4, target_modules=["c_attn"])).save_pretrained({str(adapter)!r})
        base = GPT2LMHeadModel(config())
        PeftModel.from_pretrained(base, {str(adapter)!r}, **options("bad name."))
        ''')
    found = _candidates(source, "", monkeypatch)
    best = _first(found, "save_pretrained('reprobot_client')", "PeftModel.from_pretrained(")
    assert str(tmp_path) not in best
    # **options(...) spelled out as what the classmethod received, its own parameters left alone
    assert ("from_pretrained(GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=16, n_layer=1, n_head=2)), 'reprobot_client', "
            "adapter_name='bad name.', is_trainable=False)") in best
    original = tmp_path / "original.py"
    original.write_text(source)
    cold = subprocess.run([sys.executable, str(original)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **OFFLINE})
    last = cold.stderr.strip().splitlines()[-1]
    _fails(best, tmp_path, last.split(":")[0])


def test_a_spawn_childs_failing_call_is_brought_home_with_its_four_arguments(tmp_path, monkeypatch):
    """The child's target takes four arguments (two from argparse, one a queue, one a dict) and
    serves requests from the queue; the failing call is recorded in the child and written as a
    call in one process, with the first request's values."""
    source = textwrap.dedent('''
        import argparse
        import multiprocessing as mp
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        def serve(requests, layers, beams, settings):
            model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=16, n_head=2, vocab_size=40)).eval()
            while True:
                req = requests.get()
                if req is None:
                    break
                ids = torch.tensor([req["prompt"]])
                model.generate(ids, num_return_sequences=beams, **settings[req["mode"]])

        if __name__ == "__main__":
            p = argparse.ArgumentParser()
            p.add_argument("--layers", type=int, default=1)
            p.add_argument("--beams", type=int, default=2)
            args = p.parse_args()
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            worker = ctx.Process(target=serve, args=(q, args.layers, args.beams, {"greedy": {"do_sample": False}}))
            worker.start()
            q.put({"prompt": [3, 4, 5], "mode": "greedy"})
            q.put(None)
            worker.join()
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, ".generate(")
    assert "Process" not in best and "Queue" not in best and "argparse" not in best
    assert "torch.tensor([[3, 4, 5]], dtype=torch.int64)" in best and "num_return_sequences=2" in best
    _fails(best, tmp_path, "num_return_sequences")


def test_a_quantized_load_is_rebuilt_as_the_load_with_its_quantization_config(tmp_path, monkeypatch):
    """bitsandbytes' CPU backend (skipped where it is not installed): the model the failing call
    gets was loaded in 4-bit, so its recipe is a saved tiny checkpoint loaded with the same
    keyword arguments, the BitsAndBytesConfig rebuilt from its non-default values."""
    pytest.importorskip("bitsandbytes")
    source = textwrap.dedent('''
        import os
        import torch
        from transformers import BitsAndBytesConfig, GPT2Config, GPT2LMHeadModel

        HERE = os.path.dirname(os.path.abspath(__file__))
        QUANT = {"load_in_4bit": True, "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": torch.bfloat16}

        def load(path):
            GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=64)).save_pretrained(path)
            return GPT2LMHeadModel.from_pretrained(path, device_map={"": "cpu"}, dtype=torch.bfloat16,
                                                   quantization_config=BitsAndBytesConfig(**QUANT))

        def serve(model, prompt):
            return model.generate(torch.tensor([prompt]), do_sample=False, num_return_sequences=2, max_new_tokens=2)

        serve(load(os.path.join(HERE, "ckpt")), [1, 2, 3])
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = found[0]
    assert "GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=64, n_layer=2, n_head=2)).save_pretrained('reprobot_model')" in best
    assert ("quantization_config=BitsAndBytesConfig(bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype='bfloat16', "
            "load_in_4bit=True)") in best
    assert "load(" not in best and "serve(" not in best
    _fails(best, tmp_path, "num_return_sequences")


def test_a_tokenizer_built_in_code_is_built_again_from_its_vocabulary(tmp_path, monkeypatch):
    source = textwrap.dedent('''
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        WORDS = ["hello", "world", "how", "are", "you"]

        def build(words):
            t = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}, unk_token="[UNK]"))
            t.pre_tokenizer = pre_tokenizers.Whitespace()
            return PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]")

        def encode(tok, texts):
            return tok(texts, padding=True)

        encode(build(WORDS), ["hello world", "how are you today"])
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = found[0]
    assert "models.WordLevel(vocab={t: i for i, t in enumerate(['[UNK]', 'hello', 'world', 'how', 'are', 'you'])}" in best
    assert "reprobot_tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()" in best
    assert "build(" not in best and "encode(" not in best
    _fails(best, tmp_path, "Asking to pad but the tokenizer does not have a padding token")


def test_a_bpe_tokenizer_trained_in_code_is_built_again_with_its_parts_and_chat_template(tmp_path, monkeypatch):
    # a BPE trained in code (a Metaspace pre-tokenizer and decoder, trainer-added special tokens)
    # and a dict of named chat templates: the failing call needs the templates; the WordLevel-only
    # recipe had none for it, so its slice (trainer, corpus, helper) stayed
    source = textwrap.dedent('''
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import PreTrainedTokenizerFast

        CORPUS = ["please reset my password", "where is my order", "thanks for the quick answer"] * 4

        def build(texts):
            tk = Tokenizer(models.BPE(unk_token="<unk>"))
            tk.pre_tokenizer = pre_tokenizers.Metaspace()
            tk.decoder = decoders.Metaspace()
            tk.train_from_iterator(texts, trainer=trainers.BpeTrainer(vocab_size=60, special_tokens=["<pad>", "<unk>"],
                                                                      show_progress=False))
            tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>")
            tok.chat_template = {"chat": "{% for m in messages %}{{ m['content'] }}{% endfor %}", "short": "x"}
            return tok

        def answer(tok, text):
            return tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False)

        answer(build(CORPUS), "where is my order")
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "models.BPE(")
    assert "merges=[" in best and "pre_tokenizers.Metaspace(" in best and "decoders.Metaspace(" in best
    assert "chat_template={'chat':" in best and "BpeTrainer" not in best and "build(" not in best
    _fails(best, tmp_path, "multiple chat templates")


def test_a_feature_extractor_and_numpy_arrays_are_rebuilt(tmp_path, monkeypatch):
    # audio clips made by the user's numpy code and a feature extractor called at the wrong
    # sampling rate: the extractor is its settings that differ from its defaults, each clip a
    # random array of its shape and dtype (integer labels as they are)
    source = textwrap.dedent('''
        import numpy as np
        from transformers import Wav2Vec2FeatureExtractor

        def synth(n, rate):
            t = np.arange(n, dtype=np.float32) / rate
            return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)

        def featurize(extractor, clips, labels, rate):
            out = extractor(clips, sampling_rate=rate, padding=True, return_tensors="np")
            return out, np.asarray(labels)

        extractor = Wav2Vec2FeatureExtractor(return_attention_mask=True, padding_value=0.5)
        clips = [synth(n, 8000) for n in (2400, 3100)]
        featurize(extractor, clips, np.array([2, 0, 1], dtype=np.int64), 8000)
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "Wav2Vec2FeatureExtractor(")
    assert "Wav2Vec2FeatureExtractor(padding_value=0.5, return_attention_mask=True)" in best \
        or "Wav2Vec2FeatureExtractor(return_attention_mask=True, padding_value=0.5)" in best
    assert "np.random.randn(*(2400,)).astype(np.float32)" in best and "synth(" not in best
    _fails(best, tmp_path, "sampling rate")


def test_a_trainer_the_script_built_is_its_constructor_call_with_each_part_rebuilt(tmp_path, monkeypatch):
    # the failing call is trainer.train(): the Trainer has no recipe, so it is written as the call
    # that built it; its model, TrainingArguments and the script's own Dataset (a list of its items)
    # are rebuilt, the script's callback keeps its class; the config dataclass and helpers go
    source = textwrap.dedent('''
        import tempfile
        from dataclasses import dataclass
        import torch
        from torch.utils.data import Dataset
        from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

        @dataclass
        class Run:
            steps: int = 1
            rows: int = 2

        class Rows(Dataset):
            def __init__(self, n):
                self.rows = [[1 + i, 2 + i, 3] for i in range(n)]
            def __len__(self):
                return len(self.rows)
            def __getitem__(self, i):
                ids = torch.tensor(self.rows[i])
                return {"input_ids": ids, "labels": ids.clone()}

        class EvalEveryStep(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                control.should_evaluate = True

        def model_for(run):
            return GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=1, vocab_size=16, n_positions=8))

        def main():
            run = Run()
            with tempfile.TemporaryDirectory() as out:
                args = TrainingArguments(output_dir=out, max_steps=run.steps, per_device_train_batch_size=2,
                                         report_to=[], use_cpu=True, save_strategy="no", disable_tqdm=True)
                trainer = Trainer(model=model_for(run), args=args, train_dataset=Rows(run.rows),
                                  callbacks=[EvalEveryStep()])
                trainer.train()

        main()
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "Trainer(model=GPT2LMHeadModel(GPT2Config(")
    assert "args=TrainingArguments(output_dir='reprobot_tmp', " in best and "max_steps=1" in best
    assert "train_dataset=[{'input_ids': torch.tensor([1, 2, 3], dtype=torch.int64)" in best
    assert "callbacks=[EvalEveryStep()]).train()" in best and "class EvalEveryStep" in best
    assert "class Rows" not in best and "class Run" not in best and "model_for" not in best
    _fails(best, tmp_path, "evaluation requires an eval_dataset")


def test_a_ddp_wrapper_in_a_group_of_one_is_rebuilt_as_the_module_it_wraps(tmp_path, monkeypatch):
    """A rank brought home as rank 0 of a world of one (reducer/passes/ranks.py) still wraps its
    model in DDP; with no peer the wrapper's forward is the module's, so the call is rebuilt on
    the module alone and the process group goes with it."""
    source = textwrap.dedent('''
        import torch
        import torch.distributed as dist

        def run(rank, world):
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=rank, world_size=world)
            model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(6, 2))
            batch = torch.ones(3, 5)
            model(batch)

        run(0, 1)
        ''')
    found = _candidates(source, "RuntimeError", monkeypatch)
    best = _first(found, "torch.nn.Linear(in_features=6")
    assert "DistributedDataParallel" not in best and "init_process_group" not in best, best
    _fails(best, tmp_path, "RuntimeError")


def test_a_tokenizers_output_and_a_models_own_generation_config_are_rebuilt(tmp_path, monkeypatch):
    """A generation service's shape: ``model.generate(**enc, **params)`` where ``enc`` came from a
    tokenizer and the model was given a generation config of its own (what ``generate`` reads:
    the bug). The BatchEncoding is its ids and mask written out, and the model is built from its
    config and given that generation config, so neither the tokenizer nor the service is needed."""
    source = textwrap.dedent('''
        import torch
        from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel

        def encode(ids):
            from transformers import BatchEncoding
            return BatchEncoding({"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)})

        def answer(model, enc, params):
            return model.generate(**enc, **params.get("sampling", {}))

        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16))
        model.generation_config = GenerationConfig(**{**{"do_sample": True}, **{"temperature": 0.0}})
        answer(model, encode([1, 2, 3]), {"sampling": {"max_new_tokens": 2}})
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "BatchEncoding({'input_ids': torch.tensor([[1, 2, 3]]")
    assert "encode(" not in best and "answer(" not in best, best
    assert "generation_config = GenerationConfig(do_sample=True, temperature=0.0" in best, best
    _fails(best, tmp_path, "temperature")


def test_a_pruned_layer_is_the_layer_then_as_many_entries_pruned(tmp_path, monkeypatch):
    """torch.nn.utils.prune keeps ``weight`` as ``weight_orig`` and a mask; a later prune's amount
    is taken from the entries left, so the layer is rebuilt pruned by the count its mask holds."""
    source = textwrap.dedent('''
        import torch
        from torch.nn.utils import prune

        SHARE = {"first": 0.5, "then": 0.8}

        def shrink(layer, share):
            prune.l1_unstructured(layer, name="weight", amount=int(share * layer.weight.numel()))

        layer = torch.nn.Linear(6, 4)
        shrink(layer, SHARE["first"])
        shrink(layer, SHARE["then"])
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "reprobot_pruned = torch.nn.Linear(in_features=6, out_features=4, bias=True)",
                  "torch.nn.utils.prune.l1_unstructured(reprobot_pruned, 'weight', amount=12)")
    assert "shrink(" not in best and "SHARE" not in best, best
    _fails(best, tmp_path, "should be smaller than the number of parameters to prune=12")


def test_a_pipeline_is_rebuilt_from_its_task_and_parts(tmp_path, monkeypatch):
    """A zero-shot pipeline over a model built from a config and a tokenizer built in code: the
    pipeline call fails in its own argument handler, so the pipeline is the value rebuilt."""
    source = textwrap.dedent('''
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast, pipeline

        words = ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "refund", "late", "about"]
        backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                      cls_token="[CLS]", sep_token="[SEP]")
        cfg = BertConfig(vocab_size=len(words), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=8, label2id={"entailment": 0, "neutral": 1, "contradiction": 2},
                         id2label={0: "entailment", 1: "neutral", 2: "contradiction"})
        clf = pipeline("zero-shot-classification", model=BertForSequenceClassification(cfg), tokenizer=tok)
        clf(["refund late"], ["refund", "late"], hypothesis_template="about %s")
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "pipeline('zero-shot-classification', model=BertForSequenceClassification(")
    assert "tokenizer=" in best and "clf" not in best, best
    _fails(best, tmp_path, "was not able to be formatted with the target labels")


def test_a_prepared_scheduler_is_prepared_again_over_its_rebuilt_optimizer(tmp_path, monkeypatch):
    """accelerate's AcceleratedScheduler -> ``Accelerator().prepare(<the torch scheduler>)``; the
    scheduler keeps its own settings (``factor``, ``patience``) and its optimizer is rebuilt over
    fresh parameters, a model's forty as one flat parameter per group, its groups' settings kept."""
    source = textwrap.dedent('''
        import torch
        from accelerate import Accelerator

        SETTINGS = {"lr": 2e-3, "plateau": {"mode": "min", "factor": 0.5, "patience": 1}}

        model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(20)])
        decay = [p for n, p in model.named_parameters() if not n.endswith("bias")]
        plain = [p for n, p in model.named_parameters() if n.endswith("bias")]
        optimizer = torch.optim.AdamW([{"params": decay}, {"params": plain, "weight_decay": 0.0}], lr=SETTINGS["lr"])
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **SETTINGS["plateau"])
        accelerator = Accelerator(cpu=True)
        model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
        optimizer.step()
        scheduler.step()
        ''')
    found = _candidates(source, "TypeError", monkeypatch)
    best = _first(found, "Accelerator().prepare(torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.AdamW(")
    assert ("[{'params': [torch.zeros((320,), requires_grad=True)]}, "
            "{'params': [torch.zeros((80,), requires_grad=True)], 'weight_decay': 0.0}], lr=0.002)") in best, best
    assert "factor=0.5, patience=1)" in best and "SETTINGS" not in best, best
    _fails(best, tmp_path, "missing 1 required positional argument: 'metrics'")


def test_an_optimizer_over_a_few_parameters_keeps_their_shapes(tmp_path, monkeypatch):
    source = textwrap.dedent('''
        import torch

        layer = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
        torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1)
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "torch.optim.SGD([torch.zeros((2, 3), requires_grad=True), torch.zeros((2,), requires_grad=True)]")
    assert "lr=0.1, momentum=0.9)" in best and "layer" not in best, best
    _fails(best, tmp_path, "ValueError")


def test_a_merged_adapter_still_held_is_merged_again(tmp_path, monkeypatch):
    """``merge_adapter`` (not ``merge_and_unload``) keeps the adapter, merged: deleting it next
    fails. The wrapper is rebuilt around its base and merged again before the call."""
    source = textwrap.dedent('''
        from peft import LoraConfig, get_peft_model
        from transformers import GPT2Config, GPT2LMHeadModel

        STAGES = [{"name": "chat", "r": 2}, {"name": "sql", "r": 4}]
        first = STAGES[0]
        model = get_peft_model(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=40)),
                               LoraConfig(r=first["r"], target_modules=["c_attn"]), adapter_name=first["name"])
        model.merge_adapter()
        model.delete_adapter(first["name"])
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, "reprobot_peft = get_peft_model(", "reprobot_peft.merge_adapter()\n",
                  "reprobot_peft.delete_adapter('chat')")
    assert "STAGES" not in best, best
    _fails(best, tmp_path, "while they are merged")


def test_a_generation_setting_left_on_the_models_config_is_the_generation_configs_own(tmp_path, monkeypatch):
    """``model.config.decoder_start_token_id = ...`` after the model was built never reaches
    ``generate`` (it reads the generation config); a model built from that config would get it,
    so the model is given its own generation config, without it."""
    source = textwrap.dedent('''
        import torch
        from transformers import BertConfig, EncoderDecoderConfig, EncoderDecoderModel

        small = dict(vocab_size=12, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
        model = EncoderDecoderModel(EncoderDecoderConfig.from_encoder_decoder_configs(BertConfig(**small), BertConfig(**small)))
        model.config.decoder_start_token_id = 2
        model.generate(torch.ones(1, 3, dtype=torch.long), max_new_tokens=2)
        ''')
    found = _candidates(source, "ValueError", monkeypatch)
    best = _first(found, ".generation_config = GenerationConfig(", ".generate(")
    assert "decoder_start_token_id=2" in best, best       # the config says it; the generation config does not
    _fails(best, tmp_path, "`decoder_start_token_id` or `bos_token_id` has to be defined")


def test_a_slice_keeps_its_strides_so_view_fails_on_them(tmp_path, monkeypatch):
    """pytorch#136327's shape: a slice of a conv's output viewed by the user's own head raises in C
    (no library frame), on the slice's layout: the rebuilt tensor keeps its strides."""
    source = textwrap.dedent('''
        import torch

        class Head(torch.nn.Module):
            def __init__(self, groups, shape):
                super().__init__()
                self.groups, self.shape = groups, shape

            def forward(self, feats):
                return feats.view(self.groups, *self.shape)

        conv = torch.nn.Conv2d(3, 8, 3, padding=2)
        feats = conv(torch.randn(4, 3, 10, 6))[:, :-2, :-1]
        Head(6, (4, 11, 8))(feats)
        ''')
    found = _candidates(source, "RuntimeError", monkeypatch)
    best = _first(found, "torch.empty_strided(")
    assert "Head(" not in best and "conv" not in best and ".view(6, *(4, 11, 8))" in best, best
    _fails(best, tmp_path, "view size is not compatible with input tensor's size and stride")
