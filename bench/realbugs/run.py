"""One command runs reprobot's whole pipeline on the real-bug entries and prints a table per stage.

    python bench/realbugs/run.py [NAME ...] [--part heldout|train|fresh|fresh2|fresh3|fresh4|fresh5|fresh6|fresh7|fresh8|fresh9] [--stages reduce,route,...]
                                 [--from DIR] [--out DIR] [--max-time S] [--offline] [--json]

For each entry, in its pinned environment (bench/realbugs/envs.py: the base interpreter with the
entry's overlay first on PYTHONPATH, which every run reprobot starts inherits), reprobot is run
through its command line, as a user would run it, one stage after the other:

- reduce:   `reprobot reduce script.py --python BASE --max-time S`: statements before and after,
            runs, seconds, whether the reduced repro, run again here, fails with the entry's
            signature, and for entries with a posted minimal repro whether ours is no larger;
- route:    `reprobot route DIR` (as `file --dry-run` runs it: the bundled index of known issues),
            and once more with `--no-issue-index`: the repository picked vs the one that fixed it
            (fixed bugs) or the entry's own;
- dedup:    `reprobot dedup DIR` against the bundled index: are the entry's known duplicates in
            the top 5, and are they in the bundled index at all;
- versions: `reprobot versions DIR` with the cached wheels (`--no-index --find-links`): a fixed bug
            bisects the package of the repository that fixed it from the reported release on, and
            should name `first_passing_release`; any other entry gets the locked row and that
            package's latest release (an open bug should still fail there). The releases' wheels
            are fetched into the cache first (once; never with --offline);
- contrast: `reprobot contrast DIR`, then the bug/usage/environment classifier as the draft reads
            it (`reprobot draft DIR`), with the run evidence and without it (a copy of the folder
            without versions.json and contrast.json).

Each stage reads the previous one's folder, OUT/<entry>/ (the repro folder under repros/, one row
per stage under rows/), so `--stages route,dedup` reruns only those and `--from DIR` starts from
an earlier run's folders (copied, never changed). Results go to --out (default
bench/realbugs/results/<date>/): results.json and summary.md beside the folders.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import catalog  # noqa: E402
import check  # noqa: E402
import envs  # noqa: E402

from packaging.requirements import InvalidRequirement, Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402
from packaging.version import InvalidVersion, Version  # noqa: E402

from bot.rerun.environments import RESOLVE_ROUNDS, NotInstallable  # noqa: E402
from bot.rerun.releases import IndexOptions, Releases, list_releases  # noqa: E402
from bot.rerun import release_times  # noqa: E402
from bot.rerun.requirement_choice import Chooser, index_url  # noqa: E402
from bot.store import VERDICT_PASS, VERDICT_SAME  # noqa: E402
from reducer.analysis.size import count_statements  # noqa: E402
from reducer.errors import ExitCode  # noqa: E402
from reducer.failure.signature import find_match  # noqa: E402
from reducer.run.runner import Runner, RunSpec  # noqa: E402

STAGES = ("reduce", "route", "dedup", "versions", "contrast")
RESULTS = catalog.HERE / "results"
# the package a repository's fix ships in (what `versions` swaps); torch is not among versions' rows
PACKAGE = {"huggingface/transformers": "transformers", "huggingface/peft": "peft",
           "huggingface/accelerate": "accelerate", "bitsandbytes-foundation/bitsandbytes": "bitsandbytes",
           "huggingface/trl": "trl", "pytorch/pytorch": "torch"}
KNOWN_ISSUES = [envs.REPO / "bot" / "data" / "upstream" / f"{p}.jsonl" for p in ("train", "heldout")]
KIND_TRAIN = envs.REPO / "bot" / "data" / "kind" / "train.jsonl"
# never handed to reprobot: nothing here may reach GitHub
SECRETS = ("GITHUB_TOKEN", "GH_TOKEN", "REPROBOT_GITHUB_API", "REPROBOT_INDEX_DB")
REPRO_CHECK_TIMEOUT = 600.0


# ---- running reprobot ----------------------------------------------------------------------------
class Ctx:
    def __init__(self, out: Path, *, offline: bool, max_time: float, stage_timeout: float, runs: int | None = None,
                 trace: bool = True):
        self.out, self.offline, self.max_time, self.stage_timeout, self.runs = out, offline, max_time, stage_timeout, runs
        self.trace = trace
        self._envs: dict[str, object] = {}

    def environment(self, name: str):
        """The entry's environment (built once per run; cached on disk by envs.py)."""
        if name not in self._envs:
            hard, soft = envs.entry_pins(catalog.load(name))
            self._envs[name] = envs.build(hard, soft, online=not self.offline)
        return self._envs[name]

    def cli_env(self, name: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SECRETS}
        env.update(self.environment(name).env())
        env.update(check.OFFLINE_ENV)
        env["REPROBOT_ENV_CACHE"] = str(envs.envs_root())        # versions' overlays beside the entries'
        return env


