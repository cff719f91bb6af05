"""Which repro.py the reduction verified: its sha256, recorded in reduction.json (issue #39).

`reduce` records the digest once the result has failed the same way cold (and alone, offline,
where it could be made to): ``reduction.json["repro_sha256"]``. Every save of a step in
progress rewrites reduction.json without it, so a folder holds a digest only for a repro.py
that was verified, and an interrupted or unverified reduction holds none.

`file --submit` compares repro.py with it before anything else: a repro.py replaced or edited
after the reduction would otherwise be filed under the old signature and traceback, "reduced
automatically … every kept step was re-run". A folder without a digest (written by an earlier
reprobot, or a reduction that stopped before its check) is refused the same way; `reduce
--resume` verifies it again, ``--unverified`` files it as it is (still re-run first).

What the digest is not: a signature. Whoever can rewrite repro.py can rewrite reduction.json;
it catches a repro changed after the fact, by a person, an editor or a tool. The re-run that
`file --submit` makes before sending (bot/rerun/recheck.py) is what shows the code fails as
recorded, on this machine.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from bot.store import ReproDir, write_json_atomic
from reducer.errors import ReprobotError

DIGEST_KEY = "repro_sha256"

State = Literal["verified", "changed", "unrecorded", "missing"]


def digest(source: str) -> str:
    """sha256 of the script as repro.py stores it (UTF-8, newlines as written)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def record_verified(repro: ReproDir, source: str) -> None:
    """After the cold check: ``source`` is repro.py as verified."""
    try:
        data = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
    except ReprobotError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    write_json_atomic(repro.reduction_json, {**data, DIGEST_KEY: digest(source)})


@dataclass(frozen=True)
class Verification:
    state: State
    recorded: str | None = None
    actual: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "verified"


def verification(repro: ReproDir) -> Verification:
    """repro.py against the digest its reduction recorded."""
    if not repro.repro.is_file():
        return Verification("missing")
    actual = hashlib.sha256(repro.repro.read_bytes()).hexdigest()
    try:
        data = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
    except ReprobotError:
        data = {}
    recorded = data.get(DIGEST_KEY) if isinstance(data, dict) else None
    if not isinstance(recorded, str) or len(recorded) != 64:
        return Verification("unrecorded", None, actual)
    return Verification("verified" if recorded == actual else "changed", recorded, actual)
