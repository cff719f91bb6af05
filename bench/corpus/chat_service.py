# reprobot corpus: chat_service
# Exercises: a small chat-completion service: request/response dataclasses named in annotations,
#   a service class whose one method holds the failing call, a helper that merges generation
#   settings from three layers, a thread pool that warms caches, a helper returning a list
#   comprehension over range(n), and builtin map(service.complete, requests) feeding the failure.
# Expected failure: ValueError: placeholder too large for max width
#   raised by `textwrap.shorten(...)` in ChatService.complete
#   (line 97, marked FAILING LINE).
# Ideal result (2 statements):
#   import textwrap
#   textwrap.shorten('Summarise the release notes for 2.3', width=4, placeholder=' [truncated]')
from __future__ import annotations

import logging
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

log = logging.getLogger("chat")

DEFAULT_SETTINGS: dict[str, Any] = {"temperature": 0.7, "top_p": 0.95, "max_chars": 64,
                                    "placeholder": " ...", "stop": ["\n\n"]}
MODEL_SETTINGS: dict[str, dict[str, Any]] = {
    "tiny-chat": {"max_chars": 12, "placeholder": " [truncated]"},
    "big-chat": {"max_chars": 256},
}
PROMPTS = ["Summarise the release notes for 2.3", "List three risks", "Say hi"]


@dataclass
class ChatRequest:
    model: str
    prompt: str
    user: str = "anon"
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChatResponse:
    model: str
    text: str
    tokens: int
    latency_ms: float = 0.0


@dataclass
class Usage:
    requests: int = 0
    tokens: int = 0

    def add(self, resp: ChatResponse) -> None:
        self.requests += 1
        self.tokens += resp.tokens


def merge_generation_settings(model: str, overrides: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = dict(DEFAULT_SETTINGS)
    merged.update(MODEL_SETTINGS.get(model, {}))
    for key, value in overrides.items():
        if value is not None:
            merged[key] = value
    if merged["max_chars"] < 1:
        raise ValueError("max_chars must be positive")
    return merged


class Tokenizer:
    def __init__(self, vocab_size: int = 32000) -> None:
        self.vocab_size = vocab_size

    def count(self, text: str) -> int:
        return max(1, len(text.split()))


class Cache:
    def __init__(self) -> None:
        self.entries: dict[str, ChatResponse] = {}

    def warm(self, key: str) -> str:
        time.sleep(0.001)
        self.entries.setdefault(key, ChatResponse(key, "", 0))
        return key


class ChatService:
    def __init__(self, tokenizer: Tokenizer, cache: Cache) -> None:
        self.tokenizer = tokenizer
        self.cache = cache
        self.usage = Usage()

    def complete(self, req: ChatRequest) -> ChatResponse:
        start = time.perf_counter()
        settings = merge_generation_settings(req.model, req.overrides)
        width = settings["max_chars"] // 3
        text = textwrap.shorten(req.prompt, width=width, placeholder=settings["placeholder"])  # FAILING LINE
        resp = ChatResponse(req.model, text, self.tokenizer.count(text))
        resp.latency_ms = (time.perf_counter() - start) * 1000
        self.usage.add(resp)
        return resp


def make_requests(n: int, model: str = "tiny-chat") -> list[ChatRequest]:
    return [ChatRequest(model, PROMPTS[i % len(PROMPTS)], user=f"u{i}") for i in range(n)]


def warm_caches(cache: Cache, models: list[str]) -> list[str]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(cache.warm, models))


def report(responses: list[ChatResponse], usage: Usage) -> str:
    lines = [f"{r.model}: {r.text!r} ({r.tokens} tokens)" for r in responses]
    lines.append(f"total: {usage.requests} requests, {usage.tokens} tokens")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    cache = Cache()
    warmed = warm_caches(cache, sorted(MODEL_SETTINGS))
    log.info("warmed %s", warmed)
    service = ChatService(Tokenizer(), cache)
    requests = make_requests(1)
    responses = list(map(service.complete, requests))
    print(report(responses, service.usage))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
