"""Routing top-1 accuracy and dedup recall@5 / precision@1 on tests/data/issues_eval.json.

    python bench/route_dedup_eval.py [--json] [--verbose]

The labelled issues are turned into GitHub REST issue objects (title, a body with the error's
traceback and the reported versions, the thread facts as comments), imported into a fresh
SQLite index with ``bot.upstream.index.import_file`` (the same path as ``reprobot index import``), and
every labelled failure is routed (``bot.upstream.route.route``) and deduplicated (``bot.upstream.dedup.dedup``)
exactly as the CLI does. Also a leave-one-out pass: each issue of a duplicate group that has an
error is used as the query against an index without it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.upstream.dedup import dedup
from bot.upstream.index import IssueIndex, import_file
from bot.upstream.failure import FailureReport, failure_from_text
from bot.upstream.route import route

DATA = ROOT / "tests" / "data" / "issues_eval.json"
STYLES = {
    "linux": ("/home/user/venv/lib/python3.10/site-packages/", "/home/user/work/train.py", "/"),
    "conda": ("/opt/conda/lib/python3.11/site-packages/", "/workspace/run.py", "/"),
    "windows": ("C:\\Users\\me\\proj\\.venv\\Lib\\site-packages\\", "C:\\Users\\me\\proj\\train.py", "\\"),
    "dist": ("/usr/local/lib/python3.10/dist-packages/", "/content/main.py", "/"),
}


def load(path: Path = DATA) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def key(issue: dict[str, Any]) -> str:
    return f"{issue['repo']}#{issue['number']}"


def _lineno(*parts: str) -> int:
    """Stable, different line numbers per report: a line-number change must not matter."""
    return 10 + int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:6], 16) % 3000


def render_traceback(frames: list[str], error: str, style: str = "linux", call: str = "main()",
                     salt: str = "", user_inner: list[list[str]] | None = None) -> str:
    """A traceback as Python prints it, in the path style of one kind of install."""
    site, script, sep = STYLES[style]
    lines = ["Traceback (most recent call last):",
             f'  File "{script}", line {_lineno(salt, script)}, in <module>', f"    {call}"]
    for frame in frames:
        rel, func = frame.rsplit(":", 1)
        lines.append(f'  File "{site}{rel.replace("/", sep)}", line {_lineno(salt, frame)}, in {func}')
    for func, code in user_inner or []:
        lines += [f'  File "{script}", line {_lineno(salt, func)}, in {func}', f"    {code}"]
    lines.append(error)
    return "\n".join(lines) + "\n"


def issue_object(issue: dict[str, Any]) -> dict[str, Any]:
    """A GitHub REST issue object, as `GET /repos/{o}/{r}/issues` returns it."""
    repo, n = issue["repo"], issue["number"]
    is_pr = bool(issue.get("is_pr"))
    parts = []
    if issue.get("versions"):
        parts.append("### System Info\n\n" + "\n".join(f"- `{p}` version: {v}" for p, v in issue["versions"].items()))
    if issue.get("error"):
        tb = (render_traceback(issue["frames"], issue["error"], "dist", "main()", key(issue))
              if issue.get("frames") else issue["error"])
        parts.append("### Reproduction\n\n```\n" + tb + "```")
    if issue.get("body"):
        parts.append(issue["body"])
    created = f"20{20 + n % 6}-0{1 + n % 9}-1{n % 10}T12:00:00Z"
    obj: dict[str, Any] = {
        "url": f"https://api.github.com/repos/{repo}/issues/{n}",
        "repository_url": f"https://api.github.com/repos/{repo}",
        "html_url": f"https://github.com/{repo}/{'pull' if is_pr else 'issues'}/{n}",
        "number": n, "title": issue["title"], "body": "\n\n".join(parts), "state": issue["state"],
        "state_reason": ("completed" if issue["state"] == "closed" and not is_pr else None),
        "labels": [{"name": x} for x in issue.get("labels", [])], "comments": len(issue.get("thread", [])),
        "created_at": created, "updated_at": created, "closed_at": created if issue["state"] == "closed" else None,
        "user": {"login": "reporter"}, "reprobot_thread": list(issue.get("thread", [])),
    }
    if is_pr:
        obj["pull_request"] = {"url": f"https://api.github.com/repos/{repo}/pulls/{n}",
                               "html_url": f"https://github.com/{repo}/pull/{n}",
                               "merged_at": created if issue.get("merged") else None}
    return obj


def failure_of(item: dict[str, Any]) -> FailureReport:
    if item.get("traceback_file"):
        text = (DATA.parent / item["traceback_file"]).read_text(encoding="utf-8")
    else:
        text = render_traceback(item["frames"], item["error"], item.get("style", "linux"),
                                item.get("call", "main()"), item["name"], item.get("user_inner"))
    f = failure_from_text(text)
    f.repro_source = item.get("repro")
    f.versions = dict(item.get("versions", {}))
    return f


def build_index(path: Path, issues: list[dict[str, Any]]) -> IssueIndex:
    dump = path.with_suffix(".json")
    dump.write_text(json.dumps([issue_object(i) for i in issues]), encoding="utf-8")
    index = IssueIndex.open(path)
    import_file(index, dump)
    return index


def evaluate(data: dict[str, Any], verbose: bool = False) -> dict[str, Any]:
    issues = data["issues"]
    route_items: list[tuple[str, FailureReport, str | None, bool]] = []
    for f in data["failures"]:
        if "route" in f:
            route_items.append((f["name"], failure_of(f), f["route"], bool(f.get("held_out"))))
    for i in issues:
        if "route" in i and i.get("frames") and i.get("error"):
            tb = render_traceback(i["frames"], i["error"], "windows", "main()", "q" + key(i))
            route_items.append((key(i), failure_from_text(tb), i["route"], bool(i.get("held_out"))))
    route_rows = []
    for name, failure, label, held in route_items:
        got = route(failure).target
        route_rows.append({"item": name, "expected": label, "got": got, "ok": got == label, "held_out": held})

    with tempfile.TemporaryDirectory() as tmp:
        index = build_index(Path(tmp) / "eval.sqlite3", issues)
        dedup_rows = []
        for f in data["failures"]:
            failure = failure_of(f)
            target = route(failure).target
            result = dedup(index, failure, target_repo=target)
            got = [f"{r.repo}#{r.number}" for r in result.results]
            related, not_related = set(f.get("related", [])), set(f.get("not_related", []))
            row: dict[str, Any] = {"query": f["name"], "top5": got, "held_out": bool(f.get("held_out")),
                                   "scores": [round(r.score, 3) for r in result.results]}
            if related:
                row["recall@5"] = len(related & set(got)) / len(related)
                row["precision@1"] = float(bool(got) and got[0] in related)
            else:
                row["confident_false_dup"] = bool(result.results and result.results[0].score >= 0.5)
            if related and not_related:
                best_rel = min((got.index(k) for k in related if k in got), default=99)
                best_not = min((got.index(k) for k in not_related if k in got), default=99)
                row["non_dup_outranks"] = best_not < best_rel
            if f.get("fixed_in"):
                row["likely_fixed_in_ok"] = any(r.likely_fixed_in == f["fixed_in"] for r in result.results)
            dedup_rows.append(row)
        index.close()

        # Leave-one-out over duplicate groups: each member with an error finds the others.
        loo_rows = []
        groups: dict[str, list[dict[str, Any]]] = {}
        for i in issues:
            if i.get("group"):
                groups.setdefault(i["group"], []).append(i)
        for n, i in enumerate(x for x in issues if x.get("group") and x.get("error")):
            others = [k for k in (key(o) for o in groups[i["group"]]) if k != key(i)]
            if not others:
                continue
            idx = build_index(Path(tmp) / f"loo{n}.sqlite3", [o for o in issues if key(o) != key(i)])
            text = (render_traceback(i["frames"], i["error"], "conda", "main()", "loo" + key(i))
                    if i.get("frames") else f"Traceback (most recent call last):\n{i['error']}\n")
            failure = failure_from_text(text)
            got = [f"{r.repo}#{r.number}" for r in dedup(idx, failure, target_repo=route(failure).target).results]
            idx.close()
            loo_rows.append({"query": key(i), "top5": got, "recall@5": len(set(others) & set(got)) / len(others),
                             "precision@1": float(bool(got) and got[0] in others)})

    def mean(rows: list[dict[str, Any]], k: str) -> float | None:
        vals = [r[k] for r in rows if k in r]
        return round(sum(vals) / len(vals), 3) if vals else None

    dev_routes = [r for r in route_rows if not r["held_out"]]
    held_routes = [r for r in route_rows if r["held_out"]]
    held_dedup = [r for r in dedup_rows if r["held_out"]]
    dedup_rows_dev = [r for r in dedup_rows if not r["held_out"]]
    return {
        "issues": len(issues), "failures": len(data["failures"]),
        "routing": {"items": len(dev_routes),
                    "top1_accuracy": round(sum(r["ok"] for r in dev_routes) / len(dev_routes), 3),
                    "rows": route_rows},
        "held_out": {"routing_items": len(held_routes),
                     "routing_top1": (round(sum(r["ok"] for r in held_routes) / len(held_routes), 3)
                                      if held_routes else None),
                     "dedup_queries": len(held_dedup), "recall@5": mean(held_dedup, "recall@5"),
                     "precision@1": mean(held_dedup, "precision@1")},
        "dedup": {"queries_with_duplicates": sum(1 for r in dedup_rows_dev if "recall@5" in r),
                  "recall@5": mean(dedup_rows_dev, "recall@5"), "precision@1": mean(dedup_rows_dev, "precision@1"),
                  "queries_without_duplicates": sum(1 for r in dedup_rows_dev if "confident_false_dup" in r),
                  "confident_false_dup_rate": mean(
                      [{"x": float(r["confident_false_dup"])} for r in dedup_rows_dev if "confident_false_dup" in r], "x"),
                  "non_dup_outranks_rate": mean(
                      [{"x": float(r["non_dup_outranks"])} for r in dedup_rows_dev if "non_dup_outranks" in r], "x"),
                  "likely_fixed_in_ok": [r["likely_fixed_in_ok"] for r in dedup_rows if "likely_fixed_in_ok" in r],
                  "rows": dedup_rows},
        "leave_one_out": {"queries": len(loo_rows), "recall@5": mean(loo_rows, "recall@5"),
                          "precision@1": mean(loo_rows, "precision@1"), "rows": loo_rows},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print every row")
    ap.add_argument("--export", metavar="FILE",
                    help="write the eval issues as GitHub REST JSON (for `reprobot index import FILE`) and exit")
    args = ap.parse_args(argv)
    if args.export:
        Path(args.export).write_text(json.dumps([issue_object(i) for i in load()["issues"]], indent=1),
                                     encoding="utf-8")
        print(f"wrote {len(load()['issues'])} issue objects to {args.export}")
        return 0
    res = evaluate(load(), args.verbose)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    r, d, l = res["routing"], res["dedup"], res["leave_one_out"]
    print(f"eval set: {res['issues']} issues, {res['failures']} labelled failures")
    print("development set (the rules were written against it):")
    print(f"routing top-1 accuracy: {r['top1_accuracy']:.3f} "
          f"({sum(x['ok'] for x in r['rows'] if not x['held_out'])}/{r['items']})")
    print(f"dedup recall@5: {d['recall@5']}  precision@1: {d['precision@1']}  "
          f"({d['queries_with_duplicates']} queries with known duplicates)")
    print(f"dedup confident (>=0.5) false duplicate on {d['queries_without_duplicates']} no-duplicate queries: "
          f"{d['confident_false_dup_rate']}; a known non-duplicate outranks the duplicate: {d['non_dup_outranks_rate']}")
    print(f"'likely fixed in' named correctly: {d['likely_fixed_in_ok']}")
    print(f"leave-one-out over duplicate groups: recall@5 {l['recall@5']}  precision@1 {l['precision@1']} "
          f"({l['queries']} queries)")
    h = res["held_out"]
    print(f"held out (added after the rules were frozen): routing {h['routing_top1']} on {h['routing_items']} "
          f"items; dedup recall@5 {h['recall@5']} precision@1 {h['precision@1']} on {h['dedup_queries']} queries")
    if args.verbose:
        for row in r["rows"]:
            print(("  ok  " if row["ok"] else "  MISS") + f" route {row['item']}: expected {row['expected']}, got {row['got']}")
        for row in d["rows"] + l["rows"]:
            print(f"  dedup {row['query']}: {list(zip(row['top5'], row.get('scores', [])))}"
                  + "".join(f" {k}={row[k]}" for k in ("recall@5", "precision@1", "confident_false_dup",
                                                       "non_dup_outranks") if k in row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
