"""Candidate runs on a Ray cluster (`reprobot reduce --cluster ray://HOST:PORT`, issue #34).

Each slot is a Ray actor pinned to one node: it holds the script's folder (shipped once through
the object store), a reducer.run.runner.Runner over it and, when the local warm check passed, the
zygote of the user's stack on that node; it asks Ray for the GPUs one job needs. A candidate runs
there exactly as a local run does (scratch copy, limits, its own process group killed at the end)
and its Outcome comes back pickled.

What the search sees does not change: ``RayRunner`` is a CandidateRunner (reducer/run/slots.py), the
oracle judges every Outcome here, and the search reads verdicts in proposal order, so the
accepted sequence is the one a single local slot gives.

Faults: a slot whose actor or node dies mid-run loses nothing — its candidate is run again on
another slot, and an Outcome is only ever taken from a run that finished. When no slot is left
and none can be placed, the remaining runs go to local slots (one line says so). A node whose
Python or stack versions differ from the local ones is refused before it runs anything.

Imported only when --cluster is given: importing it imports Ray.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reducer.cluster.env_probe import EnvProbe, differences, probe, top_level_modules
from reducer.cluster.gpus import slot_visible
from reducer.cluster.payload import FolderPayload, pack
from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.run.runner import Runner, RunSpec, reap_leftovers, stop_requested

# How often a waiting caller looks at its cancel event (seconds): a stale run's remote process
# group is killed within about this much of the search deciding it is stale.
POLL = 0.05
# A candidate whose slots keep dying is run locally after this many tries: its verdict still
# comes from a run that finished.
MAX_ATTEMPTS = 4
DEFAULT_START_TIMEOUT = 180.0
MAX_SLOTS = 64


def job_runtime_env() -> dict[str, Any]:
    """reducer travels with the job (Ray uploads it once), so a node needs Ray and the user's
    stack, not reprobot. Ray takes local folders only for the whole job, at ``ray.init``."""
    return {"py_modules": [str(Path(__file__).resolve().parents[1])]}


def connect(address: str | None) -> None:
    """Join the cluster: ``ray://HOST:PORT`` (Ray Client), ``auto`` (RAY_ADDRESS, or the cluster
    this machine is part of), or a GCS ``HOST:PORT``. Already connected (a caller that started
    Ray itself, with ``job_runtime_env()`` where reducer is not on the nodes): nothing to do."""
    if ray.is_initialized():
        return
    ray.init(address=address or "auto", logging_level="ERROR", log_to_driver=False,
             runtime_env=job_runtime_env())


# ---- the slot, on its node ------------------------------------------------------------------
class SlotActor:
    """One warm slot on one node. Runs are one at a time (the slot is one job); a second thread
    of the actor takes cancels (max_concurrency=2)."""

    def __init__(self, spec: dict[str, Any], payload: FolderPayload, stack: list[str]) -> None:
        _remove_dead_slots_folders()
        self.root = Path(tempfile.mkdtemp(prefix=f"{_SLOT_PREFIX}{os.getpid()}-"))
        script = payload.materialise(self.root)
        self.runner = Runner(RunSpec(script=script, **spec))
        self.stack = stack
        self.gpus = [str(g) for g in ray.get_gpu_ids()]
        from reducer.run.gpu import compute_pids
        # what holds the slot's GPUs before any run: a run's memory is the rest (reducer/run/gpu.py)
        self._baseline = {g: compute_pids(g) for g in self.gpus}
        self.unreleased = 0
        self._events: dict[str, threading.Event] = {}
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()
        # What a slot that died here before left running (its runs' tags name a dead pid).
        self.reaped = reap_leftovers()

    def hello(self) -> dict[str, Any]:
        """Where the slot is and what its interpreter is (the env probe), before any run."""
        ctx = ray.get_runtime_context()
        try:
            found: dict[str, Any] | str = probe(self.runner.python, self.stack,
                                                self.runner.base_environment()).to_dict()
        except RuntimeError as e:
            found = str(e)
        return {"node_id": ctx.get_node_id(), "host": socket.gethostname(),
                "ip": ray.util.get_node_ip_address(), "pid": os.getpid(), "gpus": self.gpus, "probe": found}

    def warm(self, modules: list[str]) -> dict[str, Any]:
        """Start this node's zygote for the stack (the local warm check said warm runs fail the
        same way as cold ones). A zygote that cannot start leaves the slot cold."""
        from reducer.run.zygote import ZygoteError, ZygotePool
        pool = ZygotePool(self.runner.python, modules, self.runner.base_environment())
        try:
            pool.release(pool.start_one())
        except ZygoteError as e:
            return {"warm": False, "why": str(e)[:300]}
        self.runner.zygotes = pool
        return {"warm": True, "info": pool.info.to_dict() if pool.info else {}}

    def run(self, run_id: str, source: str, kwargs: dict[str, Any]) -> tuple[Outcome, bool, bool]:
        """(the Outcome, whether it ran warm, whether it fell back cold)."""
        event = threading.Event()
        with self._lock:
            self._events[run_id] = event
            if run_id in self._cancelled:
                event.set()
        warm_before, fallbacks_before = self.runner.warm_runs, self.runner.warm_fallbacks
        try:
            extra = slot_visible(kwargs.pop("extra_env", None), self.gpus)
            outcome = self.runner.run(source, extra_env=extra, cancel=event, **kwargs)
        finally:
            with self._lock:
                self._events.pop(run_id, None)
                self._cancelled.discard(run_id)
        # as a local GPU set: the slot takes its next run only once this one's memory is freed
        from reducer.run.gpu import wait_released
        for g in self.gpus:
            if not wait_released(g, self._baseline[g], outcome.pid):
                self.unreleased += 1
        return (outcome, self.runner.warm_runs > warm_before, self.runner.warm_fallbacks > fallbacks_before)

    def cancel(self, run_id: str) -> None:
        """Stop that run: its process group is killed on this node (reducer.run.runner)."""
        with self._lock:
            event = self._events.get(run_id)
            if event is None:
                self._cancelled.add(run_id)     # the cancel overtook the run
            else:
                event.set()

    def reap(self) -> int:
        """Kill what a slot of this node that died left running, and remove its folder."""
        killed = reap_leftovers()
        _remove_dead_slots_folders()
        return killed

    def stop(self) -> None:
        if self.runner.zygotes is not None:
            self.runner.zygotes.stop()
        shutil.rmtree(self.root, ignore_errors=True)


_SLOT_PREFIX = "reprobot-slot-"


def _remove_dead_slots_folders() -> None:
    """A slot killed with its actor (or its node's raylet) never ran stop(): the next slot on the
    node removes the folders whose owner process is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_SLOT_PREFIX}*-*"):
        owner = folder.name[len(_SLOT_PREFIX):].split("-", 1)[0]
        if not owner.isdigit():
            continue
        try:
            os.kill(int(owner), 0)
            continue
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