def use_private_uv() -> None:
    """The private uv of the README, when there is one, on PATH for envs.py's resolutions here and for
    reprobot's overlay installs (seconds where pip takes minutes)."""
    tools = envs.wheels_dir().parent / "tools" / "bin"
    if (tools / "uv").is_file() and str(tools) not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"


def reprobot(ctx: Ctx, name: str, args: list[str], log: Path, timeout: float) -> tuple[int | None, str, float]:
    """`python -m bot ARGS` in the entry's environment: (exit code or None on timeout, stdout, seconds).
    Its stderr goes to `log`. A run past `timeout` gets SIGTERM (reprobot keeps its best result),
    then SIGKILL."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "a", encoding="utf-8") as err:
        err.write(f"$ reprobot {' '.join(args)}\n")
        err.flush()
        proc = subprocess.Popen([envs.BASE_PYTHON, "-m", "bot", *args], cwd=envs.REPO, env=ctx.cli_env(name),
                                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            rc = None
    return rc, out, time.monotonic() - started


def json_out(text: str) -> dict | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def folder_of(ctx: Ctx, name: str) -> Path:
    return ctx.out / name


def read_row(ctx: Ctx, name: str, stage: str) -> dict | None:
    path = folder_of(ctx, name) / "rows" / f"{stage}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def write_row(ctx: Ctx, name: str, stage: str, row: dict) -> None:
    path = folder_of(ctx, name) / "rows" / f"{stage}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row, indent=1) + "\n", encoding="utf-8")


def repro_dir(ctx: Ctx, name: str) -> Path:
    row = read_row(ctx, name, "reduce") or {}
    if not row.get("repro_dir"):
        raise StageError("no reduced folder: run the reduce stage (or --from an earlier run)")
    path = folder_of(ctx, name) / row["repro_dir"]
    if not (path / "repro.py").is_file():
        raise StageError(f"{row['repro_dir']}/repro.py is missing")
    return path


class StageError(Exception):
    """A stage that could not run for this entry; its message is the row's one line."""


# ---- the stages ----------------------------------------------------------------------------------
def fails_as_entry(entry: dict, script: Path, env) -> tuple[bool, float]:
    """Does `script` fail with the entry's signature in its environment? (check.py's oracle), and
    the seconds the run took."""
    runner = Runner(RunSpec(script=script, python=envs.BASE_PYTHON, timeout=REPRO_CHECK_TIMEOUT,
                            env={**env.env(), **check.OFFLINE_ENV}))
    started = time.monotonic()
    outcome = runner.run(script.read_text(encoding="utf-8"))
    target, options = check.target_of(entry)
    return find_match(outcome.tracebacks, target, options) is not None, time.monotonic() - started


# reduce's --max-time bounds the whole command, confirming the failure included: each entry's
# search gets --max-time on top of the runs of its original that reduce makes first (its --runs
# confirmation runs and its traced run), so a slow script is not left with no search at all
REDUCE_RUNS = 2                 # reduce's own --runs default (bot/commands/reduce.py)


def reduce_budget(ctx: Ctx, original_seconds: float) -> float:
    """reduce's --max-time: the search budget plus one timed run of the original for each run reduce
    makes of it before searching (with --runs 1 --no-trace, one; by default, three)."""
    original_runs = (ctx.runs or REDUCE_RUNS) + (1 if ctx.trace else 0)
    return ctx.max_time + original_runs * original_seconds


def stage_reduce(ctx: Ctx, name: str, entry: dict) -> dict:
    folder = folder_of(ctx, name)
    store = folder / "repros"
    shutil.rmtree(store, ignore_errors=True)
    same, original_seconds = fails_as_entry(entry, catalog.script_of(name), ctx.environment(name))
    if not same:
        raise StageError("the original script does not fail with the entry's signature here (check.py says why)")
    max_time = reduce_budget(ctx, original_seconds)
    args = ["reduce", str(catalog.script_of(name)), "--python", envs.BASE_PYTHON, "--out", str(store),
            "--max-time", f"{max_time:.0f}", "--json", "--quiet"]
    if ctx.runs is not None:
        args += ["--runs", str(ctx.runs)]
    if not ctx.trace:
        args.append("--no-trace")
    # past --max-time reduce still verifies the best result cold and pins its environment
    rc, out, seconds = reprobot(ctx, name, args, folder / "logs" / "reduce.log",
                                timeout=max(ctx.stage_timeout, max_time + 1200))
    data = json_out(out) or {}
    row = {"exit": rc, "seconds": round(seconds, 1), "max_time": round(max_time),
           "original_seconds": round(original_seconds, 1),
           "status": data.get("status") or ("timed out" if rc is None else f"exit {rc}")}
    if not data.get("repro"):
        raise StageError(f"reduce gave no repro ({row['status']}; see {name}/logs/reduce.log)")
    path = Path(data["repro_dir"])
    reduction = json.loads((path / "reduction.json").read_text()) if (path / "reduction.json").is_file() else {}
    before = count_statements((path / "original.py").read_text(encoding="utf-8"))
    after = count_statements((path / "repro.py").read_text(encoding="utf-8"))
    posted = entry.get("posted_repro_statements")
    row.update({"repro_dir": str(path.relative_to(folder)), "statements_before": before, "statements_after": after,
                "runs": data.get("runs"), "verified": bool(reduction.get("repro_sha256")),
                "posted": posted, "within_posted": None if posted is None else after <= posted,
                "same_signature": fails_as_entry(entry, path / "repro.py", ctx.environment(name))[0]})
    return row


