"""The one place reprobot builds a GitHub client (PyGithub), and the rules it talks by: REST
through PyGithub, GraphQL through ``graphql``. Both stages that talk to GitHub use it (bot/upstream
fetches issues for the index and dedup, bot/issue files), and so do the drivers; it sits in the
core layer, so neither stage imports the other for it.

* Real GitHub by default; ``api_url=`` or ``REPROBOT_GITHUB_API`` points elsewhere (the
  tests' local server, a GitHub Enterprise host).
* Token from the argument, else ``GITHUB_TOKEN``; it is never printed or stored.
* Read clients retry GETs with backoff and honour ``Retry-After`` (secondary rate limits).
  Write clients NEVER retry a POST/PATCH: PyGithub's default ``GithubRetry`` retries POSTs,
  and a POST that timed out after GitHub created the issue would file it twice.
* A wait longer than ``max_wait`` (an exhausted primary limit resetting in an hour) is not
  slept through: it becomes a one-line ReprobotError.
* Search has its own budget (30 requests/minute authenticated, 10 without): ``SearchThrottle``.
"""
from __future__ import annotations

import contextlib
import ipaddress
import os
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

from github import Auth, Github, GithubException, GithubRetry
from github.GithubException import (
    BadCredentialsException,
    RateLimitExceededException,
    UnknownObjectException,
)

from reducer.errors import ExitCode, ReprobotError

DEFAULT_API_URL = "https://api.github.com"
API_ENV = "REPROBOT_GITHUB_API"
TOKEN_ENV = "GITHUB_TOKEN"

# Methods a read client may repeat: none of them changes anything on GitHub.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Longest single wait (seconds) a client sits through for a rate limit before giving up.
DEFAULT_MAX_WAIT = 90.0
SEARCH_PER_MINUTE_AUTH = 30
SEARCH_PER_MINUTE_ANON = 10


def api_url_from_env(api_url: str | None = None) -> str:
    url = (api_url or os.environ.get(API_ENV) or DEFAULT_API_URL).strip().rstrip("/")
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ReprobotError(f"not a GitHub API URL: {url!r} (expected http(s)://host[/path])", ExitCode.USAGE)
    return url


def token_from_env(token: str | None = None) -> str | None:
    tok = token if token is not None else os.environ.get(TOKEN_ENV)
    return tok.strip() or None if tok else None


def _is_loopback(url: str) -> bool:
    host = urllib.parse.urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _BoundedRetry(GithubRetry):
    """GithubRetry that refuses to sleep longer than ``max_wait`` on a ``Retry-After``.

    urllib3 sleeps whatever ``Retry-After`` says; a secondary limit asking for an hour
    must surface as an error, not a hung command.
    """

    def __init__(self, max_wait: float = DEFAULT_MAX_WAIT, **kwargs: Any) -> None:
        self.max_wait = max_wait
        kwargs.setdefault("max_rate_limit_wait", max_wait)
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> _BoundedRetry:
        retry = super().new(**kw)
        retry.max_wait = self.max_wait
        return retry

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):  # type: ignore[override]
        if response is not None and response.status in (403, 429):
            after = self.get_retry_after(response)
            if after is not None and after > self.max_wait:
                raise RateLimitExceededException(response.status, {"message": f"Retry-After {after:.0f}s"},
                                                 dict(response.headers))
        return super().increment(method, url, response, error, _pool, _stacktrace)


def make_retry(max_wait: float = DEFAULT_MAX_WAIT, total: int = 4,
               backoff_factor: float = 0.5) -> _BoundedRetry:
    """The one retry policy, for read and write clients alike: GETs are retried on 5xx and
    on rate-limit 403s; a POST/PATCH/PUT/DELETE never is, whatever status comes back
    (a write client still retries the GETs of its duplicate check)."""
    return _BoundedRetry(
        max_wait=max_wait,
        total=total,
        backoff_factor=backoff_factor,
        allowed_methods=SAFE_METHODS,
        secondary_rate_wait=min(60.0, max_wait),
        # Connect errors (nothing reached the server) are safe to retry for any method; read
        # errors after a POST was sent are not, and urllib3 retries those only for
        # allowed_methods. Any other error is not retried at all, whatever the method.
        other=0,
        raise_on_status=False,
    )


