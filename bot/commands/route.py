"""`reprobot route`: which upstream repository should hear about a failure, and why.

    reprobot route repros/<id>             route a reduction; writes repros/<id>/route.json
    reprobot route --traceback FILE|-      route a pasted traceback (a forum post), nothing written
"""
from __future__ import annotations

import argparse
import json

from rich.markup import escape
from rich.table import Table

from bot.commands._options import DeprecatedAlias, add_db, add_json, add_python, add_repro_dir, add_traceback
from bot.output import console
from bot.scrub import scrub
from bot.targets import TARGETS



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("route", help="pick the upstream repository (with reasons, cross-links, who can help)",
                       description=f"Decide which of {', '.join(TARGETS.values())} owns a failure, "
                                   "or say it is none of them.")
    add_repro_dir(p, optional=True)
    add_traceback(p)
    add_json(p, "route.json")
    add_db(p, when_empty="the known issues bundled with reprobot")
    add_python(p, "the interpreter that runs the repro once to see which package made the tensors its failing "
                  "line read")
    p.add_argument("--no-run", action="store_true",
                   help="do not run the repro (route by what the folder holds; built.json is used when there)")
    p.add_argument("--no-issue-index", action="store_true",
                   help="route by the traceback and repro alone, without the issue index's evidence")
    # `versions --no-index` is pip's (no package index): the issue index's flag has its own name.
    p.add_argument("--no-index", dest="no_issue_index", action=DeprecatedAlias, new="--no-issue-index")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.prepare import route_folder, route_with_index
    from bot.store import ReproDir
    from bot.upstream.failure import load_failure

    if args.traceback is None and args.repro_dir:
        repro = ReproDir.open(args.repro_dir)
        data = route_folder(repro, db=args.db, use_index=not args.no_issue_index,
                            python=None if args.no_run else args.python)
    else:
        repro = None
        data = route_with_index(load_failure(args.repro_dir, args.traceback), db=args.db,
                                use_index=not args.no_issue_index).to_dict()
        data["source"] = "pasted traceback"
    if args.json:
        print(scrub(json.dumps(data, indent=2)).text)
        return 0
    print_route(data)
    if repro is not None:
        if data.get("built"):
            console.print(f"[bold]who made the failing line's tensors (built.json):[/] {escape(str(data['built']))}")
        console.print(f"written to [bold]{escape(scrub(str(repro.route_json)).text)}[/]")
    return 0


def print_route(data: dict) -> None:
    target = data["target"]
    head = f"[bold green]{target}[/]" if target else "[bold yellow]not one of ours[/]"
    confidence = f" (confidence {data['confidence']:.2f})" if target and data.get("confidence") else ""
    console.print(f"target: {head}{confidence}")
    console.print(f"  {escape(scrub(data['verdict']).text)}")
    table = Table(title="candidates", show_lines=False)
    table.add_column("repository")
    table.add_column("score", justify="right")
    table.add_column("reasons")
    for row in data["ranked"]:
        table.add_row(escape(row["repo"]), f"{row['score']:.1f}", escape(scrub("\n".join(row["reasons"])).text))
    console.print(table)
    facts = [("raised in", data.get("raised_in")), ("entry point", data.get("entry_point")),
             ("boundary", data.get("boundary")), ("model family", data.get("model_family")),
             ("cross-links", ", ".join(data.get("cross_links") or []) or None),
             ("areas", ", ".join(data.get("areas") or []) or None),
             ("who can help", " ".join(data.get("who_can_help") or []) or None)]
    for label, value in facts:
        if value:
            console.print(f"[bold]{label}:[/] {escape(scrub(str(value)).text)}")
