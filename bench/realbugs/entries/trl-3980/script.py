"""QLoRA GRPO on a transcription-style task: the policy is loaded in 8-bit (or 4-bit) and a LoRA adapter is
trained with a reward that penalises the edit distance to a reference string.

The real run uses a vision-language checkpoint and a custom loader; here the checkpoint is a tiny
Qwen2 built from a config, saved to a temp folder and reloaded through bitsandbytes, and the
prompts/references are generated in code so the script runs offline on a CPU.
"""
import argparse
import random
import tempfile

import torch
from datasets import Dataset
from peft import LoraConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BitsAndBytesConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig, GRPOTrainer

WORDS = ["invoice", "total", "date", "amount", "paid", "due", "tax", "net", "gross", "items",
         "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "zero"]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--num_generations", type=int, default=4)
    ap.add_argument("--max_steps", type=int, default=2)
    ap.add_argument("--gradient_checkpointing", action="store_true", default=True)
    ap.add_argument("--bits", type=int, default=8, choices=[4, 8], help="bitsandbytes precision of the frozen base")
    ap.add_argument("--seed", type=int, default=5)
    return ap.parse_args()


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def reward_func(prompts, completions, ground_truth, **kwargs):
    rewards = []
    for pred, gt in zip(completions, ground_truth):
        rewards.append(-edit_distance(pred.strip(), gt.strip()) / max(len(gt.strip()), 1))
    return rewards


def make_rows(rng, n):
    rows = []
    for _ in range(n):
        line = " ".join(rng.choice(WORDS) for _ in range(4))
        rows.append({"prompt": f"read the line : {line} ->", "ground_truth": line})
    return rows


def build_tokenizer(rows):
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "<|pad|>": 2}
    for w in WORDS + [w for r in rows for w in r["prompt"].split()]:
        vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>",
                                  pad_token="<|pad|>", model_input_names=["input_ids", "attention_mask"])
    tok.padding_side = "left"
    return tok


def load_quantized_policy(tokenizer, workdir, bits):
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    Qwen2ForCausalLM(config).save_pretrained(workdir)
    if bits == 4:
        bnb_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                        bnb_4bit_compute_dtype=torch.float32)
    else:
        bnb_config = BitsAndBytesConfig(load_in_8bit=True)
    return Qwen2ForCausalLM.from_pretrained(workdir, quantization_config=bnb_config)


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    rows = make_rows(rng, args.samples)
    tokenizer = build_tokenizer(rows)
    dataset = Dataset.from_list(rows)

    with tempfile.TemporaryDirectory() as workdir:
        model = load_quantized_policy(tokenizer, workdir, args.bits)
        print(f"loaded in {args.bits}bit:", getattr(model, f"is_loaded_in_{args.bits}bit"))
        lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["q_proj", "v_proj"],
                          task_type="CAUSAL_LM")
        training_args = GRPOConfig(output_dir=f"{workdir}/grpo-ocr", learning_rate=1e-4,
                                   per_device_train_batch_size=args.num_generations,
                                   gradient_accumulation_steps=1, num_generations=args.num_generations,
                                   max_prompt_length=32, max_completion_length=8, max_steps=args.max_steps,
                                   logging_steps=1, save_strategy="no", report_to="none", bf16=False,
                                   gradient_checkpointing=args.gradient_checkpointing, seed=args.seed)
        trainer = GRPOTrainer(model=model, reward_funcs=reward_func, args=training_args, train_dataset=dataset,
                              processing_class=tokenizer, peft_config=lora)
        trainer.train()
        print("final log:", trainer.state.log_history[-1])


if __name__ == "__main__":
    main()
