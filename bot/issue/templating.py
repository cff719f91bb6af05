"""Where the jinja2 templates are (the repo's templates/ in a checkout, bot/_templates when
installed), and the one jinja2 environment every markdown template renders in."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jinja2

from bot.issue.markdown import FILTERS


def templates_dir() -> Path:
    checkout = Path(__file__).resolve().parents[2] / "templates"
    if checkout.is_dir():
        return checkout
    return Path(__file__).resolve().parents[1] / "_templates"


def plural(count: object, word: str, many: str | None = None) -> str:
    """``1 frame``, ``3 frames``: a count and its noun, agreed."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def environment(search_path: Sequence[str | Path]) -> jinja2.Environment:
    """Markdown, not HTML: jinja's HTML autoescape would not stop a mention, a code span break
    or a link, so every untrusted value goes through one of bot/issue/markdown.py's filters
    (``inline``, ``code_span``, ``fence``, ``lines``, ``comment``) instead."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([str(p) for p in search_path]), autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters.update(FILTERS)
    env.filters["plural"] = plural
    return env
