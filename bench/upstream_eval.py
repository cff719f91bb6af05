"""Routing and dedup on real upstream issues the rules never saw (issue #13).

    python bench/upstream_eval.py [--json] [--verbose] [--no-neighbours] [--train-only]

Reads bot/data/upstream/train.jsonl and bot/data/upstream/heldout.jsonl (see
bot/data/upstream/README.md: split by seeded hash before any rule was tuned). Every issue with
an exception and a message is queried as reprobot sees a failure in real use: a traceback built
from the issue's frames and error line, with the user's call when the thread shows it; never the
title. Routing truth is where the fix landed when the thread says so, else the issue's repository.

Neighbours: routing may consult an issue index. The index here holds the TRAIN issues only; a
train query never sees itself (leave-one-out), a held-out query sees train issues only.

Dedup: "re-report" retrieval: each issue's failure, rendered in another install's path style
with its numbers changed, queried against an index of every issue; the issue itself should be in
the top 5. And the duplicate links the threads state, where both ends are in the set.

--verbose prints the misses of the TRAIN part only; held-out misses are counted, never listed,
so they cannot steer a rule.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
BENCH = str(ROOT / "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

from route_dedup_eval import render_traceback  # noqa: E402

from bot.upstream.dedup import dedup  # noqa: E402
from bot.upstream.index import IssueIndex, import_objects  # noqa: E402
from bot.upstream.failure import failure_from_text  # noqa: E402
from bot.upstream.route import route  # noqa: E402
from bot.upstream.seed import issue_object as seed_issue_object  # noqa: E402
from reducer.errors import ReprobotError  # noqa: E402

DATA = ROOT / "bot" / "data" / "upstream"
PARTS = {"train": DATA / "train.jsonl", "heldout": DATA / "heldout.jsonl"}


def load(part: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in PARTS[part].read_text(encoding="utf-8").splitlines() if line.strip()]


def ref(issue: dict[str, Any]) -> str:
    return f"{issue['repo']}#{issue['number']}"


def evaluable(issue: dict[str, Any]) -> bool:
    return bool(issue.get("exc_type") and issue.get("message"))


def truth(issue: dict[str, Any]) -> str:
    return issue.get("where_fixed_repo") or issue["repo"]


def _call_line(entry: str | None) -> str:
    """The user's line: a call, or as the thread wrote it (``import bitsandbytes``, a CLI)."""
    if not entry:
        return "main()"
    return entry if (" " in entry or "(" in entry) else f"out = {entry}(...)"


def traceback_of(issue: dict[str, Any], style: str = "linux", salt: str = "") -> str:
    """What the thread shows, as a user would paste it: the frames it records under the user's
    call; with neither frames nor a call, the error line alone (a made-up user frame would
    claim the user's code raised)."""
    error = f"{issue['exc_type']}: {issue['message']}"
    frames = [f for f in issue.get("frames") or [] if re.match(r"^[\w.]+/.*\.py:[\w<]", f)]
    if not frames and not issue.get("entry_call"):
        return error + "\n"
    return render_traceback(frames, error, style, _call_line(issue.get("entry_call")), salt or ref(issue))


def issue_object(issue: dict[str, Any]) -> dict[str, Any]:
    """As the index imports it, with the error in a third path style (an index entry, a
    query and a re-report never share the rendering)."""
    body = ""
    if evaluable(issue):
        body = "### Reproduction\n\n```\n" + traceback_of(issue, "dist", "index" + ref(issue)) + "```"
    return seed_issue_object(issue, body)


def build_index(path: Path, issues: list[dict[str, Any]]) -> IssueIndex:
    index = IssueIndex.open(path)
    import_objects(index, [issue_object(i) for i in issues], source="bench", watermark=False)
    return index


def _reworded(issue: dict[str, Any]) -> dict[str, Any]:
    """The same failure as another user would report it: other numbers in the message."""
    counter = iter(range(7, 10_000, 13))
    message = re.sub(r"(?<![\w.])\d+(?![\w.])", lambda m: str(next(counter)) if len(m.group()) < 6 else m.group(),
                      issue["message"])
    return dict(issue, message=message)


