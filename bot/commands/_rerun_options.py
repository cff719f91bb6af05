"""Options that `versions` and `contrast` share: both re-run a stored repro."""
from __future__ import annotations

import argparse
import sys


def add_rerun_options(p: argparse.ArgumentParser, written: str) -> None:
    p.add_argument("repro_dir", help="repro folder (repros/<id>)")
    p.add_argument("--python", default=sys.executable, help="interpreter the repro failed in (default: this one)")
    p.add_argument("--timeout", type=float, default=None, help="seconds one run may take (default: 5x the original's)")
    p.add_argument("--json", action="store_true", help=f"print {written} to stdout")


def notifier(args: argparse.Namespace):
    """Progress lines on the terminal, none with --json (stdout is the JSON)."""
    from bot.output import console
    return (lambda msg: None) if args.json else (lambda msg: console.print(f"[dim]{msg}[/]", highlight=False))
