"""Does each entry still fail the way its entry.json says, on the releases it was reported on?

    python bench/realbugs/check.py [NAME ...] [--part heldout|train|fresh|fresh2|fresh3|fresh4|fresh5|fresh6|fresh7|fresh8|fresh9] [--releases PKG=V1,V2,...]
                                   [--offline] [--timeout S] [--json] [--record [--held-part NAME]]

For each entry: build its environment (bench/realbugs/envs.py), run its script there with the
Hub offline, read the failure with reprobot's own machinery (the Runner, `distinct_failures`,
`find_match`: the same oracle `reduce` uses) and print one row: `same` when a failure with the
entry's signature is among the run's failures, `differs` (with the failure seen), `passes`, or
`not installable` (with why).

With `--releases PKG=V1,V2,...` each entry's script runs once per listed release of PKG, the
rest of its pins as reported (its extra pins may move to fit; `--with PKG=V` replaces another
reported release in every row, for a release that needs it), and each row says `fails` (the
entry's signature), `fails otherwise`, `passes` or `not installable`: this is how an entry's
`first_passing_release` is found. `--json` prints one JSON object per row (the observed
signature in entry.json's shape, and the pins the overlay installed) for writing entries.
`--record` is for writing one: an entry whose entry.json has no signature yet gets the signature
this run shows and, as its `extra_pins`, what the overlay installed beyond `reported_on`; it is
then added to its part's list (bench/realbugs/catalog.py): the hash rule's part, or with
`--held-part NAME` one of the parts held out as a whole (catalog.CHOSEN: fresh, fresh2, fresh3, fresh4, fresh5, fresh6, fresh7, fresh8, fresh9;
`NAME.json`, which the hash rule does not decide). `--fresh` and `--fresh2` are the older
spellings of `--held-part fresh` and `--held-part fresh2`.
Exit 0 when every row ran; 1 when an entry's signature was not seen on its reported releases.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import catalog  # noqa: E402
import envs  # noqa: E402

from bot.rerun.environments import NotInstallable  # noqa: E402
from reducer.errors import ExitCode  # noqa: E402
from reducer.failure.signature import MatchOptions, Signature, distinct_failures, find_match  # noqa: E402
from reducer.run.runner import Runner, RunSpec  # noqa: E402

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "WANDB_DISABLED": "true", "WANDB_MODE": "disabled"}


def target_of(entry: dict) -> tuple[Signature, MatchOptions]:
    sig = entry["signature"]
    frames = tuple(sig.get("frames") or ())
    return Signature(sig["exception"], sig.get("message"), frames), MatchOptions(frames=len(frames))


def as_entry_signature(sig: Signature) -> dict:
    return {"exception": sig.exc_type, "message": sig.message, "frames": list(sig.frames)}


@dataclass
class Row:
    name: str
    release: str | None        # None: the reported releases
    # same | differs | passes | not installable | unrecorded; with --releases: fails | fails otherwise | ...
    status: str
    observed: dict | None = None
    pins: dict = field(default_factory=dict)
    why: str = ""
    seconds: float = 0.0


def run_entry(name: str, swap: tuple[str, str] | None, online: bool, timeout: float,
              also: dict[str, str] | None = None) -> Row:
    entry = catalog.load(name)
    started = time.monotonic()
    release = " ".join(f"{k}=={v}" for k, v in [swap, *(also or {}).items()]) if swap else None
    hard, soft = envs.entry_pins(entry, swap, also)
    try:
        env = envs.build(hard, soft, online=online)
    except NotInstallable as e:
        return Row(name, release, "not installable", why=str(e), seconds=time.monotonic() - started)
    script = catalog.script_of(name)
    runner = Runner(RunSpec(script=script, python=envs.BASE_PYTHON, timeout=timeout,
                            env={**env.env(), **OFFLINE_ENV}))
    outcome = runner.run(script.read_text(encoding="utf-8"))
    failures = distinct_failures(outcome, MatchOptions())
    observed = as_entry_signature(failures[0][0]) if failures else None
    if not (entry.get("signature") or {}).get("exception"):
        # an entry being written: its signature is what this run shows
        return Row(name, release, "unrecorded", observed, env.pins, seconds=time.monotonic() - started)
    target, options = target_of(entry)
    hit = find_match(outcome.tracebacks, target, options) is not None
    if hit:
        status = "fails" if swap else "same"
    elif failures or outcome.returncode not in (0, None):
        status = "fails otherwise" if swap else "differs"
        if not failures:
            observed = {"exception": f"exit {outcome.returncode}", "message": None, "frames": []}
    else:
        status = "passes"
    return Row(name, release, status, observed, env.pins, seconds=time.monotonic() - started)


def record(name: str, row: Row, part: str | None = None) -> None:
    """Write what this run showed into an entry that is being written; `part`: see catalog.register."""
    path = catalog.ENTRIES / name / "entry.json"
    entry = json.loads(path.read_text(encoding="utf-8"))
    reported = {envs.canonicalize_name(k) for k in entry.get("reported_on") or {}}
    entry["signature"] = row.observed
    entry["extra_pins"] = {**{k: v for k, v in row.pins.items() if envs.canonicalize_name(k) not in reported},
                           **(entry.get("extra_pins") or {})}
    path.write_text(json.dumps(entry, indent=2) + "\n", encoding="utf-8")
    catalog.register(name, part)


def _line(row: Row) -> str:
    head = f"{row.name:<28} {row.release or 'reported':<22} {row.status:<16} {row.seconds:6.1f}s"
    if row.status in ("differs", "fails otherwise", "unrecorded") and row.observed:
        o = row.observed
        head += f"  {o['exception']}: {(o['message'] or '')[:90]}"
    elif row.why:
        head += f"  {row.why[:140]}"
    return head


class HeldPart(argparse.Action):
    """`--held-part NAME`, or an alias that names its part itself (`--fresh`: const "fresh"); keeps
    the flag as it was written, for the error that names it."""

    def __call__(self, parser, namespace, values, option_string=None):
        part = self.const if self.const is not None else values
        namespace.held_part = part
        namespace.held_flag = option_string if self.const is not None else f"{option_string} {part}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="entry folder names (default: all)")
    ap.add_argument("--part", choices=sorted(catalog.PART_FILES), help="only the entries of this part")
    ap.add_argument("--releases", help="PKG=V1,V2,...: run on each listed release of PKG")
    ap.add_argument("--with", dest="also", action="append", default=[], metavar="PKG=V",
                    help="with --releases: also replace this reported release in every row")
    ap.add_argument("--offline", action="store_true", help="never download: only wheels already cached")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one script run may take")
    ap.add_argument("--json", action="store_true", help="one JSON object per row")
    ap.add_argument("--record", action="store_true",
                    help="write the observed signature and extra pins into entries that have none")
    chosen = ap.add_mutually_exclusive_group()
    chosen.add_argument("--held-part", dest="held_part", action=HeldPart, choices=catalog.CHOSEN, metavar="NAME",
                        help="with --record: add the entries to this part held out as a whole "
                             f"({', '.join(catalog.CHOSEN)}), not the hash rule's part")
    for alias in ("fresh", "fresh2"):     # the older flags, kept so earlier commands still run
        chosen.add_argument(f"--{alias}", dest="held_part", action=HeldPart, nargs=0, const=alias,
                            help=f"with --record: the same as --held-part {alias}")
    args = ap.parse_args(argv)
    try:
        names = catalog.select(args.names, args.part)
        swaps = [None]
        if args.releases:
            pkg, versions = envs.parse_release_list(args.releases)
            swaps = [(pkg, v) for v in versions]
        also = {}
        for text in args.also:
            other, found = envs.parse_release_list(text)
            if len(found) != 1 or not args.releases:
                raise ValueError(f"--with {text!r}: one PKG=V, and only beside --releases")
            also[other] = found[0]
        if args.held_part and not args.record:
            raise ValueError(f"{args.held_flag} only beside --record")
    except ValueError as e:
        print(f"check: {e}", file=sys.stderr)
        return ExitCode.USAGE
    bad = 0
    for name in names:
        for swap in swaps:
            row = run_entry(name, swap, online=not args.offline, timeout=args.timeout, also=also)
            if args.record and swap is None and row.status == "unrecorded" and row.observed:
                try:
                    record(name, row, args.held_part)
                except ValueError as e:      # already in a hash part: it cannot become fresh
                    print(f"check: {e}", file=sys.stderr)
                    return ExitCode.USAGE
            bad += swap is None and row.status != "same"
            print(json.dumps(asdict(row)) if args.json else _line(row), flush=True)
    return ExitCode.DIFFERENT if bad else ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
