"""A long worker script in the style of a fine-tuning job: argparse, registries of model specs,
config dataclasses, a data module, a trainer class and a worker loop that logs failures and
carries on. It fails only because one registry entry carries a `quantize` key, which sends its
adapter spec through json.loads (a library frame), and the worker loop swallows the error after
logging it (exit status 0)."""
import argparse
import collections
import dataclasses
import functools
import itertools
import json
import logging
import math
import os
import random
import sys
import time

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
logger = logging.getLogger("worker")

SEED = 1234
DEFAULT_BATCH = 16
MAX_STEPS = 512
LOG_EVERY = 50
CHECKPOINT_DIR = "checkpoints"

# Model families the worker knows how to fine-tune.
MODEL_REGISTRY = {
    "tiny-gemma": {
        "hidden_size": 64,
        "layers": 2,
        "heads": 4,
        "adapter_json": '{"r": 8, "alpha": 16}',
        "quantize": "4bit",
        "target_modules": ["q_proj", "v_proj", "o_proj"],
    },
    "tiny-llama": {
        "hidden_size": 32,
        "layers": 2,
        "heads": 2,
        "adapter_json": '{"r": 4, "alpha": 8}',
        "target_modules": ["q_proj", "k_proj"],
    },
    "tiny-mistral": {
        "hidden_size": 48,
        "layers": 3,
        "heads": 4,
        "adapter_json": '{"r": 4, "alpha": 4}',
        "target_modules": ["q_proj"],
    },
}

QUANT_SETTINGS = {
    "4bit": {"bits": 4, "double_quant": True, "compute_dtype": "bfloat16"},
    "8bit": {"bits": 8, "double_quant": False, "compute_dtype": "float16"},
}


@dataclasses.dataclass
class TrainingConfig:
    model_name: str = "tiny-gemma"
    learning_rate: float = 2e-4
    batch_size: int = DEFAULT_BATCH
    max_steps: int = MAX_STEPS
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    gradient_accumulation: int = 4
    seed: int = SEED
    output_dir: str = CHECKPOINT_DIR


class Paths:
    data = "data"
    logs = "logs"
    cache = ".cache"


def set_seed(seed):
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)


def merge_dicts(*parts):
    merged = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = merge_dicts(merged[key], value)
            else:
                merged[key] = value
    return merged


@functools.lru_cache(maxsize=None)
def cosine_schedule(step, total, warmup):
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


class DataModule:
    def __init__(self, config):
        self.config = config
        self.examples = []

    def load(self):
        rng = random.Random(self.config.seed)
        for i in range(200):
            text = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(12))
            self.examples.append({"id": i, "text": text, "label": i % 3})
        logger.info("loaded %d examples", len(self.examples))
        return self

    def batches(self):
        it = iter(self.examples)
        while True:
            chunk = list(itertools.islice(it, self.config.batch_size))
            if not chunk:
                return
            yield chunk

    def stats(self):
        counts = collections.Counter(e["label"] for e in self.examples)
        return dict(sorted(counts.items()))


def build_quant_config(spec):
    settings = QUANT_SETTINGS[spec["quantize"]]
    return merge_dicts(settings, {"enabled": True})


def build_adapter(spec):
    adapter = {"target_modules": list(spec["target_modules"])}
    if spec.get("quantize"):
        quant = build_quant_config(spec)
        # Quantized models need the adapter spec re-read with the quantization hints merged in.
        raw = spec["adapter_json"].replace("}", ', "bits": ' + str(quant["bits"]) + ",}")
        adapter.update(json.loads(raw))
    else:
        adapter.update(json.loads(spec["adapter_json"]))
    return adapter


class Trainer:
    def __init__(self, config, data):
        self.config = config
        self.data = data
        self.step = 0
        self.history = []
        self.adapter = None

    def setup(self):
        spec = MODEL_REGISTRY[self.config.model_name]
        self.adapter = build_adapter(spec)
        logger.info("adapter: %s", self.adapter)

    def train_step(self, batch):
        lr = self.config.learning_rate * cosine_schedule(self.step, self.config.max_steps, 10)
        loss = sum(len(e["text"]) for e in batch) / (len(batch) * 100.0)
        self.history.append((self.step, loss, lr))
        self.step += 1
        return loss

    def train(self):
        for batch in self.data.batches():
            loss = self.train_step(batch)
            if self.step % LOG_EVERY == 0:
                logger.info("step %d loss %.3f", self.step, loss)
            if self.step >= self.config.max_steps:
                break
        return self.history

    def evaluate(self):
        if not self.history:
            return float("nan")
        return sum(h[1] for h in self.history) / len(self.history)

    def save(self):
        path = os.path.join(self.config.output_dir, "history.json")
        logger.info("would save %d entries to %s", len(self.history), path)
        return path


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="fine-tune a tiny model")
    parser.add_argument("--models", nargs="*", default=list(MODEL_REGISTRY))
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--dry-run", action="store_true")
    return parser.parse_args(argv)


def run_job(model_name, args):
    config = TrainingConfig(model_name=model_name, learning_rate=args.lr,
                            batch_size=args.batch_size, max_steps=args.max_steps)
    set_seed(config.seed)
    data = DataModule(config).load()
    logger.info("label balance: %s", data.stats())
    trainer = Trainer(config, data)
    trainer.setup()
    if args.dry_run:
        return None
    trainer.train()
    score = trainer.evaluate()
    trainer.save()
    return score


def main():
    args = parse_args()
    started = time.time()
    results = {}
    for model_name in args.models:
        try:
            results[model_name] = run_job(model_name, args)
        except Exception:
            logger.exception("job %s failed", model_name)
            results[model_name] = None
    elapsed = time.time() - started
    logger.info("finished %d jobs in %.1fs: %s", len(results), elapsed, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