def _target(text: str) -> dict:
    data = json_out(text)
    if data is None:
        raise StageError("route printed no JSON")
    return data


def stage_route(ctx: Ctx, name: str, entry: dict) -> dict:
    path = repro_dir(ctx, name)
    folder = folder_of(ctx, name)
    expected = entry["fixed_by"] if entry["verdict"] == "bug" and entry.get("fixed_by") else entry["repo"]
    no_db = folder / "no-index.sqlite3"          # a path with no index: route reads the bundled issues
    no_db.unlink(missing_ok=True)
    log = folder / "logs" / "route.log"
    # without the index first: route.json ends as `file --dry-run` writes it (with the index)
    _, out, _ = reprobot(ctx, name, ["route", str(path), "--json", "--no-issue-index"], log, ctx.stage_timeout)
    bare = _target(out)
    rc, out, seconds = reprobot(ctx, name, ["route", str(path), "--json", "--db", str(no_db)], log, ctx.stage_timeout)
    data = _target(out)
    return {"exit": rc, "seconds": round(seconds, 1), "expected": expected, "picked": data.get("target"),
            "ok": data.get("target") == expected, "confidence": data.get("confidence"),
            "verdict": data.get("verdict"), "picked_without_index": bare.get("target"),
            "ok_without_index": bare.get("target") == expected,
            # who made the failing line's tensors: the repro's one run under route (bot/rerun/built.py)
            "built": bare.get("built"),
            "own_issue_indexed": (entry["repo"], entry["number"]) in known_issues()}


_KNOWN: set[tuple[str, int]] | None = None


def known_issues() -> set[tuple[str, int]]:
    """(repo, number) of the issues bundled with reprobot (bot/data/upstream/: what dedup and the
    router's neighbour vote see when the user's index is empty)."""
    global _KNOWN
    if _KNOWN is None:
        _KNOWN = set()
        for path in KNOWN_ISSUES:
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    d = json.loads(line)
                    _KNOWN.add((d["repo"], int(d["number"])))
    return _KNOWN


def kind_training_issues() -> set[tuple[str, int]]:
    """(repo, number) of the issues in the classifier's labelled train part."""
    out = set()
    for line in KIND_TRAIN.read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            out.add((d.get("repo"), int(d.get("number") or 0)))
    return out


def stage_dedup(ctx: Ctx, name: str, entry: dict) -> dict:
    path = repro_dir(ctx, name)
    with tempfile.TemporaryDirectory(prefix="realbugs-dedup-") as tmp:
        # a new, empty index: dedup ranks the issues bundled with reprobot, as for a first-time user
        rc, out, seconds = reprobot(ctx, name, ["dedup", str(path), "--json", "--db", str(Path(tmp) / "index.sqlite3"),
                                                "--no-search", "--no-sync", "--top", "5"],
                                    folder_of(ctx, name) / "logs" / "dedup.log", ctx.stage_timeout)
    data = json_out(out)
    if data is None:
        raise StageError(f"dedup printed no JSON (exit {rc})")
    top = [(r.get("repo"), int(r.get("number") or 0)) for r in data.get("results") or []][:5]
    dups = [{"number": d, "in_top5": (entry["repo"], d) in top,
             "rank": top.index((entry["repo"], d)) + 1 if (entry["repo"], d) in top else None,
             "in_index": (entry["repo"], d) in known_issues()} for d in entry.get("duplicates") or []]
    return {"exit": rc, "seconds": round(seconds, 1), "index": data.get("index_source") or "user",
            "top5": [f"{r.split('/')[-1]}#{n}" for r, n in top], "duplicates": dups,
            "found": None if not dups else all(d["in_top5"] for d in dups),
            "own_issue_in_top5": (entry["repo"], entry["number"]) in top}


