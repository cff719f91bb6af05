"""`reprobot index`: the local issue index (SQLite + FTS5) that `dedup` searches.

    reprobot index sync --repo KEY [--full]          fetch issues and PRs through PyGithub (GITHUB_TOKEN)
    reprobot index import FILE [--repo KEY]          load a JSON list of GitHub REST issue objects
    reprobot index seed                              load the known issues bundled with reprobot (offline)
    reprobot index status                            what is indexed, and up to when
All take --db PATH (default: the user's cache directory).
"""
from __future__ import annotations

import argparse
import json

from rich.markup import escape
from rich.table import Table

from bot.commands._options import add_api_url, add_db, add_json, add_repo, whole
from bot.output import console



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build the local issue index that dedup searches",
                       description="A local SQLite/FTS5 index of upstream issues and PRs.")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        add_db(q)
        add_json(q, "the result as JSON")

    s = isub.add_parser("sync", help="fetch issues/PRs updated since the last sync (needs GITHUB_TOKEN)")
    add_repo(s, "repository to sync (repeatable)", many=True, required=True)
    s.add_argument("--full", action="store_true", help="ignore the last sync and fetch everything")
    s.add_argument("--no-comments", action="store_true",
                   help="do not read closed issues' comments (they say what fixed them)")
    s.add_argument("--comment-budget", type=whole("--comment-budget", 0), default=200, metavar="N",
                   help="read the comments of at most N closed issues per run (default: 200)")
    add_api_url(s)
    common(s)
    s.set_defaults(func=run_sync)

    i = isub.add_parser("import", help="load a JSON list of GitHub REST issue objects (offline)")
    i.add_argument("file", help="JSON file: a list of issue objects (or a search result with 'items')")
    add_repo(i, "repository, when the objects do not say")
    common(i)
    i.set_defaults(func=run_import)

    sd = isub.add_parser("seed", help="load the known upstream issues bundled with reprobot (offline; "
                                      "a later sync updates them)")
    common(sd)
    sd.set_defaults(func=run_seed)

    st = isub.add_parser("status", help="what is indexed")
    common(st)
    st.set_defaults(func=run_status)


def run_import(args: argparse.Namespace) -> int:
    from bot.upstream.index import IssueIndex, import_file
    from bot.targets import get_target

    with IssueIndex.open(args.db) as index:
        stats = import_file(index, args.file, get_target(args.repo).repo if args.repo else None)
        total = index.count()
    out = {"added": stats.added, "updated": stats.updated, "repos": sorted(stats.repos), "total": total}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        console.print(f"imported {stats.added} new, {stats.updated} updated issue(s) "
                      f"({', '.join(sorted(stats.repos)) or 'none'}); {total} in the index")
    return 0


def run_seed(args: argparse.Namespace) -> int:
    from bot.upstream.index import IssueIndex
    from bot.upstream.seed import seed

    with IssueIndex.open(args.db) as index:
        stats = seed(index)
        total = index.count()
    out = {"added": stats.added, "repos": sorted(stats.repos), "total": total}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        console.print(f"added {stats.added} known issue(s) bundled with reprobot "
                      f"({', '.join(sorted(stats.repos)) or 'all were already indexed'}); {total} in the index. "
                      "`reprobot index sync --repo KEY` adds the rest (needs GITHUB_TOKEN)")
    return 0


def run_sync(args: argparse.Namespace) -> int:
    from bot.issue.github import github_client
    from bot.upstream.index import IssueIndex, sync
    from bot.targets import get_target

    client = github_client(api_url=args.api_url, require_token=True)
    results = []
    with IssueIndex.open(args.db) as index:
        for repo in dict.fromkeys(get_target(key).repo for key in args.repo):
            def progress(st) -> None:
                console.print(f"  {st.repo}: page {st.pages}, {st.fetched} fetched (up to {st.watermark})")
            stats = sync(index, repo, client=client, full=args.full, comments=not args.no_comments,
                         comment_budget=max(0, args.comment_budget), progress=progress)
            results.append({"repo": stats.repo, "since": stats.since, "fetched": stats.fetched,
                            "pages": stats.pages, "comments_fetched": stats.comments_fetched,
                            "watermark": stats.watermark, "indexed": index.count(stats.repo)})
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            console.print(f"{r['repo']}: {r['fetched']} issue(s)/PR(s) fetched"
                          + (f" since {r['since']}" if r["since"] else " (full)")
                          + f"; {r['indexed']} indexed, next sync from {r['watermark']}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    from bot.upstream.index import IssueIndex

    with IssueIndex.open(args.db, create=False) as index:
        repos = index.repos()
    if args.json:
        print(json.dumps(repos, indent=2))
        return 0
    if not repos:
        # An empty index is a state, not an error (exit 5 means "no failure" elsewhere).
        console.print("the issue index is empty: run `reprobot index seed` (offline, the known issues "
                      "bundled with reprobot), `reprobot index import FILE` or "
                      "`reprobot index sync --repo KEY` (needs GITHUB_TOKEN)")
        return 0
    table = Table(title="issue index")
    for col in ("repository", "issues+PRs", "last sync (updated_at watermark)", "synced at"):
        table.add_column(col)
    for r in repos:
        table.add_row(escape(r["repo"]), str(r["n"]), str(r["last_sync"] or "-"), str(r["synced_at"] or "-"))
    console.print(table)
    return 0
