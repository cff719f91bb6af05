# reprobot corpus: threadpool_service
# Exercises: a small request-handling service: raw request lines are parsed into Request objects
#   and each is handled on a concurrent.futures.ThreadPoolExecutor via submit(); the handler
#   catches every exception, logs it with log.exception and answers 500, so the process EXITS 0
#   and the failure is only in the log. Also: a route table, a token-bucket limiter, timing stats.
# Expected failure: ValueError: bad query field: 'verbose'
#   raised by `urllib.parse.parse_qs(query, strict_parsing=True)` in parse_query
#   (line 75, marked FAILING LINE), logged by log.exception in Service.handle (a worker thread).
# Ideal result (2 statements):
#   import urllib.parse
#   urllib.parse.parse_qs('page=2&verbose', strict_parsing=True)
from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("svc")

POOL_SIZE = 3
RATE_PER_SECOND = 1000.0
BURST = 50
RAW_REQUESTS = [
    "GET /health",
    "GET /items?page=1&size=20",
    "GET /items?page=2&verbose",
    "POST /items name=widget",
    "GET /items/7",
]


@dataclass
class Request:
    method: str
    path: str
    query: str = ""
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Response:
    status: int
    body: Any = None
    elapsed_ms: float = 0.0


class TokenBucket:
    """Requests beyond the burst wait for tokens; the service never gets near the limit here."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.tokens = float(burst)
        self.burst = burst
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


def parse_query(query: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(query, strict_parsing=True)  # FAILING LINE: 'verbose' has no '='


def parse_request(line: str) -> Request:
    method, _, rest = line.partition(" ")
    target, _, body = rest.partition(" ")
    path, _, query = target.partition("?")
    return Request(method, path, query, body, {"host": "localhost"})


def list_items(req: Request) -> Response:
    params = parse_query(req.query) if req.query else {}
    page = int(params.get("page", ["1"])[0])
    size = int(params.get("size", ["10"])[0])
    return Response(200, [f"item-{i}" for i in range((page - 1) * size, page * size)][:3])


def get_item(req: Request) -> Response:
    return Response(200, {"id": int(req.path.rsplit("/", 1)[1])})


def create_item(req: Request) -> Response:
    name = req.body.partition("=")[2]
    return Response(201, {"name": name})


def health(req: Request) -> Response:
    return Response(200, "ok")


ROUTES: dict[tuple[str, str], Callable[[Request], Response]] = {
    ("GET", "/health"): health,
    ("GET", "/items"): list_items,
    ("POST", "/items"): create_item,
}


def route(req: Request) -> Callable[[Request], Response]:
    fn = ROUTES.get((req.method, req.path))
    if fn is None and req.method == "GET" and req.path.startswith("/items/"):
        return get_item
    return fn or (lambda r: Response(404))


class Service:
    def __init__(self) -> None:
        self.limiter = TokenBucket(RATE_PER_SECOND, BURST)
        self.timings: list[float] = []
        self.errors = 0

    def handle(self, req: Request) -> Response:
        start = time.perf_counter()
        if not self.limiter.take():
            return Response(429)
        try:
            resp = route(req)(req)
        except Exception:
            self.errors += 1
            log.exception("request %s %s failed", req.method, req.path)
            resp = Response(500, "internal error")
        resp.elapsed_ms = (time.perf_counter() - start) * 1000
        self.timings.append(resp.elapsed_ms)
        return resp

    def serve(self, lines: list[str]) -> list[Response]:
        with ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="req") as pool:
            futures: list[Future[Response]] = [pool.submit(self.handle, parse_request(line)) for line in lines]
            return [f.result() for f in futures]


def report(service: Service, responses: list[Response]) -> str:
    codes: dict[int, int] = {}
    for r in responses:
        codes[r.status] = codes.get(r.status, 0) + 1
    worst = max(service.timings, default=0.0)
    return f"{len(responses)} requests, codes={codes}, errors={service.errors}, worst={worst:.2f}ms"


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(threadName)s %(levelname)s %(message)s")
    service = Service()
    responses = service.serve(RAW_REQUESTS)
    log.info(report(service, responses))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
