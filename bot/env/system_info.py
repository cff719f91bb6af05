"""The "System Info" block each target repository asks for, rendered from env.json.

Each target's module in bot/targets/ brings its own renderer (the shape its repository's own
command prints); this picks the one of the repository a draft is for.
"""
from __future__ import annotations

from typing import Any

from bot.targets import get_target


def system_info(env: dict[str, Any], repo_key: str) -> str:
    """The System Info text for ``repo_key`` (a registered target's key); for a repro of a
    notebook, followed by what the notebook installs and which of those the run did not have
    (bot/env/notebook_installs.py): the versions above are the ones the repro was verified on."""
    from bot.env.notebook_installs import system_info_lines
    text = get_target(repo_key).render_system_info(env)
    notebook = system_info_lines(env)
    return text.rstrip("\n") + "\n" + notebook + "\n" if notebook else text
