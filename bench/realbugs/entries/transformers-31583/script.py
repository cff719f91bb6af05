"""Batch chat-completion job: loads a local chat checkpoint into a text-generation pipeline and
answers a list of support questions, writing the answers as JSON lines.

The checkpoint folder is produced by our export step; here a small one is exported first so the
job can be run on a laptop.
"""
import json
import os
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, pipeline

CONFIG = {
    "max_new_tokens": 12,
    "dtype": torch.bfloat16,
    "device_map": "auto",
    "questions": [
        "how do i reset my password",
        "where is my order",
        "can i change the delivery address",
        "how do i cancel my subscription",
    ],
}


def export_checkpoint(folder):
    """Stand-in for the export step: a small chat model and its tokenizer, saved to disk."""
    words = sorted({w for q in CONFIG["questions"] for w in q.split()} | {"yes", "no", "please", "help"})
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for w in words:
        vocab[w] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>",
                                        eos_token="</s>", pad_token="</s>")
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def answer_all(pipe, questions):
    results = []
    for q in questions:
        out = pipe(q, max_new_tokens=CONFIG["max_new_tokens"], do_sample=False)
        results.append({"question": q, "answer": out[0]["generated_text"][len(q):].strip()})
    return results


def main():
    workdir = tempfile.mkdtemp(prefix="chatjob-")
    model_dir = os.path.join(workdir, "chat-model")
    export_checkpoint(model_dir)

    pipe = pipeline("text-generation", model=model_dir, torch_dtype=CONFIG["dtype"],
                    device_map=CONFIG["device_map"])
    results = answer_all(pipe, CONFIG["questions"])
    out_path = os.path.join(workdir, "answers.jsonl")
    with open(out_path, "w") as f:
        for row in results:
            f.write(json.dumps(row) + "\n")
    print(f"wrote {len(results)} answers to {out_path}")


if __name__ == "__main__":
    main()
