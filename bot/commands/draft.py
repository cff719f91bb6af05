"""`reprobot draft REPRO_DIR [--repo KEY]`: write draft-<repo>.md / .json from a repro folder."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from bot.commands._options import add_repo
from bot.issue.draft import build_draft, edited_by_hand, write_draft
from bot.issue.forms import REPO_KEYS, get_form
from bot.output import console
from bot.store import ReproDir
from reducer.errors import ExitCode, ReprobotError



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("draft", help="draft the issue in each repository's bug-report form",
                       description="Fill the target repositories' bug-report forms from a repro folder "
                                   "(scrubbed), writing draft-<repo>.md and draft-<repo>.json there.")
    p.add_argument("repro_dir", type=Path, help="a repro folder (repros/<slug>-<id>)")
    add_repo(p, "draft for this repository; repeatable; default: the one routing picked", many=True)
    p.add_argument("--cross-links", action="store_true",
                   help="also draft for the other repositories routing says are involved")
    p.add_argument("--all", action="store_true", help="draft for every repository reprobot knows")
    p.add_argument("--force", action="store_true", help="overwrite a draft that was edited by hand")
    p.set_defaults(func=run)


def keys_to_draft(repro: ReproDir, args: argparse.Namespace) -> list[str]:
    """--repo/--all as asked; otherwise the routed repository (routing runs if it has not),
    with its cross-links on request; none for a failure routing says is the user's own."""
    if args.all:
        return list(REPO_KEYS)
    keys = list(args.repo or [])
    if keys and not args.cross_links:
        return list(dict.fromkeys(keys))
    from bot.prepare import route_folder
    route = repro.read_json(repro.route_json) if repro.route_json.is_file() else route_folder(repro)
    if not isinstance(route, dict):
        raise ReprobotError(f"{repro.route_json}: expected a JSON object", ExitCode.BAD_INPUT)
    known = {get_form(k).repo.lower(): k for k in REPO_KEYS}
    if not keys and route.get("target"):
        keys.append(get_form(str(route["target"])).key)
    if args.cross_links:
        keys += [known[str(r).lower()] for r in route.get("cross_links") or [] if str(r).lower() in known]
    if not keys:
        console.print(f"no draft: {escape(str(route.get('verdict') or 'routing names no repository'))}; "
                      "pass --repo KEY to draft for a repository anyway")
    return list(dict.fromkeys(keys))


def run(args: argparse.Namespace) -> int:
    repro = ReproDir.open(args.repro_dir)
    keys = keys_to_draft(repro, args)
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
