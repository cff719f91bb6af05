"""Train two LoRA adapters on a tiny causal LM, save them, reload both and blend them into one.

Recipe per adapter comes from ADAPTER_RECIPES; the blend is built with add_weighted_adapter and
then evaluated against each single adapter on held-out text.

    python peft_adapter_merge.py --steps 3 --blend-weights 0.7,0.3 --combination linear
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

logger = logging.getLogger("adapter_blend")

BASE_CONFIG = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                   tie_word_embeddings=False)

ADAPTER_RECIPES = {
    # short, formal sentences: a small adapter is enough
    "formal": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
               "lora_dropout": 0.0, "seed": 11, "token_range": (10, 50)},
    # domain vocabulary needs more capacity
    "medical": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"],
                "lora_dropout": 0.0, "seed": 12, "token_range": (40, 96)},
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "adapter_blend"))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seq-len", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--blend-weights", default="0.7,0.3")
    p.add_argument("--combination", default="linear",
                   choices=["linear", "cat", "svd", "ties", "dare_linear"])
    return p.parse_args()


def build_base() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**BASE_CONFIG))


def make_batch(token_range, batch_size: int, seq_len: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    lo, hi = token_range
    return torch.randint(lo, hi, (batch_size, seq_len), generator=g)


def lora_config_from_recipe(recipe: dict) -> LoraConfig:
    keys = ("r", "lora_alpha", "target_modules", "lora_dropout")
    return LoraConfig(task_type="CAUSAL_LM", **{k: recipe[k] for k in keys})


def train_adapter(name: str, recipe: dict, args, out_dir: Path) -> Path:
    model = get_peft_model(build_base(), lora_config_from_recipe(recipe), adapter_name=name)
    trainable, total = model.get_nb_trainable_parameters()
    logger.info("[%s] trainable %d / %d params", name, trainable, total)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    model.train()
    for step in range(args.steps):
        batch = make_batch(recipe["token_range"], args.batch_size, args.seq_len,
                           recipe["seed"] + step)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        logger.info("[%s] step %d loss %.4f", name, step, loss.item())
    # non-default adapter names are written to a sub-folder named after the adapter
    model.save_pretrained(str(out_dir))
    target = out_dir / name
    logger.info("[%s] saved to %s", name, target)
    return target


@torch.no_grad()
def eval_loss(model, recipe: dict, args) -> float:
    model.eval()
    batch = make_batch(recipe["token_range"], args.batch_size, args.seq_len, recipe["seed"] + 99)
    return model(input_ids=batch, labels=batch).loss.item()


def load_all(saved: dict) -> PeftModel:
    names = list(saved)
    model = PeftModel.from_pretrained(build_base(), str(saved[names[0]]), adapter_name=names[0])
    for name in names[1:]:
        model.load_adapter(str(saved[name]), adapter_name=name)
    logger.info("loaded adapters: %s", list(model.peft_config))
    return model


def blend(model: PeftModel, names, weights, combination: str, blend_name="blend") -> str:
    logger.info("blending %s with weights %s (%s)", names, weights, combination)
    model.add_weighted_adapter(adapters=list(names), weights=list(weights),
                               adapter_name=blend_name, combination_type=combination)
    model.set_adapter(blend_name)
    return blend_name


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args()
    torch.set_num_threads(1)
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    saved = {name: train_adapter(name, recipe, args, work)
             for name, recipe in ADAPTER_RECIPES.items()}
    model = load_all(saved)

    report = {}
    for name in saved:
        model.set_adapter(name)
        report[name] = {d: eval_loss(model, r, args) for d, r in ADAPTER_RECIPES.items()}

    weights = [float(w) for w in args.blend_weights.split(",")]
    blended = blend(model, list(saved), weights, args.combination)
    report[blended] = {d: eval_loss(model, r, args) for d, r in ADAPTER_RECIPES.items()}

    for adapter, losses in report.items():
        logger.info("%-8s %s", adapter, "  ".join(f"{d}={v:.4f}" for d, v in losses.items()))
    model.save_pretrained(str(work / "blended"), selected_adapters=[blended])


if __name__ == "__main__":
    main()
