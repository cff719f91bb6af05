"""`reprobot draft REPRO_DIR [--repo KEY]`: write draft-<repo>.md / .json from a repro folder."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from bot.issue.draft import build_draft, edited_by_hand, write_draft
from bot.issue.forms import REPO_KEYS, get_form
from bot.store import ReproDir
from reducer.errors import ExitCode, ReprobotError

console = Console(highlight=False)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("draft", help="draft the issue in each repository's bug-report form",
                       description="Fill the target repositories' bug-report forms from a repro folder "
                                   "(scrubbed), writing draft-<repo>.md and draft-<repo>.json there.")
    p.add_argument("repro_dir", type=Path, help="a repro folder (repros/<slug>-<id>)")
    p.add_argument("--repo", action="append", choices=REPO_KEYS, metavar="KEY",
                   help=f"draft for this repository only ({', '.join(REPO_KEYS)}); repeatable; default: all four")
    p.add_argument("--force", action="store_true", help="overwrite a draft that was edited by hand")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    repro = ReproDir.open(args.repro_dir)
    keys = list(dict.fromkeys(args.repo or REPO_KEYS))
    edited = [k for k in keys if edited_by_hand(repro, k)]
    if edited and not args.force:
        raise ReprobotError(f"{', '.join(f'draft-{k}.md' for k in edited)} edited by hand; pass --force to overwrite",
                            ExitCode.USAGE)
    for key in keys:
        draft = build_draft(repro.path, key)
        md, _ = write_draft(repro.path, draft)
        check = draft.validate()
        state = "[green]valid[/]" if check.ok else "[red]" + escape("; ".join(map(str, check.problems))) + "[/]"
        console.print(f"[bold]{escape(get_form(key).repo)}[/]: {escape(md.as_posix())}  ({state})")
        console.print(f"  title: {escape(draft.title)}")
        if draft.scrubbed:
            console.print(f"  scrubbed: {len(draft.scrubbed)} item(s) ("
                          + escape(", ".join(sorted({f.kind for f in draft.scrubbed}))) + ")")
        for note in draft.notes:
            console.print(f"  [yellow]note:[/] {escape(note)}")
    return 0
