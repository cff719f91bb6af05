"""The job worker of lora_worker.py, served from a spawn child (issue #29's shape on the CPU): the
parent starts `multiprocessing.get_context("spawn").Process(target=serve, ...)`, feeds it jobs
through a queue and collects results; the child imports the stack, builds each job's tiny Gemma 4
and adapter, and logs a failing job instead of crashing. The parent then exits 0.

    reprobot reduce examples/cpu_gemma4_lora/spawn_lora_worker.py

Expected failure, visible only in the child's log (logger.exception in LoraWorker.handle):
    ValueError: Target module Gemma4ClippableLinear(...) is not supported. ...
Hand floor (written before reducing it): 5 statements, as for quick_lora.py: the two imports, the
config, the model, and `get_peft_model(model, LoraConfig(target_modules=["q_proj"]))`.
"""
from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import queue
import sys
import time
from typing import Any

import torch
from peft import LoraConfig, get_peft_model
from transformers import (
    Gemma4Config,
    Gemma4ForConditionalGeneration,
    Gemma4TextConfig,
    Gemma4VisionConfig,
)

log = logging.getLogger("lora-worker")

POLL_SECONDS = 1.0
TEXT = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
            "vocab_size_per_layer_input": 128, "hidden_size_per_layer_input": 16,
            "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 32}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "num_key_value_heads": 2, "head_dim": 16, "use_clipped_linears": True}

ADAPTER_RECIPES: dict[str, dict[str, Any]] = {
    "text-only": {"target_modules": r".*language_model.*\.(q_proj|v_proj)", "r": 8, "lora_alpha": 16},
    "broad": {"target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"], "r": 16, "lora_alpha": 32},
}


@dataclasses.dataclass
class FinetuneJob:
    job_id: str
    recipe: str
    with_vision: bool = True
    steps: int = 2
    lr: float = 1e-3


@dataclasses.dataclass
class JobResult:
    job_id: str
    ok: bool
    trainable: int = 0
    final_loss: float | None = None
    seconds: float = 0.0


class LoraWorker:
    def __init__(self, jobs: queue.Queue[FinetuneJob]):
        self.jobs = jobs
        self.results: list[JobResult] = []

    def build_model(self, job: FinetuneJob) -> Gemma4ForConditionalGeneration:
        vision = Gemma4VisionConfig(**VISION) if job.with_vision else None
        config = Gemma4Config(text_config=Gemma4TextConfig(**TEXT), vision_config=vision)
        torch.manual_seed(0)
        return Gemma4ForConditionalGeneration(config)

    def build_adapter(self, job: FinetuneJob, model: torch.nn.Module) -> torch.nn.Module:
        recipe = dict(ADAPTER_RECIPES[job.recipe])
        lora_config = LoraConfig(task_type="CAUSAL_LM", lora_dropout=0.0, **recipe)
        return get_peft_model(model, lora_config)

    def train(self, job: FinetuneJob, model: torch.nn.Module) -> float:
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.SGD(params, lr=job.lr)
        ids = torch.randint(3, TEXT["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(1))
        loss = torch.tensor(0.0)
        for _ in range(job.steps):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
        return float(loss.detach())

    def handle(self, job: FinetuneJob) -> None:
        start = time.monotonic()
        try:
            model = self.build_adapter(job, self.build_model(job))
            trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
            loss = self.train(job, model)
            self.results.append(JobResult(job.job_id, True, trainable, loss, time.monotonic() - start))
            log.info("job %s done: loss %.3f, %d trainable", job.job_id, loss, trainable)
        except Exception:
            # A worker must survive one bad job; the traceback goes to the log.
            log.exception("job %s failed", job.job_id)
            self.results.append(JobResult(job.job_id, False, seconds=time.monotonic() - start))

    def run(self) -> list[JobResult]:
        while True:
            try:
                job = self.jobs.get(timeout=POLL_SECONDS)
            except queue.Empty:
                return self.results
            self.handle(job)


def serve(jobs, results) -> None:
    """The child's target: drain the job queue, send every result back, then a None."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for result in LoraWorker(jobs).run():
        results.put(dataclasses.asdict(result))
    results.put(None)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx = mp.get_context("spawn")
    jobs, results = ctx.Queue(), ctx.Queue()
    for job in (FinetuneJob("job-1", "text-only"), FinetuneJob("job-2", "broad")):
        jobs.put(job)
    child = ctx.Process(target=serve, args=(jobs, results), name="lora-worker")
    child.start()
    collected = []
    while True:
        try:
            item = results.get(timeout=120)
        except queue.Empty:
            log.error("the worker went quiet")
            break
        if item is None:
            break
        collected.append(item)
    child.join(timeout=30)
    failed = [r["job_id"] for r in collected if not r["ok"]]
    log.info("%d jobs, %d failed: %s", len(collected), len(failed), ", ".join(failed) or "-")
    return 0  # the worker drained its queue: success, as far as the supervisor can tell


if __name__ == "__main__":
    sys.exit(main())
