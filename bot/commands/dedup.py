"""`reprobot dedup`: upstream issues already filed about a failure (never labels or closes any).

    reprobot dedup repros/<id>           rank the index; writes repros/<id>/related.json
    reprobot dedup --traceback FILE|-    the same for a pasted traceback, nothing written
GitHub's issue search for the exact error text adds candidates the index does not have (30
searches a minute with GITHUB_TOKEN, a few without). With GITHUB_TOKEN, the target repository's
issues are first fetched into the index: all of them the first time, then what changed (at most
daily; an interrupted sync continues where it stopped). --no-sync skips that; --no-search sends
nothing to GitHub at all.
"""
from __future__ import annotations

import argparse
import json

from rich.markup import escape
from rich.table import Table

from bot.commands._options import (add_api_url, add_db, add_json, add_no_search, add_repo, add_repro_dir,
                                   add_traceback, whole)
from bot.output import console
from bot.progress import SyncProgress



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dedup", help="find the upstream issues already filed about a failure",
                       description="Rank indexed upstream issues (and GitHub search hits) against a failure.")
    add_repro_dir(p, optional=True)
    add_traceback(p)
    add_db(p)
    p.add_argument("--top", type=whole("--top", 1), default=5, help="how many to show (default: 5)")
    add_repo(p, "target repository (default: what `route` decides)")
    add_no_search(p)
    p.add_argument("--no-sync", action="store_true",
                   help="rank what the index holds, without fetching the target repository's issues first")
    add_api_url(p)
    add_json(p, "related.json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.prepare import related_for, route_with_index
    from bot.upstream.failure import load_failure
    from bot.scrub import scrub, scrub_json
    from bot.store import ReproDir, write_json_atomic

    failure = load_failure(args.repro_dir, args.traceback)
    if not failure.versions and failure.raw_text:
        from bot.upstream.index import mentioned_versions

        # A forum post usually states its versions next to the traceback.
        failure.versions = mentioned_versions(failure.raw_text)
    from bot.targets import get_target
    target = get_target(args.repo).repo if args.repo else route_with_index(failure, db=args.db).target
    with SyncProgress(console) as progress:
        result = related_for(failure, target, db=args.db, api_url=args.api_url, search=not args.no_search,
                             top=args.top, sync=not (args.no_sync or args.no_search), anonymous_search=True,
                             progress=progress.update)
    for note in result.notes:
        console.print(escape(scrub(note).text))
    data = result.to_dict()
    if failure.repro_dir is not None:
        write_json_atomic(ReproDir(failure.repro_dir).related_json, scrub_json(data))
    if args.json:
        print(scrub(json.dumps(data, indent=2)).text)
        return 0
    where = (f"{result.indexed} known issues bundled with reprobot; your index is empty: `reprobot index seed` "
             "keeps them, `reprobot index sync --repo KEY` adds the rest"
             if result.index_source == "bundled" else f"{result.indexed} indexed")
    if not result.results:
        if result.indexed == 0:
            console.print("the issue index is empty: fill it with `reprobot index seed` (offline), "
                          "`reprobot index sync --repo KEY` "
                          "or `reprobot index import FILE`" + ("" if result.searched else "; GitHub search not used"))
        else:
            console.print(f"no related issue found among {where}"
                          + ("" if result.searched else " (GitHub search not used)"))
    else:
        table = Table(title=f"related upstream issues ({where}"
                            + (", GitHub search" if result.searched else "") + ")")
        for col, just in (("#", "right"), ("score", "right"), ("state", "left"), ("issue", "left"),
                          ("title", "left"), ("why", "left")):
            table.add_column(col, justify=just)  # type: ignore[arg-type]
        for n, r in enumerate(result.results, 1):
            state = ("PR merged" if r.is_pr and r.likely_fixed_in else ("PR " if r.is_pr else "") + r.state)
            short = f"{r.repo.split('/')[-1]}#{r.number}"
            table.add_row(str(n), f"{r.score:.2f}", state, f"[link={escape(r.url)}]{escape(short)}[/link]",
                          escape(r.title[:80]), escape(scrub(r.reason).text))
        console.print(table)
        for n, r in enumerate(result.results, 1):
            fixed = f"  (likely fixed in {r.likely_fixed_in})" if r.likely_fixed_in and not r.is_pr else ""
            console.print(f"  {n}. {escape(r.url)}{escape(fixed)}", soft_wrap=True)
    if result.search_note:
        console.print(f"[dim]{escape(scrub(result.search_note).text)}[/]")
    if failure.repro_dir is not None:
        console.print(f"written to [bold]{escape(scrub(str(ReproDir(failure.repro_dir).related_json)).text)}[/]")
    return 0
