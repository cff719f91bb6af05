"""Every run of a distributed script gets its own rendezvous: no two runs share a port or file.

The PyTorch tutorials fix the rendezvous in the script (``os.environ["MASTER_PORT"] = "12355"``,
``init_method="tcp://localhost:12355"``) and launchers default to port 29500, so two candidates
run at once collide (EADDRINUSE) or, worse, join each other's process group. Each run that needs
one takes a port nobody else holds (``PortPool``) and gets it four ways:

* ``MASTER_PORT`` in its environment, where the run inherits one (a user's exported variable);
* ``REPROBOT_MASTER_PORT``, which the run's interpreters honour at run time
  (``exception_hook/reprobot_rendezvous.py``, loaded by the recorder's sitecustomize in every
  interpreter of the run, ranks included): an assignment of ``MASTER_PORT`` in ``os.environ``
  stores the run's port, and a ``tcp://host:PORT`` or ``file://PATH`` init_method is rewritten to
  the run's port / a file in the run's own temp folder. Run-time rather than source rewriting:
  the port may come from argparse defaults, a config object or an f-string, the candidate's line
  numbers stay those of its text, and the stored repro keeps exactly the user's code;
* the launcher's own option (``--master_port`` for torchrun, ``--main_process_port`` for
  accelerate launch; reducer/run/launch.py);
* nothing else: ``--standalone`` torchrun already picks a free port itself.

Ports are chosen below the kernel's ephemeral range (so an outgoing connection of another run
cannot take one between the check and the bind), checked bindable, and held by this process until
the run ends.
"""
from __future__ import annotations

import random
import re
import socket
import threading
from contextlib import contextmanager
from typing import Iterator, Mapping

RENDEZVOUS_ENV = "REPROBOT_RENDEZVOUS"      # "1": load the run-time patch (static: zygotes see it)
PORT_ENV = "REPROBOT_MASTER_PORT"           # the run's own port (per run)

_LOW, _HIGH = 20000, 32000

# A script that may open a rendezvous: it is worth a port of its own.
_DISTRIBUTED = re.compile(
    r"MASTER_PORT|init_process_group|torch\.distributed|torch\.multiprocessing|\bmp\.spawn\b"
    r"|tcp://|TCPStore|accelerate|Accelerator\b|deepspeed|torchrun")


def needs_rendezvous(source: str) -> bool:
    return bool(_DISTRIBUTED.search(source))


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            lo, hi = (int(x) for x in fh.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET, "127.0.0.1")):
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.bind((host, port))
        except OSError:
            return False
        finally:
            s.close()
    return True


class PortPool:
    """Ports handed to runs in flight; a port is never given to two runs at once."""

    def __init__(self) -> None:
        self._held: set[int] = set()
        self._lock = threading.Lock()
        lo, _ = _ephemeral_range()
        self._high = min(_HIGH, lo - 1) if lo > _LOW + 1000 else _HIGH

    def acquire(self) -> int:
        with self._lock:
            for _ in range(2000):
                port = random.randint(_LOW, self._high)
                if port in self._held or not _bindable(port):
                    continue
                self._held.add(port)
                return port
        raise OSError("no free port for the run's rendezvous")

    def release(self, port: int) -> None:
        with self._lock:
            self._held.discard(port)

    @contextmanager
    def port(self) -> Iterator[int]:
        port = self.acquire()
        try:
            yield port
        finally:
            self.release(port)


PORTS = PortPool()


def run_environment(port: int, inherited: Mapping[str, str]) -> dict[str, str]:
    """What one run's environment carries for its own rendezvous. ``MASTER_PORT`` itself only
    where the environment the run inherits has one (the user exported it): a script that sets
    none must not run as if it did, or a candidate without its ``os.environ["MASTER_PORT"] = ...``
    line would pass here and fail for a maintainer. An assignment in the script still gets the
    run's port (``PORT_ENV``), and so do a launcher's ranks (its ``--master_port``)."""
    env = {PORT_ENV: str(port)}
    if "MASTER_PORT" in inherited:
        env["MASTER_PORT"] = str(port)
    return env