def _release_list(package: str, pre: bool, online: bool) -> list[str]:
    index = IndexOptions((), pre) if online else cache_index(pre)
    rel = list_releases(package, f"{sys.version_info[0]}.{sys.version_info[1]}", index)
    if rel.error:
        raise StageError(f"{package}: {rel.error}")
    return rel.versions


def _newest_cached(req: Requirement, pre: bool) -> "envs.Wheel | None":
    """The release `--no-index --find-links` the cache would install for `req`: the newest that
    matches (a pre-release only when asked for, or when nothing else matches)."""
    found = [w for w in envs.local_wheels(envs.wheels_dir()) if w.name == canonicalize_name(req.name)
             and req.specifier.contains(w.version, prereleases=True)]
    finals = [w for w in found if pre or not Version(w.version).is_prerelease]
    return max(finals or found, key=lambda w: Version(w.version), default=None)


def cache_index(pre: bool) -> IndexOptions:
    """The options `versions` runs with here: the wheel cache only (`--no-index --find-links`)."""
    return IndexOptions(("--no-index", "--find-links", str(envs.wheels_dir())), pre)


_LISTED: dict[tuple[str, str, bool], Releases] = {}


def _index_releases(name: str, python: str, pre: bool) -> Releases:
    """Every release of `name` the package index lists (pip's configuration: PyPI or a mirror), once a run."""
    key = (canonicalize_name(name), python, pre)
    if key not in _LISTED:
        _LISTED[key] = list_releases(name, python, IndexOptions((), pre))
    return _LISTED[key]


def _fetch(req: Requirement, pre: bool) -> str | None:
    """Download `req` into the wheel cache; why it could not be, or None."""
    try:
        envs._download([str(req)] + (["--pre"] if pre else []), envs.wheels_dir())
    except NotInstallable as e:
        return str(e)
    return None


def fetch_for_versions(entry_base: "envs.Installed", package: str, version: str, pre: bool) -> str | None:
    """Put into the wheel cache what `versions` will install for this release of `package` on top of
    the entry's environment, and nothing else: the release itself (no dependencies), then, as its
    overlay does (bot/rerun/environments.py), each requirement the environment does not meet, a few
    rounds, at the release that versions' own chooser picks (bot/rerun/requirement_choice.py). The
    chooser is shown every release the index lists and the index's upload times, not the cache's, so
    an empty cache gets the same pick as a full one; each round writes the index's upload times of
    the cached files it needed into the cache's sidecar (bot/rerun/release_times.py), which is what
    versions, reading the cache offline (`cache_index`), then chooses by: the contemporary release,
    which once cached is also the contemporary one among what the cache holds. Where the chooser
    leaves it to the installer (its newest matching), the index's newest is fetched, which makes it
    the cache's newest too. Returns why it cannot be completed, or None."""
    marker_env = {"python_version": entry_base.python, "python_full_version": entry_base.full_python, "extra": ""}
    chosen = {canonicalize_name(package): version}
    online = IndexOptions((), pre)          # pip's configured index: its listing and its upload times
    chooser = Chooser(entry_base.python, online, {package: version},
                      releases=lambda n: _index_releases(n, entry_base.python, pre))
    for _ in range(RESOLVE_ROUNDS + 1):
        need: list[str] = []
        for name, ver in list(chosen.items()):
            wheel = next((w for w in envs.local_wheels(envs.wheels_dir()) if w.name == name and w.version == ver), None)
            if wheel is None:
                envs._download([f"{name}=={ver}"], envs.wheels_dir())
                wheel = next(w for w in envs.local_wheels(envs.wheels_dir()) if w.name == name and w.version == ver)
            for text in envs.requires_of(wheel.path):
                try:
                    req = Requirement(text)
                except InvalidRequirement:
                    continue
                if req.marker is not None and not req.marker.evaluate(marker_env):
                    continue
                have = chosen.get(canonicalize_name(req.name)) or entry_base.version(req.name)
                try:
                    ok = have is not None and req.specifier.contains(have, prereleases=True)
                except InvalidVersion:
                    ok = True
                if not ok:
                    need.append(f"{req.name}{req.specifier}")
        # the times versions will choose by offline, for every cached file of what this round needed
        url = index_url(online)
        if url is not None:
            release_times.record_from_index(envs.wheels_dir(), list(chosen), url)
        if not need:
            return None
        # `have` as the overlay's probe sees it: what an earlier round put there, else the entry's own
        for pick in chooser.choose(need, lambda n: chosen.get(canonicalize_name(n)) or entry_base.version(n)):
            req = Requirement(pick.requirement())
            cached = _newest_cached(req, pre)
            if pick.version is None or cached is None:
                why = _fetch(req, pre and pick.version is None)
                if why is not None and pick.version is None:
                    return why
                if why is not None:
                    # a pick with no wheel here: the overlay falls back to the newest matching (rule 4)
                    req = Requirement(f"{pick.name}{pick.specifier}")
                    why = _fetch(req, pre)
                    if why is not None:
                        return why
                cached = _newest_cached(req, pre)
            if cached is None:
                return f"no release of {req} could be fetched"
            chosen[cached.name] = cached.version
    return f"requirements still unmet after {RESOLVE_ROUNDS} rounds"


