# reprobot corpus: async_service
# Exercises: an asyncio service run by asyncio.run(main()): tasks gathered from coroutines, an
#   asyncio.Queue between a producer and consumers, an async context manager for the session,
#   asyncio.sleep for pacing, and metrics computed in a coroutine from the samples collected.
# Expected failure: statistics.StatisticsError: harmonic mean does not support negative values
#   raised by `statistics.harmonic_mean(...)` in Metrics.throughput
#   (line 56, marked FAILING LINE).
# Ideal result (2 statements):
#   import statistics
#   statistics.harmonic_mean([12.5, 8.0, -3.0])
from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

SAMPLES = [("a", 12.5), ("b", 8.0), ("c", -3.0)]
CONSUMERS = 2


@dataclass
class Sample:
    source: str
    rate: float
    at: float = field(default_factory=time.monotonic)


class Session:
    def __init__(self, name: str) -> None:
        self.name = name
        self.open = False

    async def __aenter__(self) -> "Session":
        await asyncio.sleep(0)
        self.open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.open = False

    async def fetch(self, source: str, rate: float) -> Sample:
        await asyncio.sleep(0.001)
        return Sample(source, rate)


class Metrics:
    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)

    async def throughput(self) -> float:
        rates = [s.rate for s in sorted(self.samples, key=lambda s: s.source)]
        return statistics.harmonic_mean(rates)  # FAILING LINE: a negative rate from source c

    def sources(self) -> list[str]:
        return sorted({s.source for s in self.samples})


async def producer(queue: asyncio.Queue, session: Session) -> None:
    for source, rate in SAMPLES:
        await queue.put(await session.fetch(source, rate))
    for _ in range(CONSUMERS):
        await queue.put(None)


async def consumer(queue: asyncio.Queue, metrics: Metrics) -> int:
    seen = 0
    while True:
        item = await queue.get()
        if item is None:
            return seen
        metrics.add(item)
        seen += 1


async def heartbeat(n: int) -> int:
    for _ in range(n):
        await asyncio.sleep(0)
    return n


async def main() -> None:
    metrics = Metrics()
    queue: asyncio.Queue = asyncio.Queue()
    async with Session("svc") as session:
        counts = await asyncio.gather(producer(queue, session),
                                      *(consumer(queue, metrics) for _ in range(CONSUMERS)),
                                      heartbeat(3))
    print("consumed", counts[1:CONSUMERS + 1], "from", metrics.sources())
    print("throughput", await metrics.throughput())


if __name__ == "__main__":
    asyncio.run(main())
