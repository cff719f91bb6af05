# reprobot corpus: worker_swallow
# Exercises: a worker loop that catches every exception, logs it with logger.exception and
#   carries on, so the process EXITS 0 and the failure is only visible in the log; a handler
#   registry filled by a decorator; a job queue; helpers called once; statistics and
#   retry code that never matters.
# Expected failure: json.decoder.JSONDecodeError: Expecting ',' delimiter: line 1 column 25 (char 24)
#   raised by `json.loads(raw)` in decode_payload (line 64, marked FAILING LINE), logged
#   by `logger.exception("job %s failed", job.job_id)` in Worker.run_once.
# Ideal result (2 statements): import json; json.loads('{"a": 1 "b": 2}')
from __future__ import annotations

import collections
import json
import logging
import queue
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("ingest-worker")

MAX_RETRIES = 2
BACKOFF_SECONDS = 0.0
QUEUE_TIMEOUT = 0.01
SCHEMA_VERSION = 3

HANDLERS: dict[str, Callable[[Job], dict[str, Any]]] = {}


def handler(kind: str) -> Callable:
    """Register a job handler under its kind, the way task frameworks do."""

    def wrap(fn: Callable[[Job], dict[str, Any]]) -> Callable[[Job], dict[str, Any]]:
        HANDLERS[kind] = fn
        return fn

    return wrap


@dataclass
class Job:
    job_id: int
    kind: str
    payload: str
    attempts: int = 0
    tags: list[str] = field(default_factory=list)


@dataclass
class Stats:
    done: int = 0
    failed: int = 0
    retried: int = 0
    by_kind: collections.Counter = field(default_factory=collections.Counter)

    def summary(self) -> str:
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(self.by_kind.items()))
        return f"done={self.done} failed={self.failed} retried={self.retried} ({kinds})"


def decode_payload(raw: str) -> dict[str, Any]:
    data = json.loads(raw)  # FAILING LINE: the third job's payload misses a comma
    if not isinstance(data, dict):
        raise TypeError("payload must be an object")
    data.setdefault("schema", SCHEMA_VERSION)
    return data


def normalise_record(record: dict[str, Any]) -> dict[str, Any]:
    out = {k.lower().strip(): v for k, v in record.items()}
    if "text" in out and isinstance(out["text"], str):
        out["text"] = " ".join(out["text"].split())
    return out


@handler("ingest")
def handle_ingest(job: Job) -> dict[str, Any]:
    record = normalise_record(decode_payload(job.payload))
    record["n_chars"] = len(str(record.get("text", "")))
    return record


@handler("ping")
def handle_ping(job: Job) -> dict[str, Any]:
    return {"pong": job.job_id}


@handler("sleep")
def handle_sleep(job: Job) -> dict[str, Any]:
    time.sleep(min(0.01, float(job.payload or 0)))
    return {"slept": True}


def load_jobs() -> list[Job]:
    payloads = [
        ("ping", ""),
        ("ingest", '{"id": 1, "text": "hello   world"}'),
        ("ingest", '{"id": 2, "text": "bad" "lang": "en"}'),
        ("sleep", "0"),
        ("ingest", '{"id": 3, "text": "fine"}'),
    ]
    return [Job(i, kind, payload, tags=["batch-7"]) for i, (kind, payload) in enumerate(payloads)]


class Worker:
    def __init__(self, jobs: queue.Queue[Job], results: list[dict[str, Any]]):
        self.jobs = jobs
        self.results = results
        self.stats = Stats()

    def should_retry(self, job: Job, exc: BaseException) -> bool:
        # Only transient errors are retried; a bad payload never becomes good.
        return isinstance(exc, (TimeoutError, ConnectionError)) and job.attempts < MAX_RETRIES

    def run_once(self, job: Job) -> None:
        fn = HANDLERS.get(job.kind)
        if fn is None:
            logger.warning("no handler for %s", job.kind)
            return
        try:
            job.attempts += 1
            result = fn(job)
        except Exception as exc:
            if self.should_retry(job, exc):
                self.stats.retried += 1
                time.sleep(BACKOFF_SECONDS)
                self.jobs.put(job)
                return
            self.stats.failed += 1
            logger.exception("job %s failed", job.job_id)
            return
        self.stats.done += 1
        self.stats.by_kind[job.kind] += 1
        self.results.append(result)

    def run(self) -> Stats:
        while True:
            try:
                job = self.jobs.get(timeout=QUEUE_TIMEOUT)
            except queue.Empty:
                break
            self.run_once(job)
        return self.stats


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    jobs: queue.Queue[Job] = queue.Queue()
    for job in load_jobs():
        jobs.put(job)
    results: list[dict[str, Any]] = []
    stats = Worker(jobs, results).run()
    logger.info("worker finished: %s", stats.summary())
    print(json.dumps(results, sort_keys=True))
    # The worker reports success however many jobs failed: exactly the failure mode
    # that hides bugs from anyone who only looks at exit codes.
    return 0


if __name__ == "__main__":
    sys.exit(main())