def fetch_releases(ctx: Ctx, name: str, package: str, releases: list[str], pre: bool) -> list[str]:
    """fetch_for_versions for each release; returns the ones that could not be completed."""
    entry_base = envs.probe(envs.BASE_PYTHON, ctx.environment(name).pythonpath)
    return [v for v in releases if fetch_for_versions(entry_base, package, v, pre) is not None]


def _is_pre(version: str | None) -> bool:
    try:
        return version is not None and Version(version).is_prerelease
    except InvalidVersion:
        return False


def stage_versions(ctx: Ctx, name: str, entry: dict) -> dict:
    path = repro_dir(ctx, name)
    fixed = entry["verdict"] == "bug" and bool(entry.get("first_passing_release")) and bool(entry.get("fixed_by"))
    open_bug = entry["verdict"] == "bug" and not fixed
    package = PACKAGE[entry["fixed_by"] if fixed or (open_bug and entry.get("fixed_by")) else entry["repo"]]
    if package == "torch":
        return {"mode": "skipped", "package": package, "why": "torch is not among the packages `versions` swaps",
                "ok": None}
    low = (entry.get("reported_on") or {}).get(package)
    pre = _is_pre(low)             # a report on a pre-release: the releases after it include pre-releases
    index = cache_index(pre).pip_args()     # the options fetch_for_versions chose under
    fetched_failed: list[str] = []
    if not ctx.offline:
        listed = _release_list(package, pre, online=True)
        wanted = [v for v in listed if low is None or Version(v) >= Version(low)] if fixed else listed[-1:]
        fetched_failed = fetch_releases(ctx, name, package, wanted, pre)
    log = folder_of(ctx, name) / "logs" / "versions.log"
    if fixed:
        args = ["versions", str(path), "--json", "--bisect", package, *(["--range", f"{low}.."] if low else []), *index]
    else:
        args = ["versions", str(path), "--json", "--packages", package, *index]
    rc, out, seconds = reprobot(ctx, name, args, log, ctx.stage_timeout)
    data = json_out(out)
    if data is None:
        raise StageError(f"versions printed no JSON ({'timed out' if rc is None else f'exit {rc}'}; see {name}/logs/versions.log)")
    row = {"exit": rc, "seconds": round(seconds, 1), "package": package, "runs": data.get("runs"),
           "not_fetched": fetched_failed}
    if fixed:
        bisect = data.get("bisect") or {}
        found = bisect.get("first_passing")
        expected = entry["first_passing_release"]
        # a fix first shipped in a pre-release (5.0.0rc1) is named by its final release when
        # pre-releases are not searched
        ok = found == expected or (found is not None and _is_pre(expected) and not pre
                                   and Version(found).base_version == Version(expected).base_version)
        row.update({"mode": "bisect", "expected": expected, "found": found, "ok": ok,
                    "sentence": bisect.get("sentence"), "tried": [t["version"] for t in bisect.get("tried") or []]})
        return row
    rows = {r["label"]: r for r in data.get("rows") or []}
    latest = rows.get(f"{package} latest") or {}
    verdict = (latest.get("verdict") or {}).get("kind")
    row.update({"mode": "latest", "latest": (latest.get("versions") or {}).get(package), "latest_verdict": verdict,
                "locked_verdict": ((rows.get("locked") or {}).get("verdict") or {}).get("kind"),
                "note": latest.get("note") or ""})
    # an open bug should still fail the same way on the latest release; for the rest it is evidence only
    row["expected"] = "still fails on latest" if open_bug else None
    row["ok"] = verdict == VERDICT_SAME if open_bug else None
    return row


def _kind_of(ctx: Ctx, name: str, path: Path, repo: str, log: Path) -> dict | None:
    rc, _, _ = reprobot(ctx, name, ["draft", str(path), "--repo", repo, "--force", "--quiet"], log, ctx.stage_timeout)
    draft = path / f"draft-{repo.split('/')[-1]}.json"
    found = list(path.glob("draft-*.json"))
    if not draft.is_file() and found:
        draft = found[0]
    if not draft.is_file():
        return None
    return (json.loads(draft.read_text(encoding="utf-8")) or {}).get("kind")