def route_rows(part: str, issues: list[dict[str, Any]], index_for: Any) -> list[dict[str, Any]]:
    rows = []
    for issue in (i for i in issues if evaluable(i)):
        try:
            failure = failure_from_text(traceback_of(issue, "conda"))
        except ReprobotError as e:       # input the product refuses counts as no target
            rows.append({"issue": ref(issue), "part": part, "expected": truth(issue), "got": None, "top2": [],
                         "ok": False, "frames": bool(issue.get("frames")), "confidence": None, "verdict": str(e)})
            continue
        index = index_for(issue)
        result = route(failure, index=index) if index is not None else route(failure)
        ours = [r["repo"] for r in result.ranked if r["repo"] in REPOS]
        rows.append({"issue": ref(issue), "part": part, "expected": truth(issue), "got": result.target,
                     "top2": ours[:2], "ok": result.target == truth(issue),
                     "frames": bool(issue.get("frames")), "confidence": getattr(result, "confidence", None),
                     "verdict": result.verdict})
    return rows


REPOS = ("huggingface/transformers", "huggingface/peft", "huggingface/accelerate",
         "bitsandbytes-foundation/bitsandbytes")


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def rate(sel: list[dict[str, Any]], key: str = "ok") -> str:
        return f"{sum(r[key] for r in sel) / len(sel):.2f} ({sum(r[key] for r in sel)}/{len(sel)})" if sel else "-"

    for r in rows:
        r["ok2"] = r["expected"] in r["top2"]
    by_repo = {repo: rate([r for r in rows if r["expected"] == repo]) for repo in REPOS}
    confusion = Counter((r["expected"].split("/")[1], (r["got"] or "none").split("/")[-1]) for r in rows if not r["ok"])
    return {"items": len(rows), "top1": rate(rows), "top2": rate(rows, "ok2"),
            "with_frames": rate([r for r in rows if r["frames"]]),
            "message_only": rate([r for r in rows if not r["frames"]]),
            "no_target": sum(1 for r in rows if r["got"] is None), "by_repo": by_repo,
            "misses": {f"{a} -> {b}": n for (a, b), n in confusion.most_common()}}


def evaluate(neighbours: bool = True, train_only: bool = False) -> dict[str, Any]:
    train, held = load("train"), ([] if train_only else load("heldout"))
    out: dict[str, Any] = {"train_issues": len(train), "heldout_issues": len(held)}
    with tempfile.TemporaryDirectory() as tmp:
        index = build_index(Path(tmp) / "train.sqlite3", train) if neighbours else None

        def for_train(issue: dict[str, Any]) -> Any:
            return None if index is None else _Without(index, issue)

        rows_train = route_rows("train", train, for_train)
        out["routing"] = {"train": summarize(rows_train)}
        if not train_only:
            out["routing"]["heldout"] = summarize(route_rows("heldout", held, lambda issue: index))
        out["_train_rows"] = rows_train
        if index is not None:
            index.close()

        # Dedup: every issue indexed; each evaluable issue re-reported in another path style
        # with other numbers must find itself in the top 5.
        full = build_index(Path(tmp) / "all.sqlite3", train + held)
        for part, issues in (("train", train), ("heldout", held))[: 1 if train_only else 2]:
            hits, first, n = 0, 0, 0
            for issue in (i for i in issues if evaluable(i)):
                again = _reworded(issue)
                got = _related(full, traceback_of(again, "windows", "again" + ref(issue)))
                n += 1
                hits += ref(issue) in got
                first += bool(got) and got[0] == ref(issue)
            out.setdefault("dedup_rereport", {})[part] = {"queries": n, "recall@5": round(hits / n, 3),
                                                          "precision@1": round(first / n, 3)}
        # "Likely duplicate" (what the preview says first and --submit stops on): each issue
        # re-reported once with itself indexed (a flag on itself is right) and once with itself
        # left out (a flag is right only on a duplicate the threads state).
        by_ref_all = {ref(i): i for i in train + held}
        for part, issues in (("train", train), ("heldout", held))[: 1 if train_only else 2]:
            right = wrong = flagged_in = flagged_out = n = 0
            for issue in (i for i in issues if evaluable(i)):
                n += 1
                text = traceback_of(_reworded(issue), "windows", "again" + ref(issue))
                stated = set(issue.get("duplicate_of") or []) | {
                    ref(o) for o in by_ref_all.values() if ref(issue) in (o.get("duplicate_of") or [])}
                for leave_out in (False, True):
                    top = _likely_duplicate(full, text, ref(issue) if leave_out else None)
                    if top is None:
                        continue
                    flagged_out += leave_out
                    flagged_in += not leave_out
                    ok = top in stated or (top == ref(issue) and not leave_out)
                    right += ok
                    wrong += not ok
            out.setdefault("likely_duplicate", {})[part] = {
                "queries": n, "flagged_with_itself": flagged_in, "flagged_left_out": flagged_out,
                "precision": round(right / (right + wrong), 3) if right + wrong else None,
                "right": right, "wrong": wrong}
        out["pairs"] = {part: pair_figures(full, load_pairs(part), train + held)
                        for part in (("train",) if train_only else ("train", "heldout"))}
        by_ref = {ref(i): i for i in train + held}
        pairs = [(i, d) for i in train + held for d in i.get("duplicate_of") or [] if d in by_ref and evaluable(i)]
        found = 0
        for issue, dup in pairs:
            got = _related(full, traceback_of(issue, "windows", "dup" + ref(issue)), ref(issue))
            found += dup in got
        out["dedup_stated_duplicates"] = {"pairs": len(pairs), "found_in_top5": found}
        full.close()
    return out


