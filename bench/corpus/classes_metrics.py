# reprobot corpus: classes_metrics
# Exercises: classes — data-only classes (a plain attribute holder and a dataclass), a base
#   class with a subclass overriding a method, properties, a class-level registry; methods
#   called once; a filter threshold carried by a config object to the failing call.
# Expected failure: statistics.StatisticsError: mean requires at least one data point
#   raised by `statistics.mean(values)` in LatencyReport.mean_latency (line 73, marked FAILING LINE):
#   the threshold filters out every sample.
# Ideal result (2 statements): import statistics; statistics.mean([])
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field


class Thresholds:
    """Data only: the limits a report applies."""

    def __init__(self):
        self.min_latency_ms = 250.0
        self.max_latency_ms = 10_000.0
        self.percentile = 95


@dataclass
class Sample:
    endpoint: str
    latency_ms: float
    status: int = 200


@dataclass
class RunInfo:
    name: str
    seed: int = 7
    n_samples: int = 40
    endpoints: list[str] = field(default_factory=lambda: ["/generate", "/embed", "/health"])


class Report:
    registry: dict[str, type[Report]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Report.registry[cls.__name__.lower()] = cls

    def __init__(self, samples: list[Sample], limits: Thresholds):
        self.samples = samples
        self.limits = limits

    @property
    def ok_samples(self) -> list[Sample]:
        return [s for s in self.samples if s.status < 400]

    def render(self) -> str:
        raise NotImplementedError


class ErrorReport(Report):
    def render(self) -> str:
        errors = len(self.samples) - len(self.ok_samples)
        return f"errors: {errors}/{len(self.samples)}"


class LatencyReport(Report):
    def slow(self) -> list[float]:
        lo, hi = self.limits.min_latency_ms, self.limits.max_latency_ms
        return [s.latency_ms for s in self.ok_samples if lo <= s.latency_ms <= hi]

    def mean_latency(self) -> float:
        values = self.slow()
        return statistics.mean(values)  # FAILING LINE: no sample is slower than 250 ms

    def percentile(self) -> float:
        values = sorted(self.slow())
        k = max(0, math.ceil(self.limits.percentile / 100 * len(values)) - 1)
        return values[k]

    def render(self) -> str:
        return f"slow requests: mean {self.mean_latency():.1f} ms, p{self.limits.percentile} {self.percentile():.1f} ms"


def simulate(info: RunInfo) -> list[Sample]:
    rng = random.Random(info.seed)
    samples = []
    for i in range(info.n_samples):
        endpoint = info.endpoints[i % len(info.endpoints)]
        latency = rng.uniform(5.0, 120.0)
        status = 500 if rng.random() < 0.05 else 200
        samples.append(Sample(endpoint, latency, status))
    return samples


def by_endpoint(samples: list[Sample]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.endpoint] = counts.get(s.endpoint, 0) + 1
    return counts


def main() -> None:
    info = RunInfo("nightly")
    samples = simulate(info)
    print("samples per endpoint:", by_endpoint(samples))
    limits = Thresholds()
    for name in ("errorreport", "latencyreport"):
        report = Report.registry[name](samples, limits)
        print(report.render())
    print("done")


main()
