# reprobot corpus: mp_process_target
# Exercises: a multiprocessing.Process per mirror group whose target is plain computation
#   (resolving package URLs against mirror bases); the child's traceback goes to the inherited
#   stderr and the parent only sees a non-zero exitcode and exits 1. The failure does NOT need the
#   child: calling the target in the parent raises the same error. Also: a manifest of packages,
#   per-group result files, checksum bookkeeping nobody needs.
# Expected failure: ValueError: Invalid IPv6 URL
#   raised by `urllib.parse.urljoin(base, rel)` in resolve (line 53, marked FAILING LINE), in the
#   child for the "edge" group. Library frames: urllib/parse.py:urlsplit < urlparse < urljoin, so
#   multiprocessing's own frames (process.py:run, _bootstrap) are not among the innermost three.
# Ideal result (2 statements):
#   import urllib.parse; urllib.parse.urljoin('http://[fe80::1/simple/', 'numpy/')
from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import sys
import urllib.parse
import tempfile
from pathlib import Path

log = logging.getLogger("mirrors")

MIRROR_GROUPS = {
    "core": ["https://pypi.example.org/simple/", "https://files.example.org/simple/"],
    "edge": ["http://[fe80::1/simple/", "http://10.0.0.9/simple/"],
    "lab": ["http://lab.internal:8080/pypi/"],
}
PACKAGES = {
    "numpy": "1.26.4",
    "requests": "2.32.3",
    "tqdm": "4.66.4",
}
CHECKSUM_BYTES = 8


def package_path(name: str, version: str) -> str:
    return f"{name}/{name}-{version}.tar.gz"


def checksum(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()[:CHECKSUM_BYTES * 2]


def normalise_base(base: str) -> str:
    return base if base.endswith("/") else base + "/"


def resolve(base: str, rel: str) -> str:
    return urllib.parse.urljoin(base, rel)  # FAILING LINE: the edge mirror's IPv6 host lacks ']'


def plan_urls(bases: list[str], packages: dict[str, str]) -> list[dict[str, str]]:
    rows = []
    for base in bases:
        base = normalise_base(base)
        for name, version in sorted(packages.items()):
            url = resolve(base, package_path(name, version))
            rows.append({"package": name, "url": url, "sha": checksum(url)})
    return rows


def resolve_group(group: str, bases: list[str], out_dir: str) -> None:
    rows = plan_urls(bases, PACKAGES)
    Path(out_dir, f"{group}.json").write_text(json.dumps(rows, indent=1))


def merge_results(out_dir: str) -> dict[str, list[dict[str, str]]]:
    merged: dict[str, list[dict[str, str]]] = {}
    for path in sorted(Path(out_dir).glob("*.json")):
        merged[path.stem] = json.loads(path.read_text())
    return merged


def count_hosts(merged: dict[str, list[dict[str, str]]]) -> int:
    hosts = {urllib.parse.urlsplit(row["url"]).netloc for rows in merged.values() for row in rows}
    return len(hosts)


def run_groups(out_dir: str) -> list[str]:
    procs = {
        group: multiprocessing.Process(target=resolve_group, args=(group, bases, out_dir), name=f"mirror-{group}")
        for group, bases in MIRROR_GROUPS.items()
    }
    for proc in procs.values():
        proc.start()
    for proc in procs.values():
        proc.join()
    return [group for group, proc in procs.items() if proc.exitcode != 0]


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(processName)s %(levelname)s %(message)s")
    with tempfile.TemporaryDirectory() as out_dir:
        failed = run_groups(out_dir)
        if failed:
            log.error("mirror groups failed: %s", ", ".join(failed))
            return 1
        merged = merge_results(out_dir)
        log.info("%d groups, %d hosts (pid %d)", len(merged), count_hosts(merged), os.getpid())
    return 0


if __name__ == "__main__":
    sys.exit(main())
