# reprobot corpus: mp_child_failure
# Exercises: multiprocessing with the "spawn" start method (what CUDA code must use): the
#   failure happens in a CHILD process, whose traceback goes to the inherited stderr; the
#   parent only sees a non-zero exitcode, logs it and exits 1 without a traceback of its own.
#   Also: shard planning helpers, a result directory, a summary nobody needs.
# Expected failure: ValueError: '10.0.300.7' does not appear to be an IPv4 or IPv6 address
#   raised by `ipaddress.ip_address(host)` in parse_endpoint (line 41, marked FAILING LINE), in the child
#   that gets shard 1. Library frames: ipaddress.py:ip_address < multiprocessing/process.py:run
#   < multiprocessing/process.py:_bootstrap, so the repro must keep a child process.
# Ideal result (about 6 statements):
#   import ipaddress, multiprocessing
#   def work(): ipaddress.ip_address('10.0.300.7')
#   if __name__ == '__main__': multiprocessing.get_context('spawn').Process(target=work).start()
from __future__ import annotations

import ipaddress
import json
import logging
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path

log = logging.getLogger("mp-probe")

N_WORKERS = 2
PORT_DEFAULT = 8080
INVENTORY = [
    "10.0.0.1:8080",
    "10.0.0.2",
    "10.0.1.17:9000",
    "10.0.300.7:8080",
    "192.168.1.20",
    "192.168.1.21:7000",
]


def parse_endpoint(entry: str) -> tuple[str, int]:
    host, _, port = entry.partition(":")
    addr = ipaddress.ip_address(host)  # FAILING LINE (in the child for shard 1)
    return str(addr), int(port or PORT_DEFAULT)


def shard(items: list[str], n: int) -> list[list[str]]:
    size = -(-len(items) // n)
    return [items[i:i + size] for i in range(0, len(items), size)]


def classify(addr: str) -> str:
    ip = ipaddress.ip_address(addr)
    if ip.is_private:
        return "private"
    if ip.is_loopback:
        return "loopback"
    return "public"


def probe_shard(index: int, entries: list[str], out_dir: str) -> None:
    results = []
    for entry in entries:
        host, port = parse_endpoint(entry)
        results.append({"host": host, "port": port, "class": classify(host)})
    Path(out_dir, f"shard-{index}.json").write_text(json.dumps(results))


def collect(out_dir: str) -> list[dict]:
    merged: list[dict] = []
    for path in sorted(Path(out_dir).glob("shard-*.json")):
        merged.extend(json.loads(path.read_text()))
    return merged


def summarise(results: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        counts[r["class"]] = counts.get(r["class"], 0) + 1
    return counts


def run(out_dir: str) -> int:
    ctx = multiprocessing.get_context("spawn")
    procs = []
    for i, entries in enumerate(shard(INVENTORY, N_WORKERS)):
        p = ctx.Process(target=probe_shard, args=(i, entries, out_dir), name=f"probe-{i}")
        p.start()
        procs.append(p)
    failed = 0
    for p in procs:
        p.join()
        if p.exitcode != 0:
            failed += 1
            log.error("%s exited with %s", p.name, p.exitcode)
    results = collect(out_dir)
    log.info("summary: %s", summarise(results))
    return 1 if failed else 0


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(processName)s %(levelname)s %(message)s")
    log.info("pid %d probing %d endpoints", os.getpid(), len(INVENTORY))
    with tempfile.TemporaryDirectory() as out_dir:
        return run(out_dir)


if __name__ == "__main__":
    sys.exit(main())
