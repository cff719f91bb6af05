"""Score candidate answers with a Llama model adapted by adaption prompts (LLaMA-Adapter).

Each candidate is scored by the model's logits on a short prompt; the adapter is freshly
initialised here (the trained one is loaded in production). The model is a tiny Llama built
from a config, and the tokenizer a word-level one over the prompts written below.
"""
import argparse
import json
import os

import torch
from peft import AdaptionPromptConfig, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

PROMPTS = [
    ("is the sky blue", ["yes", "no"]),
    ("is fire cold", ["yes", "no"]),
    ("do fish swim", ["yes", "no"]),
    ("can a stone talk", ["yes", "no"]),
]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter_len", type=int, default=4)
    ap.add_argument("--adapter_layers", type=int, default=2)
    ap.add_argument("--max_length", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", default="adapter_scores.json", help="where to write the per-question scores")
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3, "question:": 4, "answer:": 5}
    for question, answers in PROMPTS:
        for word in question.split() + answers:
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>",
                                        eos_token="</s>", pad_token="<pad>",
                                        model_input_names=["input_ids", "attention_mask"])
    tokenizer.padding_side = "left"
    return tokenizer


def build_model(tokenizer, args):
    torch.manual_seed(args.seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                         bos_token_id=1, eos_token_id=2, pad_token_id=3)
    model = LlamaForCausalLM(config)
    peft_config = AdaptionPromptConfig(adapter_len=args.adapter_len, adapter_layers=args.adapter_layers,
                                       task_type="CAUSAL_LM")
    model = get_peft_model(model, peft_config)
    model.print_trainable_parameters()
    return model


def candidate_scores(model, tokenizer, question, answers, max_length):
    texts = [f"question: {question} answer: {a}" for a in answers]
    batch = tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=max_length)
    model_inputs = batch["input_ids"]
    attention_masks = batch["attention_mask"]
    with torch.no_grad():
        logits = model(input_ids=model_inputs, attention_mask=attention_masks).get("logits")
    log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
    targets = model_inputs[:, 1:]
    token_scores = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * attention_masks[:, 1:]
    return token_scores.sum(dim=-1)


def calibrate(scores):
    """Turn raw log-likelihoods into probabilities over the candidates (softmax over answers)."""
    return torch.softmax(scores, dim=-1).tolist()


def write_report(rows, path):
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        json.dump(rows, f, indent=2)
    print(f"wrote {len(rows)} rows to {path}")


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, args)
    model.eval()
    rows = []
    for question, answers in PROMPTS:
        scores = candidate_scores(model, tokenizer, question, answers, args.max_length)
        probs = calibrate(scores)
        best = answers[int(scores.argmax())]
        rows.append({"question": question, "answers": answers, "probs": probs, "best": best})
        print(f"{question!r}: {dict(zip(answers, [round(p, 3) for p in probs]))} -> {best}")
    write_report(rows, args.report)


if __name__ == "__main__":
    main()
