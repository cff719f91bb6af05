"""The seam for slots on other hosts (reducer/run/slots.py): the local Runner and Zygote are what the
protocols describe, and a runner that lives in another process — standing in for an actor on
another machine, reached through a pipe — reduces a real script through the same oracle and search,
with no change to either, to the same result as the local runner. Real subprocesses throughout."""
from __future__ import annotations

import multiprocessing as mp
import textwrap
import threading
from pathlib import Path

from reducer.failure.oracle import Oracle
from reducer.failure.outcome import Outcome
from reducer.failure.signature import MatchOptions, signature_of
from reducer.run.runner import Runner, RunSpec
from reducer.run.slots import CandidateRunner, WarmSlot
from reducer.run.zygote import Zygote
from reducer.search.driver import Reducer

SCRIPT = textwrap.dedent("""
    import json
    import os

    settings = {"retries": 3, "verbose": False}
    name = os.path.basename("/srv/jobs/job.json")
    print("loading", name, settings)
    payload = "{'id': 7}"
    total = sum(range(10))
    job = json.loads(payload)
    print(job, total)
    """)


def _host(conn, script: str) -> None:
    """The other host: its own Runner; one request per candidate, an Outcome back."""
    runner = Runner(RunSpec(script=Path(script)))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        source, kwargs = msg
        conn.send(runner.run(source, **kwargs))


class RemoteRunner:
    """A CandidateRunner whose runs happen in another process. ``stop_when`` is a callable of this
    process and is not sent (the protocol lets a remote runner ignore it)."""

    def __init__(self, script: Path) -> None:
        self.spec = RunSpec(script=script)
        ctx = mp.get_context("spawn")
        self._conn, theirs = ctx.Pipe()
        self._proc = ctx.Process(target=_host, args=(theirs, str(script)), daemon=True)
        self._proc.start()
        self.calls = 0
        self._lock = threading.Lock()

    def run(self, source: str, *, timeout=None, extra_env=None, stop_when=None, max_rss=None,
            stop_grace=2.0, warm=None) -> Outcome:
        with self._lock:        # one pipe: one request at a time (a pool of hosts would have many)
            self.calls += 1
            self._conn.send((source, {"timeout": timeout, "extra_env": extra_env, "max_rss": max_rss}))
            return self._conn.recv()

    def close(self) -> None:
        self._conn.send(None)
        self._proc.join(timeout=10)


def test_the_local_runner_and_zygote_are_what_the_protocols_describe(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    assert isinstance(Runner(RunSpec(script=script)), CandidateRunner)
    assert isinstance(Zygote("python3", [], {}), WarmSlot)


def test_a_runner_in_another_process_reduces_through_the_same_oracle_and_search(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    local = Runner(RunSpec(script=script))
    original = local.run(SCRIPT)
    target = signature_of(original.tracebacks[-1], MatchOptions())
    remote = RemoteRunner(script)
    try:
        assert remote.run(SCRIPT).tracebacks[-1].message == original.tracebacks[-1].message
        results = []
        for runner in (local, remote):
            oracle = Oracle(runner, target, MatchOptions())
            results.append(Reducer(SCRIPT, oracle, jobs=2).run().best_source)
        assert remote.calls > 5          # the candidates really ran over there
    finally:
        remote.close()
    assert results[0] == results[1]
    assert "json.loads" in results[1] and "settings" not in results[1]