def github_client(token: str | None = None, *, api_url: str | None = None, write: bool = False,
                  max_wait: float = DEFAULT_MAX_WAIT, timeout: int = 30,
                  require_token: bool = False, retries: int = 4) -> Github:
    """A PyGithub client for real GitHub (default) or ``api_url`` / ``$REPROBOT_GITHUB_API``.

    ``write=True`` builds a client whose POSTs are sent exactly once.
    ``require_token=True`` raises a one-line error when no token is available.
    ``retries`` bounds the retries of safe requests (an optional search wants few).
    """
    url = api_url_from_env(api_url)
    tok = token_from_env(token)
    if tok is None and (require_token or write):
        raise ReprobotError(f"no GitHub token: set {TOKEN_ENV} (a token with read access to public repos is enough"
                            + (", issues:write to file" if write else "") + ")", ExitCode.NO_TOKEN)
    local = _is_loopback(url)
    return Github(
        auth=Auth.Token(tok) if tok else None,
        base_url=url,
        timeout=timeout,
        retry=make_retry(max_wait=max_wait, total=max(0, retries), backoff_factor=0.05 if local else 0.5),
        # Pacing is politeness towards github.com; a local test server needs none.
        seconds_between_requests=None if local else 0.25,
        seconds_between_writes=None if local else 1.0,
        per_page=100,
        user_agent="reprobot",
    )


def is_authenticated(client: Github) -> bool:
    return client.requester.auth is not None


# --- rate limits -----------------------------------------------------------------------------

def _header(headers: Mapping[str, Any], name: str) -> str | None:
    for k, v in headers.items():
        if k.lower() == name.lower():
            return str(v)
    return None


def rate_limit_wait(headers: Mapping[str, Any], now: float | None = None) -> float:
    """Seconds to wait before the next request, from one response's headers.

    ``Retry-After`` (secondary limits) wins; else, when ``X-RateLimit-Remaining`` is 0,
    the time until ``X-RateLimit-Reset``; else 0.
    """
    now = time.time() if now is None else now
    after = _header(headers, "Retry-After")
    if after is not None:
        try:
            return max(0.0, float(after))
        except ValueError:
            return 0.0
    remaining = _header(headers, "X-RateLimit-Remaining")
    reset = _header(headers, "X-RateLimit-Reset")
    if remaining is not None and remaining.strip() == "0" and reset and reset.strip().isdigit():
        return max(0.0, int(reset) - now + 1)
    return 0.0


def exhausted_error(headers: Mapping[str, Any] | None, what: str = "GitHub API") -> ReprobotError:
    reset = _header(headers or {}, "X-RateLimit-Reset")
    when = ""
    if reset and reset.strip().isdigit():
        when = " until " + datetime.fromtimestamp(int(reset), timezone.utc).strftime("%H:%M UTC")
    return ReprobotError(f"{what} rate limit exhausted{when}; try again later (nothing was half-written)",
                         ExitCode.NETWORK)