def stage_contrast(ctx: Ctx, name: str, entry: dict) -> dict:
    path = repro_dir(ctx, name)
    folder = folder_of(ctx, name)
    log = folder / "logs" / "contrast.log"
    rc, out, seconds = reprobot(ctx, name, ["contrast", str(path), "--json"], log, ctx.stage_timeout)
    data = json_out(out)
    changes = (data or {}).get("changes") or []
    route = read_row(ctx, name, "route") or {}
    repo = route.get("picked") or entry["repo"]      # the draft the user would get; the entry's own when none
    kind = _kind_of(ctx, name, path, repo, log)
    with tempfile.TemporaryDirectory(prefix="realbugs-kind-") as tmp:
        # the same folder without the run evidence: what the classifier reads from the failure alone
        bare = Path(tmp) / path.name
        shutil.copytree(path, bare, ignore=shutil.ignore_patterns("versions.json", "contrast.json", "draft-*"))
        bare_kind = _kind_of(ctx, name, bare, repo, log)
    # a stopped contrast prints what it ran (bot/rerun/contrast.py): partial, and said so
    ran = "ran" if data and not data.get("stopped") else (f"stopped ({data['stopped']})" if data else None)
    return {"exit": rc, "seconds": round(seconds, 1), "contrast": ran or ("timed out" if rc is None else f"exit {rc}"),
            "changes": len(changes), "runs": (data or {}).get("runs"),
            "passing": [c["change"] for c in changes if (c.get("verdict") or {}).get("kind") == VERDICT_PASS],
            "verdict": entry["verdict"], "kind": (kind or {}).get("kind"), "reason": (kind or {}).get("reason"),
            "kind_without_runs": (bare_kind or {}).get("kind"),
            "issue_in_kind_train": (entry["repo"], entry["number"]) in kind_training_issues()}


STAGE_FUNCS = {"reduce": stage_reduce, "route": stage_route, "dedup": stage_dedup, "versions": stage_versions,
               "contrast": stage_contrast}


# ---- figures and tables --------------------------------------------------------------------------
def _share(hits: int, n: int) -> str:
    return f"{hits}/{n} ({hits / n:.0%})" if n else "—"


def usage_pr(rows: list[tuple[str, str | None]]) -> tuple[int, int, int]:
    """(true positives, predicted usage, actual usage) over (verdict, predicted kind) pairs."""
    tp = sum(1 for v, k in rows if v == "usage" and k == "usage")
    return tp, sum(1 for _, k in rows if k == "usage"), sum(1 for v, _ in rows if v == "usage")


def _pr_text(rows: list[tuple[str, str | None]]) -> str:
    tp, pred, actual = usage_pr(rows)
    p = f"{tp / pred:.2f}" if pred else "—"
    r = f"{tp / actual:.2f}" if actual else "—"
    return f"P {p} ({tp}/{pred}), R {r} ({tp}/{actual}), n={len(rows)}"


def figures(ctx: Ctx, names: list[str]) -> dict:
    """The goals' figures for these entries, from their rows."""
    rows = {n: {s: read_row(ctx, n, s) for s in STAGES} for n in names}
    out: dict = {"entries": len(names)}
    red = [(n, r["reduce"]) for n, r in rows.items() if r["reduce"] and "error" not in r["reduce"]]
    posted = [(n, r) for n, r in red if r.get("posted") is not None]
    out["reduce"] = {"rows": len(red), "same_signature": sum(1 for _, r in red if r.get("same_signature")),
                     "within_posted": _share(sum(1 for _, r in posted if r["within_posted"]), len(posted)),
                     "larger_than_posted": [f"{n} ({r['statements_after']} > {r['posted']})" for n, r in posted
                                            if not r["within_posted"]],
                     "seconds": round(sum(r.get("seconds") or 0 for _, r in red), 1)}
    rt = [(n, r["route"]) for n, r in rows.items() if r["route"] and "error" not in r["route"]]
    out["route"] = {"ok": _share(sum(1 for _, r in rt if r["ok"]), len(rt)),
                    "ok_without_index": _share(sum(1 for _, r in rt if r["ok_without_index"]), len(rt)),
                    "misses": [f"{n} ({r['picked']} for {r['expected']})" for n, r in rt if not r["ok"]]}
    dd = [(n, r["dedup"]) for n, r in rows.items() if r["dedup"] and "error" not in r["dedup"] and r["dedup"]["duplicates"]]
    out["dedup"] = {"with_duplicates": len(dd), "found": _share(sum(1 for _, r in dd if r["found"]), len(dd)),
                    "not_in_index": [f"{n} #{d['number']}" for n, r in dd for d in r["duplicates"] if not d["in_index"]]}
    vs = [(n, r["versions"]) for n, r in rows.items() if r["versions"] and "error" not in r["versions"]]
    fixed = [(n, r) for n, r in vs if r.get("mode") == "bisect"]
    still = [(n, r) for n, r in vs if r.get("mode") == "latest" and r.get("expected")]
    out["versions"] = {"fixed_named": _share(sum(1 for _, r in fixed if r["ok"]), len(fixed)),
                       "fixed_misses": [f"{n} ({r.get('found')} for {r['expected']})" for n, r in fixed if not r["ok"]],
                       "open_still_fails": _share(sum(1 for _, r in still if r["ok"]), len(still))}
    kd = [(n, r["contrast"]) for n, r in rows.items() if r["contrast"] and "error" not in r["contrast"]]
    clean = [(n, r) for n, r in kd if not r["issue_in_kind_train"]]
    out["kind"] = {"with_runs": _pr_text([(r["verdict"], r["kind"]) for _, r in kd]),
                   "without_runs": _pr_text([(r["verdict"], r["kind_without_runs"]) for _, r in kd]),
                   "with_runs_not_in_kind_train": _pr_text([(r["verdict"], r["kind"]) for _, r in clean]),
                   "in_kind_train": [n for n, r in kd if r["issue_in_kind_train"]],
                   "wrong": [f"{n} ({r['kind']} for {r['verdict']})" for n, r in kd if r["kind"] != r["verdict"]]}
    out["errors"] = [f"{n} {s}: {r['error']}" for n, rr in rows.items() for s, r in rr.items() if r and "error" in r]
    return out


