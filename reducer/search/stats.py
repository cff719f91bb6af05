"""What the search counts (reduction.json's figures), and the pass those counts go to now.

The gate, the scheduler and the loop each add to these; none of them owns them, so they live
below all three.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class PassStats:
    proposed: int = 0       # candidates offered to the gate
    tried: int = 0          # candidates actually run (oracle calls)
    accepted: int = 0
    cache_hits: int = 0     # answered from the seen-set without a run
    not_smaller: int = 0    # refused by the size order
    invalid: int = 0        # did not parse / compile
    unbound: int = 0        # would read a name nothing binds any more (a sure NameError)
    secret: int = 0         # would spell a secret of the environment the best does not
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)   # a pass that crashed (a bug), kept going

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 3)
        return d


@dataclass
class ReductionStats:
    status: str = "running"         # running | done | interrupted | timeout
    passes: dict[str, PassStats] = field(default_factory=dict)
    runs: int = 0                   # oracle calls, speculative ones included
    speculative_unused: int = 0     # runs made ahead whose verdict was never needed
    cache_hits: int = 0
    accepted: int = 0
    rounds: int = 0
    first_cut_done: bool = False
    # Where the search is (phase, pass within it), so --resume continues there.
    level: int = 0
    pass_index: int = 0
    size_before: dict[str, int] = field(default_factory=dict)
    size_after: dict[str, int] = field(default_factory=dict)
    statements_before: int = 0
    statements_after: int = 0
    wall_time: float = 0.0
    # CPU time of reprobot's own process (passes, the gate, reading outputs), candidates excluded:
    # what has to stay small per candidate on a long script.
    reducer_cpu: float = 0.0
    proposed: int = 0               # candidates offered by the passes, run or not
    retraces: int = 0               # traced runs of a changed best (fresh recorded values)
    speculated: int = 0             # runs made on idle slots ahead of need (the next pass, the next probes)
    cancelled: int = 0              # runs made ahead, stopped once a new best made them useless
    # The heavier level (reducer/passes/heavy.py): rounds run after an early fixpoint, the ones
    # that gained something, and why it was not run (or stopped) when it was not.
    heavy_rounds: int = 0
    heavy_gains: int = 0
    heavy_skipped: str = ""

    def for_pass(self, name: str) -> PassStats:
        return self.passes.setdefault(name, PassStats())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passes"] = {k: v.to_dict() for k, v in self.passes.items()}
        d["wall_time"] = round(self.wall_time, 3)
        d["reducer_cpu"] = round(self.reducer_cpu, 3)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReductionStats:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "passes"}
        stats = cls(**known)
        for name, p in (d.get("passes") or {}).items():
            stats.passes[name] = PassStats(**{k: v for k, v in p.items() if k in PassStats.__dataclass_fields__})
        return stats


@dataclass
class Tally:
    """The figures, and the pass whose candidates are being counted (set by the loop; the judge
    and the scheduler count proposals, refusals and runs for it)."""
    stats: ReductionStats
    pass_name: str = "setup"

    def here(self) -> PassStats:
        return self.stats.for_pass(self.pass_name)
