"""Offline replay of a completion service: a wrapper class around model + tokenizer that turns
each request's sampling parameters into a GenerationConfig, as the HTTP handler does.

    python gen_service_requests.py --max-new-tokens-cap 16
"""
import argparse
import json
import logging
import time
from dataclasses import dataclass, field

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

log = logging.getLogger("gen-service")

WORDS = ("hello hi thanks bye what when where who how is are the a an order status shipped "
         "delivered today tomorrow yes no maybe please help me with my account card refund "
         "question answer sure ok great").split()

REQUESTS = [
    {"id": "r1", "prompt": "hello what is my order status", "max_tokens": 8},
    {"id": "r2", "prompt": "please help me with my card", "max_tokens": 6, "temperature": 0.7,
     "top_p": 0.9, "seed": 7},
    {"id": "r3", "prompt": "when is my refund", "max_tokens": 10, "temperature": 1.0,
     "top_k": 5, "seed": 11},
    {"id": "r4", "prompt": "is my order shipped", "max_tokens": 12, "stop": ["bye", "thanks"]},
    {"id": "r5", "prompt": "who are you", "max_tokens": 4},
]


@dataclass
class ServiceLimits:
    max_new_tokens_cap: int = 16
    default_temperature: float = 1.0
    allowed_keys: tuple = ("max_tokens", "temperature", "top_p", "top_k", "stop", "seed",
                           "repetition_penalty")
    stats: dict = field(default_factory=lambda: {"served": 0, "tokens": 0})


def build_tokenizer():
    vocab = {t: i for i, t in enumerate(["<pad>", "<unk>", "<s>", "</s>"] + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.decoder = decoders.WordPiece()  # joins with spaces
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<s>", eos_token="</s>")


class CompletionService:
    def __init__(self, model, tokenizer, limits):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.limits = limits

    def generation_config_for(self, req):
        unknown = set(req) - set(self.limits.allowed_keys) - {"id", "prompt"}
        if unknown:
            log.warning("request %s: ignoring unknown keys %s", req["id"], sorted(unknown))
        temperature = req.get("temperature")
        kwargs = {
            "max_new_tokens": min(req.get("max_tokens", 8), self.limits.max_new_tokens_cap),
            "do_sample": temperature is not None and temperature > 0,
            "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": self.tokenizer.eos_token_id,
        }
        if kwargs["do_sample"]:
            kwargs["temperature"] = temperature
            for k in ("top_p", "top_k"):
                if k in req:
                    kwargs[k] = req[k]
        if "repetition_penalty" in req:
            kwargs["repetition_penalty"] = req["repetition_penalty"]
        if req.get("stop"):
            kwargs["stop_strings"] = req["stop"]
        return GenerationConfig(**kwargs)

    @torch.no_grad()
    def complete(self, req):
        if "seed" in req:
            torch.manual_seed(req["seed"])
        gen_cfg = self.generation_config_for(req)
        enc = self.tokenizer(req["prompt"], return_tensors="pt")
        t0 = time.perf_counter()
        out = self.model.generate(**enc, generation_config=gen_cfg)
        new_tokens = out[0, enc["input_ids"].shape[1]:]
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
        self.limits.stats["served"] += 1
        self.limits.stats["tokens"] += int(new_tokens.numel())
        return {"id": req["id"], "text": text, "n_tokens": int(new_tokens.numel()),
                "latency_ms": round(1000 * (time.perf_counter() - t0), 1)}


def load_service(args):
    tok = build_tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    return CompletionService(LlamaForCausalLM(cfg), tok,
                             ServiceLimits(max_new_tokens_cap=args.max_new_tokens_cap))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-new-tokens-cap", type=int, default=16)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    service = load_service(args)
    for req in REQUESTS:
        log.info("serving %s (%s)", req["id"], {k: v for k, v in req.items() if k != "prompt"})
        print(json.dumps(service.complete(req)))
    log.info("stats: %s", service.limits.stats)


if __name__ == "__main__":
    main()