COLUMNS = {
    "reduce": (("status", "status"), ("stmts", lambda r: f"{r.get('statements_before')}→{r.get('statements_after')}"),
               ("posted", lambda r: r.get("posted")), ("≤posted", "within_posted"), ("runs", "runs"),
               ("s", "seconds"), ("verified", "verified"), ("same sig", "same_signature")),
    "route": (("expected", "expected"), ("picked", "picked"), ("ok", "ok"), ("no index", "picked_without_index"),
              ("ok", "ok_without_index"), ("own issue indexed", "own_issue_indexed")),
    "dedup": (("duplicates", lambda r: ",".join(f"#{d['number']}" for d in r["duplicates"]) or "—"),
              ("found top5", "found"), ("dup in index", lambda r: ",".join(str(d["in_index"]) for d in r["duplicates"]) or "—"),
              ("own in top5", "own_issue_in_top5"), ("top5", lambda r: " ".join(r["top5"]))),
    "versions": (("mode", "mode"), ("pkg", "package"), ("expected", "expected"),
                 ("found", lambda r: r.get("found") if r.get("mode") == "bisect" else r.get("latest_verdict")),
                 ("ok", "ok"), ("runs", "runs"), ("s", "seconds")),
    "contrast": (("verdict", "verdict"), ("kind", "kind"), ("no runs", "kind_without_runs"),
                 ("passing changes", lambda r: len(r.get("passing") or [])), ("changes", "changes"),
                 ("in kind train", "issue_in_kind_train"), ("s", "seconds")),
}


def _cell(row: dict, how) -> str:
    value = how(row) if callable(how) else row.get(how)
    return "—" if value is None else str(value)


def table(ctx: Ctx, stage: str, names: list[str], markdown: bool = False) -> str:
    head = ["entry", *[c for c, _ in COLUMNS[stage]]]
    body = []
    for n in names:
        row = read_row(ctx, n, stage)
        if row is None:
            continue
        if "error" in row:
            body.append([n, f"error: {row['error']}"] + [""] * (len(head) - 2))
        else:
            body.append([n, *[_cell(row, how) for _, how in COLUMNS[stage]]])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in body])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w)[:60] for c, w in zip(r, widths)).rstrip() for r in [head, *body])


def report(ctx: Ctx, names: list[str], footer: str, markdown: bool = False) -> tuple[str, dict]:
    # fresh, fresh2: the parts held out as a whole (catalog.py), each reported apart like the other two
    parts = {p: [n for n in names if catalog.part_of(n) == p] for p in ("heldout", "train", *catalog.CHOSEN)}
    figs = {p: figures(ctx, ns) for p, ns in parts.items() if ns}
    lines = []
    for stage in STAGES:
        for part, ns in parts.items():
            text = table(ctx, stage, ns, markdown)
            if text.count("\n") >= (2 if markdown else 1):
                lines += [f"\n{'### ' if markdown else '== '}{stage} — {part}", text]
    for part, f in figs.items():
        lines.append(f"\n{'### ' if markdown else '== '}figures — {part} ({f['entries']} entries)")
        for key in ("reduce", "route", "dedup", "versions", "kind"):
            lines.append(f"{'- ' if markdown else ''}{key}: " + "; ".join(f"{k} {v}" for k, v in f[key].items()))
        if f["errors"]:
            lines.append(f"{'- ' if markdown else ''}errors: " + "; ".join(f["errors"]))
    lines.append("\n" + footer)
    return "\n".join(lines).lstrip("\n"), figs