def load_pairs(part: str) -> list[dict[str, Any]]:
    path = DATA / f"pairs_{part}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _duplicates_of(issues: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Every issue's stated duplicates: the pairs labelled duplicate and the threads' links."""
    same: dict[str, set[str]] = {}
    links = [(ref(p["a"]), ref(p["b"])) for p in pairs if p["label"] == "duplicate"]
    links += [(ref(i), d) for i in issues for d in i.get("duplicate_of") or []]
    for a, b in links:
        same.setdefault(a, set()).add(b)
        same.setdefault(b, set()).add(a)
    return same


def pair_figures(index: IssueIndex, pairs: list[dict[str, Any]], issues: list[dict[str, Any]]) -> dict[str, Any]:
    """Each end of each labelled pair, queried with its own failure (itself left out of the
    index of every issue): for a duplicate pair the other end should be in the top 5 and first;
    for a non-duplicate pair it must never be called a likely duplicate. "Likely duplicate"
    precision counts every flag raised on these queries, right when the flagged issue is a stated
    duplicate of the query (any pair of either part, or a thread's link)."""
    every = _duplicates_of(issues, load_pairs("train") + load_pairs("heldout"))
    dup_q = top5 = first = 0
    nondup_q = nondup_first = nondup_flagged = 0
    right = wrong = 0
    for pair in pairs:
        for q, other in ((pair["a"], pair["b"]), (pair["b"], pair["a"])):
            if not evaluable(q):
                continue
            text = traceback_of(q, "windows", "pair" + ref(q))
            got = _related(index, text, ref(q))
            flagged = _likely_duplicate(index, text, ref(q))
            if pair["label"] == "duplicate":
                dup_q += 1
                top5 += ref(other) in got
                first += bool(got) and got[0] in every.get(ref(q), set())
            else:
                nondup_q += 1
                nondup_first += bool(got) and got[0] == ref(other)
                nondup_flagged += flagged == ref(other)
            if flagged is not None:
                ok = flagged in every.get(ref(q), set())
                right += ok
                wrong += not ok
    return {"pairs": len(pairs), "duplicate_pairs": sum(p["label"] == "duplicate" for p in pairs),
            "duplicate_queries": dup_q, "recall@5": round(top5 / dup_q, 3) if dup_q else None,
            "precision@1": round(first / dup_q, 3) if dup_q else None,
            "nonduplicate_queries": nondup_q, "nonduplicate_ranked_first": nondup_first,
            "nonduplicate_flagged": nondup_flagged,
            "likely_duplicate_precision": round(right / (right + wrong), 3) if right + wrong else None,
            "likely_right": right, "likely_wrong": wrong}


