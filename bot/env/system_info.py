"""The "System Info" block each target repository asks for, rendered from env.json.

Each target's module in bot/targets/ brings its own renderer (the shape its repository's own
command prints); this picks the one of the repository a draft is for.
"""
from __future__ import annotations

from typing import Any

from bot.targets import get_target


def system_info(env: dict[str, Any], repo_key: str) -> str:
    """The System Info text for ``repo_key`` (a registered target's key)."""
    return get_target(repo_key).render_system_info(env)