_ACTOR = None


def _actor_class():
    global _ACTOR
    if _ACTOR is None:
        _ACTOR = ray.remote(SlotActor)
    return _ACTOR


# ---- the driver's side ----------------------------------------------------------------------
@dataclass(eq=False)      # a slot is itself: two on one node are never "equal"
class Slot:
    actor: Any
    node_id: str
    host: str = ""
    pid: int = 0
    gpus: list[str] = field(default_factory=list)
    warm: bool = False


@dataclass
class ClusterStats:
    slots_started: int = 0
    nodes: dict[str, int] = field(default_factory=dict)       # node (host/ip short id) -> slots
    refused: list[str] = field(default_factory=list)          # one line per refused node
    runs: int = 0
    reruns: int = 0            # candidates run again because their slot died mid-run
    lost_slots: int = 0
    cancels: int = 0           # cancels sent to a remote run (stale speculation, stop)
    reaped: int = 0            # processes of dead slots killed on their node
    fallback: str | None = None
    ship_bytes: int = 0
    start_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class ClusterGone(Exception):
    """No slot is left and none can be placed."""


class RayRunner:
    """A CandidateRunner whose candidates run on Ray actors. Runs that are not plain candidates
    (a tracing launcher, ``alone``, ``keep_dir``) go to the wrapped local Runner, as does every
    run once the cluster is gone. ``local_run`` runs one locally (the caller pins GPUs)."""

    def __init__(self, local: Runner, *, address: str | None = None, slots: int | None = None,
                 gpus_per_job: int = 0, cpus_per_slot: float = 1.0, warm_modules: list[str] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT, notify: Callable[[str], None] = print,
                 local_run: Callable[..., Outcome] | None = None) -> None:
        t0 = time.monotonic()
        if local.launched:
            raise ValueError("a launch line runs its own processes: its candidates stay local")
        self.local, self.spec = local, local.spec
        self.gpus_per_job, self.cpus_per_slot = gpus_per_job, cpus_per_slot
        self.warm_modules = warm_modules or []
        self.start_timeout = start_timeout
        self.notify = notify
        self._local_run = local_run or local.run
        self.stats = ClusterStats()
        self.remote_warm_runs = self.remote_warm_fallbacks = 0
        connect(address)
        self.stack = top_level_modules(self.spec.script.read_text(encoding="utf-8", errors="replace"))
        self.local_probe = probe(local.python, self.stack, local.base_environment())
        payload = pack(local)
        self.stats.ship_bytes = payload.size
        self._payload = ray.put(payload)
        self._spec = {"python": local.python, "args": tuple(self.spec.args), "timeout": self.spec.timeout,
                      "env": dict(self.spec.env), "clean_env": self.spec.clean_env, "limits": dict(self.spec.limits),
                      "quota": self.spec.quota, "rendezvous": self.spec.rendezvous}
        self._cond = threading.Condition()
        self._slots: list[Slot] = []
        self._free: list[Slot] = []
        self._refused_nodes: set[str] = set()
        self._starting = 0
        self.target = min(slots or MAX_SLOTS, MAX_SLOTS)
        self._start(self.target)
        self.stats.start_seconds = round(time.monotonic() - t0, 2)
        if not self._slots:
            self._fall_back("no slot could be placed on the cluster")

    # -- CandidateRunner --------------------------------------------------------------------
    def run(self, source: str, *, timeout: float | None = None, extra_env: dict[str, str] | None = None,
            stop_when: Callable[[list[TracebackRecord]], bool] | None = None, max_rss: int | None = None,
            stop_grace: float = 2.0, warm: bool | None = None, **other: Any) -> Outcome:
        """``stop_when`` is a callable of this process and stays here (the protocol allows it):
        a remote run goes to its own end. Unknown keywords are accepted; ``cancel`` (an Event),
        passed by the oracle, stops the remote run's process group once set."""
        if other.get("launcher") or other.get("keep_dir") is not None or other.get("alone"):
            return self._local(source, timeout=timeout, extra_env=extra_env, stop_when=stop_when,
                               max_rss=max_rss, stop_grace=stop_grace, warm=warm, **other)
        cancel = other.get("cancel")
        kwargs = {"timeout": timeout, "extra_env": extra_env, "max_rss": max_rss, "stop_grace": stop_grace,
                  "warm": warm}
        for _attempt in range(MAX_ATTEMPTS):
            slot = self._acquire(cancel)
            if slot is None:
                if self.stats.fallback is None:         # cancelled while waiting for a slot
                    return Outcome(returncode=None, wall_time=0.0, stopped_early=True)
                break
            try:
                outcome, ran_warm, fell_back = self._remote(slot, source, kwargs, cancel)
            except _SlotLost as e:
                self._lose(slot, e.why)
                with self._cond:
                    self.stats.reruns += 1
                continue
            self._release(slot)
            with self._cond:
                self.stats.runs += 1
                self.remote_warm_runs += ran_warm
                self.remote_warm_fallbacks += fell_back
            return outcome
        return self._local(source, timeout=timeout, extra_env=extra_env, stop_when=stop_when, max_rss=max_rss,
                           stop_grace=stop_grace, warm=warm)

    def _remote(self, slot: Slot, source: str, kwargs: dict[str, Any],
                cancel: threading.Event | None) -> tuple[Outcome, bool, bool]:
        run_id = uuid.uuid4().hex
        ref = slot.actor.run.remote(run_id, source, dict(kwargs))
        sent = False
        try:
            while True:
                done, _ = ray.wait([ref], timeout=POLL)
                if done:
                    return ray.get(ref)
                if not sent and (stop_requested() or (cancel is not None and cancel.is_set())):
                    # The run goes on to its stopped Outcome; the remote group is killed there.
                    slot.actor.cancel.remote(run_id)
                    sent = True
                    with self._cond:
                        self.stats.cancels += 1
        except RayTaskError as e:
            raise e.as_instanceof_cause() from None       # our code failed over there: say so
        except RayError as e:
            raise _SlotLost(f"{type(e).__name__}") from None

    # -- the slots --------------------------------------------------------------------------
    @property
    def slots(self) -> int:
        with self._cond:
            return len(self._slots)

    def _capacity(self) -> list[tuple[str, int]]:
        """(node id, how many more slots it holds) for every live node not refused, in a stable order."""
        per_node: dict[str, int] = {}
        for s in self._slots:
            per_node[s.node_id] = per_node.get(s.node_id, 0) + 1
        out = []
        for node in sorted(ray.nodes(), key=lambda n: n["NodeID"]):
            if not node.get("Alive") or node["NodeID"] in self._refused_nodes:
                continue
            res = node.get("Resources") or {}
            fits = int(res.get("CPU", 0) // self.cpus_per_slot) if self.cpus_per_slot else MAX_SLOTS
            if self.gpus_per_job:
                fits = min(fits, int(res.get("GPU", 0) // self.gpus_per_job))
            free = fits - per_node.get(node["NodeID"], 0)
            if free > 0:
                out.append((node["NodeID"], free))
        return out

    def _start(self, want: int) -> int:
        """Place up to ``want`` new slots, spread over the nodes; probe each, refuse a node whose
        environment differs, warm the rest. How many joined."""
        with self._cond:
            plan: list[str] = []
            capacity = dict(self._capacity())
            while len(plan) < want and any(capacity.values()):
                for node in list(capacity):
                    if capacity[node] > 0 and len(plan) < want:
                        plan.append(node)
                        capacity[node] -= 1
            self._starting += len(plan)
        try:
            return self._join(plan)
        finally:
            with self._cond:
                self._starting -= len(plan)
                self._cond.notify_all()

    def _join(self, plan: list[str]) -> int:
        cls = _actor_class()
        actors = []
        for node in plan:
            options: dict[str, Any] = {
                "num_cpus": self.cpus_per_slot, "num_gpus": self.gpus_per_job, "max_concurrency": 2,
                "max_restarts": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
            actor = cls.options(**options).remote(self._spec, self._payload, self.stack)
            actors.append((node, actor, actor.hello.remote()))
        joined: list[Slot] = []
        deadline = time.monotonic() + self.start_timeout
        for node, actor, ref in actors:
            try:
                info = ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
            except (RayError, GetTimeoutError) as e:
                ray.kill(actor, no_restart=True)
                self.notify(f"cluster: a slot on node {node[:8]} did not start ({type(e).__name__})")
                continue
            if node in self._refused_nodes:
                ray.kill(actor, no_restart=True)
                continue
            why = self._refusal(info)
            if why:
                self._refuse(node, f"cluster: node {info['ip']} ({node[:8]}) refused: {why}")
                ray.kill(actor, no_restart=True)
                continue
            joined.append(Slot(actor, node, info["ip"], info["pid"], info["gpus"]))
        if self.warm_modules and joined:
            answers = [s.actor.warm.remote(self.warm_modules) for s in joined]
            for slot, ref in zip(joined, answers):
                try:
                    slot.warm = bool(ray.get(ref, timeout=max(1.0, deadline - time.monotonic())).get("warm"))
                except (RayError, GetTimeoutError):
                    slot.warm = False        # its runs fall back to cold ones, as locally
        with self._cond:
            for slot in joined:
                self._slots.append(slot)
                self._free.append(slot)
                self.stats.slots_started += 1
                key = f"{slot.host} ({slot.node_id[:8]})"
                self.stats.nodes[key] = self.stats.nodes.get(key, 0) + 1
            self._cond.notify_all()
        return len(joined)

    def _refusal(self, info: dict[str, Any]) -> str:
        found = info.get("probe")
        if isinstance(found, str):
            return found
        diffs = differences(self.local_probe, EnvProbe.from_dict(found))
        return "; ".join(diffs)

    def _refuse(self, node: str, line: str) -> None:
        with self._cond:
            if node in self._refused_nodes:
                return
            self._refused_nodes.add(node)
            self.stats.refused.append(line)
            doomed = [s for s in self._slots if s.node_id == node]
            for s in doomed:
                self._slots.remove(s)
                if s in self._free:
                    self._free.remove(s)
        for s in doomed:
            ray.kill(s.actor, no_restart=True)
        self.notify(line)

    def _acquire(self, cancel: threading.Event | None) -> Slot | None:
        with self._cond:
            while True:
                if self.stats.fallback is not None:
                    return None
                if cancel is not None and cancel.is_set():
                    return None
                if self._free:
                    return self._free.pop(0)
                if not self._slots and not self._starting:
                    break
                self._cond.wait(0.2)
        self._fall_back("no slot is left on the cluster and none can be placed")
        return None

    def _release(self, slot: Slot) -> None:
        with self._cond:
            if slot in self._slots:
                self._free.append(slot)
                self._cond.notify_all()

    def _lose(self, slot: Slot, why: str) -> None:
        """A slot died mid-run (its actor or its node): forget it, kill what it left running on
        its node if a slot there is still up, and place a replacement where there is room."""
        with self._cond:
            if slot not in self._slots:
                return
            self._slots.remove(slot)
            self.stats.lost_slots += 1
            survivors = [s for s in self._slots if s.node_id == slot.node_id]
            self._starting += 1       # counted before the replacement's thread starts
        try:
            ray.kill(slot.actor, no_restart=True)
        except RayError:
            pass
        self.notify(f"cluster: lost the slot on {slot.host} ({why}); its candidate runs again on another slot")
        for s in survivors[:1]:
            try:
                with self._cond:
                    self.stats.reaped += ray.get(s.actor.reap.remote(), timeout=30)
            except (RayError, GetTimeoutError):
                pass
        threading.Thread(target=self._replace, daemon=True, name="reprobot-cluster-replace").start()

    def _replace(self) -> None:
        try:
            self._start(1)
        except Exception:  # noqa: BLE001 - a cluster that went away: the runs fall back to local slots
            pass
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()

    def _fall_back(self, why: str) -> None:
        with self._cond:
            if self.stats.fallback is not None:
                return
            self.stats.fallback = why
            self._cond.notify_all()
        self.notify(f"cluster: {why}: the remaining candidates run on local slots")

    def _local(self, source: str, **kwargs: Any) -> Outcome:
        return self._local_run(source, **kwargs)

    # -- what the reduction reads off its runner --------------------------------------------
    @property
    def zygotes(self):
        return self.local.zygotes

    @property
    def warm_runs(self) -> int:
        return self.local.warm_runs + self.remote_warm_runs

    @property
    def warm_fallbacks(self) -> int:
        return self.local.warm_fallbacks + self.remote_warm_fallbacks

    @property
    def launched(self) -> bool:
        return False

    @property
    def python(self) -> str:
        return self.local.python

    @property
    def script_dir(self) -> Path:
        return self.local.script_dir

    def close(self) -> None:
        """Stop every slot (their zygotes and folders go with them)."""
        with self._cond:
            slots, self._slots, self._free = list(self._slots), [], []
        # A cluster that went away answers with errors of many kinds (connection, Ray's own):
        # closing what is left must not fail the reduction.
        refs = []
        for s in slots:
            try:
                refs.append(s.actor.stop.remote())
            except Exception:  # noqa: BLE001
                pass
        try:
            ray.wait(refs, num_returns=len(refs), timeout=30)
        except Exception:  # noqa: BLE001
            pass
        for s in slots:
            try:
                ray.kill(s.actor, no_restart=True)
            except Exception:  # noqa: BLE001
                pass


class _SlotLost(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
