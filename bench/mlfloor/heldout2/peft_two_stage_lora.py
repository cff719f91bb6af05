"""Two-stage LoRA tuning of a tiny Mistral-style model: stage 1 on generic chat, stage 2 on SQL.

Stage 1's adapter is folded into the base weights before stage 2 starts, so that stage 2 learns
on top of it and only one small adapter has to be shipped. The recipe is kept as YAML so that it
can be diffed between runs.

    python peft_two_stage_lora.py --steps 4 --lr 3e-3
"""
import argparse
import time

import torch
import yaml
from peft import LoraConfig, get_peft_model
from transformers import MistralConfig, MistralForCausalLM

RECIPE_YAML = """
model:
  vocab_size: 64
  hidden_size: 32
  intermediate_size: 64
  num_hidden_layers: 2
  num_attention_heads: 4
  num_key_value_heads: 2
  max_position_embeddings: 64
stages:
  - name: chat
    lora:
      r: 8
      lora_alpha: 16
      lora_dropout: 0.0
      target_modules: [q_proj, v_proj]
      bias: none
      task_type: CAUSAL_LM
    data_seed: 1
  - name: sql
    lora:
      r: 4
      lora_alpha: 8
      lora_dropout: 0.0
      target_modules: [q_proj, k_proj, v_proj, o_proj]
      bias: none
      task_type: CAUSAL_LM
    data_seed: 2
"""


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=12)
    return p.parse_args()


def synthetic_batches(vocab_size, n_batches, batch_size, seq_len, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n_batches):
        # a learnable pattern: token t+1 = (token t + stride) mod vocab
        start = torch.randint(2, vocab_size, (batch_size, 1), generator=g)
        stride = 1 + seed
        ids = (start + stride * torch.arange(seq_len)) % vocab_size
        yield {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def train_stage(model, stage, args, vocab_size):
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr)
    model.train()
    losses = []
    for step, batch in enumerate(synthetic_batches(vocab_size, args.steps, args.batch_size,
                                                   args.seq_len, stage["data_seed"])):
        out = model(**batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(out.loss.item())
        print(f"  [{stage['name']}] step {step} loss {losses[-1]:.4f}")
    return losses


@torch.no_grad()
def eval_loss(model, stage, args, vocab_size):
    model.eval()
    batch = next(synthetic_batches(vocab_size, 1, args.batch_size, args.seq_len,
                                   stage["data_seed"] + 100))
    return model(**batch).loss.item()


def trainable_summary(model):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return f"{trainable}/{total} trainable ({100 * trainable / total:.2f}%)"


def main():
    args = parse_args()
    recipe = yaml.safe_load(RECIPE_YAML)
    torch.manual_seed(0)
    base = MistralForCausalLM(MistralConfig(**recipe["model"]))
    vocab_size = recipe["model"]["vocab_size"]

    first, second = recipe["stages"]
    model = get_peft_model(base, LoraConfig(**first["lora"]), adapter_name=first["name"])
    print(f"stage {first['name']}: {trainable_summary(model)}")
    t0 = time.time()
    train_stage(model, first, args, vocab_size)
    print(f"stage {first['name']} done in {time.time() - t0:.1f}s, "
          f"eval loss {eval_loss(model, first, args, vocab_size):.4f}")

    # fold stage 1 into the base weights, then drop its LoRA tensors
    model.merge_adapter()
    print(f"merged eval loss {eval_loss(model, first, args, vocab_size):.4f}")
    model.delete_adapter(first["name"])

    model.add_adapter(second["name"], LoraConfig(**second["lora"]))
    model.set_adapter(second["name"])
    print(f"stage {second['name']}: {trainable_summary(model)}")
    train_stage(model, second, args, vocab_size)
    print(f"stage {second['name']} eval loss {eval_loss(model, second, args, vocab_size):.4f}")
    model.save_pretrained("lora_sql_stage2")


if __name__ == "__main__":
    main()
