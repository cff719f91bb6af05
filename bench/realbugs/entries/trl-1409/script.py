"""PPO on a toy 'be polite' reward: the policy is rewarded for answering with polite words.

Policy and reference are small GPT-2s built from a config; the reward is computed in code.
"""
import os
import random
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from trl import AutoModelForCausalLMWithValueHead, PPOConfig, PPOTrainer

config = {
    "steps": 2,
    "batch_size": 4,
    "mini_batch_size": 2,
    "learning_rate": 1.41e-5,
    "gen_kwargs": {"max_new_tokens": 6, "do_sample": True, "top_k": 0, "top_p": 1.0},
}
POLITE = {"please", "thanks", "kindly", "sorry"}
PROMPTS = ["could you help me", "tell me the time", "open the door", "where is the station"]
WORDS = sorted(POLITE | {w for p in PROMPTS for w in p.split()} | {"now", "yes", "no", "ok"})


def build_tokenizer():
    vocab = {"<unk>": 0, "<eos>": 1}
    for w in WORDS:
        vocab[w] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>")
    tok.pad_token = tok.eos_token
    return tok


def reward(text):
    words = text.split()
    return float(sum(w in POLITE for w in words)) / max(len(words), 1)


def main():
    random.seed(0)
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    gpt2 = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=64,
                      bos_token_id=1, eos_token_id=1)
    base_dir = os.path.join(tempfile.mkdtemp(), "policy-init")
    GPT2LMHeadModel(gpt2).save_pretrained(base_dir)
    model = AutoModelForCausalLMWithValueHead.from_pretrained(base_dir)
    ref_model = AutoModelForCausalLMWithValueHead.from_pretrained(base_dir)

    ppo_config = PPOConfig(batch_size=config["batch_size"], mini_batch_size=config["mini_batch_size"],
                           learning_rate=config["learning_rate"], log_with=None)
    trainer = PPOTrainer(ppo_config, model, ref_model, tokenizer)

    for step in range(config["steps"]):
        prompts = random.sample(PROMPTS * 2, config["batch_size"])
        queries = [tokenizer(p, return_tensors="pt").input_ids[0] for p in prompts]
        responses = trainer.generate(queries, return_prompt=False, pad_token_id=tokenizer.eos_token_id,
                                     **config["gen_kwargs"])
        texts = [tokenizer.decode(r) for r in responses]
        rewards = [torch.tensor(reward(t)) for t in texts]
        stats = trainer.step(queries, responses, rewards)
        print(step, sum(r.item() for r in rewards) / len(rewards), stats["ppo/loss/total"])


if __name__ == "__main__":
    main()
