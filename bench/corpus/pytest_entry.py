# reprobot corpus: pytest_entry
# Exercises: a pytest-style test module run as a script: fixtures emulated by a small decorator,
#   a parametrize decorator that expands cases, test functions with assert statements, a
#   hand-rolled runner called from the __main__ guard that stops at the first error.
# Expected failure: binascii.Error: Excess data after padding
#   raised by `base64.b64decode(...)` in decode_token
#   (line 46, marked FAILING LINE).
# Ideal result (2 statements):
#   import base64
#   base64.b64decode('dXNlcjphbm4=*', validate=True)
from __future__ import annotations

import base64
import functools
import inspect
from typing import Any, Callable

FIXTURES: dict[str, Callable[[], Any]] = {}
TESTS: list[tuple[str, Callable[..., None], dict[str, Any]]] = []


def fixture(fn: Callable[[], Any]) -> Callable[[], Any]:
    FIXTURES[fn.__name__] = fn
    return fn


def parametrize(name: str, values: list[Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def mark(fn: Callable[..., None]) -> Callable[..., None]:
        fn.__dict__.setdefault("cases", []).extend({name: v} for v in values)
        return fn
    return mark


@fixture
def secret() -> str:
    return "user:ann"


@fixture
def header_prefix() -> str:
    return "Basic "


def decode_token(header: str, prefix: str) -> str:
    token = header[len(prefix):]
    raw = base64.b64decode(token, validate=True)  # FAILING LINE: a stray '*' after the padding
    return raw.decode("utf-8")


def encode_token(secret: str, prefix: str) -> str:
    return prefix + base64.b64encode(secret.encode("utf-8")).decode("ascii")


def test_encode(secret: str, header_prefix: str) -> None:
    assert encode_token(secret, header_prefix).startswith("Basic ")


@parametrize("suffix", ["", "*"])
def test_roundtrip(secret: str, header_prefix: str, suffix: str) -> None:
    header = encode_token(secret, header_prefix) + suffix
    assert decode_token(header, header_prefix) == secret


def test_prefix_only(header_prefix: str) -> None:
    assert decode_token(header_prefix, header_prefix) == ""


def collect(namespace: dict[str, Any]) -> None:
    for name, obj in sorted(namespace.items()):
        if name.startswith("test_") and callable(obj):
            cases = getattr(obj, "cases", [{}])
            for case in cases:
                TESTS.append((name, obj, case))


def call_with_fixtures(fn: Callable[..., None], case: dict[str, Any]) -> None:
    params = inspect.signature(fn).parameters
    kwargs = {p: case[p] if p in case else FIXTURES[p]() for p in params}
    functools.partial(fn, **kwargs)()


def run_all() -> int:
    passed = 0
    for name, fn, case in TESTS:
        call_with_fixtures(fn, case)
        passed += 1
        print(f"PASSED {name} {case}")
    return passed


if __name__ == "__main__":
    collect(dict(globals()))
    print(f"{run_all()} passed")
