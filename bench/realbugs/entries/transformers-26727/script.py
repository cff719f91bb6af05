"""Local chat with a quantised Llama-2 checkpoint we downloaded from a community repository.

The download step (stood in for here) leaves the repository's files in a local folder; the
script then loads model and tokenizer from that folder with transformers and chats.
"""
import argparse
import os
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO_FILES = {
    "llama-2-7b.ggmlv3.q4_0.bin": 4096,
    "README.md": 256,
    "LICENSE.txt": 128,
    "USE_POLICY.md": 64,
}
SYSTEM = "You are a helpful assistant."


def download_repo(folder):
    """Stand-in for the snapshot download: the same file names, filler bytes."""
    os.makedirs(folder, exist_ok=True)
    for name, size in REPO_FILES.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"\x00" * size)
    return folder


def build_prompt(history, user):
    lines = [f"[INST] <<SYS>> {SYSTEM} <</SYS>>"]
    for q, a in history:
        lines.append(f"{q} [/INST] {a} </s><s>[INST]")
    lines.append(f"{user} [/INST]")
    return " ".join(lines)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max_new_tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.7)
    return ap.parse_args()


def chat(model, tokenizer, questions, args):
    history = []
    for q in questions:
        inputs = tokenizer(build_prompt(history, q), return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=args.max_new_tokens, do_sample=True,
                                 temperature=args.temperature)
        answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        history.append((q, answer))
        print(f">>> {q}\n{answer}\n")


def main():
    args = parse_args()
    folder = download_repo(os.path.join(tempfile.mkdtemp(), "Llama-2-7B-GGML"))
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float16)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    chat(model, tokenizer, ["hello, who are you?", "tell me a joke"], args)


if __name__ == "__main__":
    main()