class SearchThrottle:
    """Sliding-window limiter for GitHub search: at most ``per_minute`` calls in any 60 s.

    Thread-safe; clock and sleep are injectable so the tests need not wait a minute.
    """

    def __init__(self, per_minute: int = SEARCH_PER_MINUTE_AUTH, *, max_wait: float = DEFAULT_MAX_WAIT,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.per_minute = per_minute
        self.max_wait = max_wait
        self._clock, self._sleep = clock, sleep
        self._calls: deque[float] = deque()
        self._blocked_until = 0.0
        self._lock = threading.Lock()

    def delay(self) -> float:
        """Seconds the next call would have to wait (0 if it may go now)."""
        now = self._clock()
        while self._calls and now - self._calls[0] >= 60.0:
            self._calls.popleft()
        wait = max(0.0, self._blocked_until - now)
        if len(self._calls) >= self.per_minute:
            wait = max(wait, 60.0 - (now - self._calls[0]))
        return wait

    def acquire(self) -> float:
        """Wait for a slot and take it; returns the seconds slept. Refuses waits over max_wait."""
        with self._lock:
            wait = self.delay()
            if wait > self.max_wait:
                raise ReprobotError(f"GitHub search rate limit: next slot in {wait:.0f}s; try again later",
                                    ExitCode.NETWORK)
            if wait > 0:
                self._sleep(wait)
            self._calls.append(self._clock())
            return wait

    def observe(self, headers: Mapping[str, Any], now_wall: float | None = None) -> None:
        """Take the server's word: block until reset when it says none are left."""
        wait = rate_limit_wait(headers, now_wall)
        if wait > 0:
            with self._lock:
                self._blocked_until = max(self._blocked_until, self._clock() + wait)


_THROTTLES: dict[tuple[str, bool], SearchThrottle] = {}


def search_throttle(client: Github) -> SearchThrottle:
    """The process-wide search limiter for this API host and auth state."""
    key = (client.requester.base_url, is_authenticated(client))
    if key not in _THROTTLES:
        _THROTTLES[key] = SearchThrottle(SEARCH_PER_MINUTE_AUTH if key[1] else SEARCH_PER_MINUTE_ANON)
    return _THROTTLES[key]


def last_headers(client: Github) -> dict[str, Any]:
    """Rate-limit state PyGithub recorded from the last response, as headers."""
    remaining, limit = client.requester.rate_limiting
    reset = client.requester.rate_limiting_resettime
    return {"X-RateLimit-Remaining": str(remaining), "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Reset": str(reset)}


# --- errors ----------------------------------------------------------------------------------

def _message(e: GithubException) -> str:
    data = e.data
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"]).splitlines()[0][:200]
    return (e.message or "").splitlines()[0][:200] if getattr(e, "message", None) else ""


@contextlib.contextmanager
def github_errors(what: str) -> Iterator[None]:
    """Turn PyGithub / network failures into one-line ReprobotErrors naming ``what``."""
    import requests  # PyGithub's transport

    try:
        yield
    except ReprobotError:
        raise
    except BadCredentialsException:
        raise ReprobotError(f"{what}: GitHub rejected the token (401); check {TOKEN_ENV}", ExitCode.NO_TOKEN) from None
    except UnknownObjectException:
        raise ReprobotError(f"{what}: not found on GitHub (404)", ExitCode.BAD_INPUT) from None
    except RateLimitExceededException as e:
        raise exhausted_error(e.headers, f"{what}: GitHub") from None
    except GithubException as e:
        if e.status == 403 and e.headers and _header(e.headers, "X-RateLimit-Remaining") == "0":
            raise exhausted_error(e.headers, f"{what}: GitHub") from None
        msg = _message(e)
        raise ReprobotError(f"{what}: GitHub answered {e.status}" + (f" ({msg})" if msg else ""),
                            ExitCode.NETWORK) from None
    except (requests.exceptions.RequestException, OSError) as e:
        raise ReprobotError(f"{what}: cannot reach GitHub ({type(e).__name__})", ExitCode.NETWORK) from None


# --- GraphQL ---------------------------------------------------------------------------------

def graphql(query: str, variables: dict[str, Any] | None = None, *, client: Github | None = None,
            token: str | None = None, api_url: str | None = None, write: bool = True) -> dict[str, Any]:
    """Run a GraphQL query/mutation and return its ``data`` object.

    Goes through PyGithub's requester (``POST {api}/graphql``), so auth, base URL and the
    no-POST-retry policy are the client's. Mutations (``addDiscussionComment``) are POSTs and
    are sent once; GraphQL ``errors`` become a one-line ReprobotError.
    """
    gh = client or github_client(token, api_url=api_url, write=write, require_token=True)
    with github_errors("GitHub GraphQL"):
        try:
            _headers, data = gh.requester.graphql_query(query, variables or {})
        except GithubException as e:
            if e.status == 400 and isinstance(e.data, dict) and e.data.get("errors"):
                first = e.data["errors"][0]
                raise ReprobotError(f"GitHub GraphQL error: {str(first.get('message', first))[:200]}",
                                    ExitCode.NETWORK) from None
            raise
    return data.get("data") or {}


__all__ = [
    "API_ENV",
    "DEFAULT_API_URL",
    "SAFE_METHODS",
    "TOKEN_ENV",
    "SearchThrottle",
    "api_url_from_env",
    "exhausted_error",
    "github_client",
    "github_errors",
    "graphql",
    "is_authenticated",
    "last_headers",
    "make_retry",
    "rate_limit_wait",
    "search_throttle",
    "token_from_env",
]
