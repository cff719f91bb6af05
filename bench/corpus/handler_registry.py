# reprobot corpus: handler_registry
# Exercises: event handlers registered by a decorator with arguments (@on("event")), wrapped by a
#   functools.wraps timing decorator, a dispatcher that looks the handler up by event name,
#   events built from a list of dicts, an audit trail kept by a class, and handlers never called.
# Expected failure: ValueError: 10.1.2.3/24 has host bits set
#   raised by `ipaddress.ip_network(...)` in handle_allow
#   (line 74, marked FAILING LINE).
# Ideal result (2 statements):
#   import ipaddress
#   ipaddress.ip_network('10.1.2.3/24')
from __future__ import annotations

import functools
import ipaddress
import time
from collections import defaultdict
from typing import Any, Callable

HANDLERS: dict[str, Callable[..., Any]] = {}
TIMINGS: dict[str, list[float]] = defaultdict(list)

EVENTS = [
    {"type": "ping", "payload": {}},
    {"type": "allow", "payload": {"cidr": "10.1.2.3", "prefix": 24, "zone": "lan"}},
    {"type": "deny", "payload": {"cidr": "192.168.0.0", "prefix": 16}},
]


def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMINGS[fn.__name__].append(time.perf_counter() - start)
    return inner


def on(event: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if event in HANDLERS:
            raise RuntimeError(f"two handlers for {event}")
        HANDLERS[event] = fn
        return fn
    return register


class Audit:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def note(self, event: str, detail: str) -> None:
        self.lines.append(f"{event}: {detail}")

    def dump(self) -> str:
        return "\n".join(self.lines)


AUDIT = Audit()


@on("ping")
@timed
def handle_ping(payload: dict[str, Any]) -> str:
    AUDIT.note("ping", "pong")
    return "pong"


@on("allow")
@timed
def handle_allow(payload: dict[str, Any]) -> str:
    cidr = f"{payload['cidr']}/{payload['prefix']}"
    network = ipaddress.ip_network(cidr)  # FAILING LINE: a host address, not a network
    AUDIT.note("allow", str(network))
    return f"allowed {network} in {payload.get('zone', 'default')}"


@on("deny")
@timed
def handle_deny(payload: dict[str, Any]) -> str:
    network = ipaddress.ip_network(f"{payload['cidr']}/{payload['prefix']}")
    AUDIT.note("deny", str(network))
    return f"denied {network}"


@on("reload")
def handle_reload(payload: dict[str, Any]) -> str:
    HANDLERS.clear()
    return "reloaded"


def dispatch(event: dict[str, Any]) -> str:
    handler = HANDLERS.get(event["type"])
    if handler is None:
        return f"no handler for {event['type']}"
    return handler(event["payload"])


def summary() -> str:
    parts = [f"{name}: {len(times)} calls" for name, times in sorted(TIMINGS.items())]
    return "; ".join(parts)


def main() -> None:
    results = []
    for event in EVENTS:
        results.append(dispatch(event))
    print("\n".join(results))
    print(summary())
    print(AUDIT.dump())


main()
