"""Where the jinja2 templates are: the repo's templates/ in a checkout, bot/_templates when installed."""
from __future__ import annotations

from pathlib import Path


def templates_dir() -> Path:
    checkout = Path(__file__).resolve().parents[2] / "templates"
    if checkout.is_dir():
        return checkout
    return Path(__file__).resolve().parents[1] / "_templates"
