# reprobot corpus: dataclass_pipeline
# Exercises: a pipeline of annotated dataclasses (frozen and not), a Generic stage class over a
#   TypeVar, Protocol and type aliases used only in annotations, stages chained with
#   functools.reduce, a summary stage whose config carries the failing value.
# Expected failure: statistics.StatisticsError: n must be at least 1
#   raised by `statistics.quantiles(...)` in summarise
#   (line 72, marked FAILING LINE).
# Ideal result (2 statements):
#   import statistics
#   statistics.quantiles([120.0, 80.0, 95.5], n=0)
from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, field, replace
from typing import Callable, Generic, Iterable, Protocol, TypeVar

T = TypeVar("T")
U = TypeVar("U")
Number = float
Rows = list["Row"]


@dataclass(frozen=True)
class Row:
    name: str
    latency_ms: Number
    ok: bool = True


@dataclass
class SummaryConfig:
    buckets: int = 4
    drop_failed: bool = True
    label: str = "latency"


@dataclass
class Summary:
    label: str
    cuts: list[Number] = field(default_factory=list)
    count: int = 0


class HasName(Protocol):
    name: str


@dataclass
class Stage(Generic[T, U]):
    name: str
    fn: Callable[[T], U]

    def __call__(self, value: T) -> U:
        return self.fn(value)


def parse(lines: Iterable[str]) -> Rows:
    rows: Rows = []
    for line in lines:
        name, ms, status = line.split(",")
        rows.append(Row(name, float(ms), status == "ok"))
    return rows


def drop_failed(rows: Rows) -> Rows:
    return [r for r in rows if r.ok]


def summarise(rows: Rows, config: SummaryConfig) -> Summary:
    values: list[Number] = [r.latency_ms for r in rows]
    cuts = statistics.quantiles(values, n=config.buckets)  # FAILING LINE: buckets is 0
    return Summary(config.label, cuts, len(values))


def names(items: Iterable[HasName]) -> list[str]:
    return sorted(i.name for i in items)


def build_config(overrides: dict[str, object]) -> SummaryConfig:
    base = SummaryConfig()
    return replace(base, **overrides)


def compose(*stages: Stage) -> Callable[[object], object]:
    return lambda value: functools.reduce(lambda acc, stage: stage(acc), stages, value)


RAW = ["a,120.0,ok", "b,80.0,ok", "c,300.0,fail", "d,95.5,ok"]


def main() -> None:
    config: SummaryConfig = build_config({"buckets": 0, "label": "p-latency"})
    pipeline = compose(
        Stage("parse", parse),
        Stage("drop", drop_failed if config.drop_failed else (lambda rows: rows)),
        Stage("summarise", functools.partial(summarise, config=config)),
    )
    summary: Summary = pipeline(RAW)  # type: ignore[assignment]
    print(summary.label, summary.cuts, summary.count)
    print(names([Row("z", 1.0), Row("y", 2.0)]))


if __name__ == "__main__":
    main()