def _likely_duplicate(index: IssueIndex, text: str, excluded: str | None) -> str | None:
    """The issue the preview would call a likely duplicate (bot/prepare.py), or None."""
    from bot.prepare import likely_duplicate

    try:
        failure = failure_from_text(text)
    except ReprobotError:
        return None
    index = _leaving_out(index, excluded)
    top = likely_duplicate(dedup(index, failure, target_repo=route(failure).target).to_dict())
    return f"{top['repo']}#{top['number']}" if top else None


def _leaving_out(index: IssueIndex, excluded: str | None) -> Any:
    if excluded is None:
        return index
    repo, number = excluded.split("#")
    return _Without(index, {"repo": repo, "number": number})


def _related(index: IssueIndex, text: str, excluded: str | None = None) -> list[str]:
    """dedup's top 5 for a pasted text (none when the product refuses the text), ``excluded``
    left out of the index."""
    try:
        failure = failure_from_text(text)
    except ReprobotError:
        return []
    index = _leaving_out(index, excluded)
    return [f"{r.repo}#{r.number}" for r in dedup(index, failure, target_repo=route(failure).target).results]


class _Without:
    """The train index seen by one train query: everything but that issue itself."""

    def __init__(self, index: IssueIndex, issue: dict[str, Any]) -> None:
        self._index, self.excluded = index, (issue["repo"], int(issue["number"]))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="list the train part's routing misses")
    ap.add_argument("--no-neighbours", action="store_true", help="route by the traceback alone (no index)")
    ap.add_argument("--train-only", action="store_true",
                    help="measure the train part only (while developing rules: the held-out part stays unseen)")
    args = ap.parse_args(argv)
    res = evaluate(neighbours=not args.no_neighbours, train_only=args.train_only)
    rows = res.pop("_train_rows")
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"upstream set: {res['train_issues']} train issues, {res['heldout_issues']} held out "
          f"(neighbours from the train index: {'no' if args.no_neighbours else 'yes'})")
    for part, s in res["routing"].items():
        print(f"{part:8s} routing top-1 {s['top1']}  top-2 {s['top2']}  with frames {s['with_frames']}  "
              f"message only {s['message_only']}  no target: {s['no_target']}")
        print(f"{'':8s} by repo: " + ", ".join(f"{k.split('/')[1]} {v}" for k, v in s["by_repo"].items()))
        if part == "train":
            print(f"{'':8s} misses: {s['misses']}")
    for part, d in res["dedup_rereport"].items():
        print(f"{part:8s} dedup re-report recall@5 {d['recall@5']}  precision@1 {d['precision@1']} "
              f"({d['queries']} queries)")
    for part, d in res["likely_duplicate"].items():
        print(f"{part:8s} likely duplicate: precision {d['precision']} ({d['right']} right, {d['wrong']} wrong); "
              f"flagged {d['flagged_with_itself']}/{d['queries']} with the issue indexed, "
              f"{d['flagged_left_out']}/{d['queries']} with it left out")
    for part, d in res["pairs"].items():
        print(f"{part:8s} pairs ({d['pairs']}, {d['duplicate_pairs']} duplicate): recall@5 {d['recall@5']}  "
              f"precision@1 {d['precision@1']} ({d['duplicate_queries']} queries); likely duplicate precision "
              f"{d['likely_duplicate_precision']} ({d['likely_right']} right, {d['likely_wrong']} wrong); "
              f"non-duplicates: {d['nonduplicate_flagged']} flagged, {d['nonduplicate_ranked_first']} ranked first "
              f"({d['nonduplicate_queries']} queries)")
    sd = res["dedup_stated_duplicates"]
    print(f"stated duplicates with both ends in the set: {sd['found_in_top5']}/{sd['pairs']} found in the top 5")
    if args.verbose:
        for r in rows:
            if not r["ok"]:
                print(f"  MISS {r['issue']}: expected {r['expected']}, got {r['got']} | {r['verdict'][:150]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
