"""The "System Info" block each target repository asks for, rendered from env.json.

The renderers themselves live in bot/env/renderers.py; which one a repository gets is its
entry in the target registry (bot/upstream/targets.py), so a new repository brings its own.
"""
from __future__ import annotations

from typing import Any

from bot.env.renderers import (BNB_RELATED, install_notes, render_accelerate, render_bitsandbytes,  # noqa: F401
                               render_peft, render_pytorch, render_transformers, render_trl, version_of)
from bot.upstream.targets import get_target


def system_info(env: dict[str, Any], repo_key: str) -> str:
    """The System Info text for ``repo_key`` (a registered target's key)."""
    return get_target(repo_key).render_system_info(env)