# ---- the command ---------------------------------------------------------------------------------
def parse_stages(text: str) -> list[str]:
    asked = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in asked if s not in STAGES]
    if bad or not asked:
        raise ValueError(f"--stages {text!r}: choose from {','.join(STAGES)}")
    return [s for s in STAGES if s in asked]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("names", nargs="*", help="entry folder names (default: all)")
    ap.add_argument("--part", choices=list(catalog.PART_FILES),
                    help="only the entries of this part: the hash rule's (heldout, train) or one held out as a whole "
                         f"({', '.join(catalog.CHOSEN)})")
    ap.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, from {','.join(STAGES)} (default: all)")
    ap.add_argument("--from", dest="source", metavar="DIR", help="start from an earlier run's folders (copied into --out)")
    ap.add_argument("--out", help="results folder (default: bench/realbugs/results/<date>/)")
    ap.add_argument("--max-time", type=float, default=120.0,
                    help="seconds of search per entry: reduce's --max-time is this plus one run of the original, timed "
                         "first, per run reduce makes of it before searching (--runs, and the traced run unless "
                         "--no-trace: three by default) (default: 120)")
    ap.add_argument("--runs", type=int, default=None, help="reduce's --runs (default: reduce's own)")
    ap.add_argument("--no-trace", action="store_true", help="reduce's --no-trace (a smoke run's speed)")
    ap.add_argument("--stage-timeout", type=float, default=1800.0,
                    help="seconds one reprobot command may take before it is stopped (default: 1800)")
    ap.add_argument("--offline", action="store_true", help="never download: only wheels already cached")
    ap.add_argument("--json", action="store_true", help="print one JSON object (rows and figures) instead of tables")
    ap.add_argument("--report", action="store_true",
                    help="run nothing: the tables and figures of the rows already in --out (or --from)")
    args = ap.parse_args(argv)
    try:
        names = catalog.select(args.names, args.part)
        stages = parse_stages(args.stages)
        if args.max_time <= 0 or args.stage_timeout <= 0 or (args.runs is not None and args.runs < 1):
            raise ValueError("--max-time, --stage-timeout and --runs must be positive")
        source = Path(args.source) if args.source else None
        if source is not None and not source.is_dir():
            raise ValueError(f"--from {args.source}: no such folder")
    except ValueError as e:
        print(f"run: {e}", file=sys.stderr)
        return ExitCode.USAGE
    out = Path(args.out) if args.out else source if args.report and source else RESULTS / datetime.date.today().isoformat()
    if args.report:
        stages = []
    out.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(out.resolve(), offline=args.offline, max_time=args.max_time, stage_timeout=args.stage_timeout,
              runs=args.runs, trace=not args.no_trace)
    use_private_uv()
    started, load_start = time.monotonic(), os.getloadavg()[0]
    for name in names:
        entry = catalog.load(name)
        folder = folder_of(ctx, name)
        if source is not None and (source / name).is_dir() and source.resolve() != ctx.out and not folder.exists():
            shutil.copytree(source / name, folder)
        for stage in stages:
            t0 = time.monotonic()
            try:
                ctx.environment(name)
                row = STAGE_FUNCS[stage](ctx, name, entry)
            except (StageError, NotInstallable) as e:
                row = {"error": str(e)[:300], "seconds": round(time.monotonic() - t0, 1)}
            write_row(ctx, name, stage, row)
            if not args.json:
                print(f"{name:<22} {stage:<9} {time.monotonic() - t0:7.1f}s  "
                      + (f"error: {row['error']}" if "error" in row else
                         " ".join(f"{c}={_cell(row, h)}" for c, h in COLUMNS[stage][:5])), flush=True)
    wall = time.monotonic() - started
    load = (load_start, os.getloadavg()[0])
    if args.report:
        # the stages' own seconds, as their rows recorded them (they may come from several runs)
        spent = sum((read_row(ctx, n, s) or {}).get("seconds") or 0 for n in names for s in STAGES)
        text, figs = report(ctx, names, f"stage time in the rows, summed: {spent:.0f} s")
        print(json.dumps({"figures": figs}) if args.json else text)
        return ExitCode.OK
    footer = f"wall time {wall:.0f} s; load average at start {load[0]:.2f}, at end {load[1]:.2f} ({os.cpu_count()} cores)"
    text, figs = report(ctx, names, footer)
    md, _ = report(ctx, names, footer, markdown=True)
    summary = {"out": str(ctx.out), "stages": stages, "max_time": args.max_time, "wall_seconds": round(wall, 1),
               "load_average": {"start": load[0], "end": load[1]}, "cores": os.cpu_count(),
               "figures": figs, "rows": {n: {s: read_row(ctx, n, s) for s in STAGES} for n in names}}
    (ctx.out / "results.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (ctx.out / "summary.md").write_text(md + "\n", encoding="utf-8")
    print(json.dumps(summary) if args.json else text)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
