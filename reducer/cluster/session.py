"""`reprobot reduce --cluster`: the search's candidates run on a Ray cluster's slots, everything
else (the original's confirmation, traces, the final cold verdict, the self-contained check)
stays local. Ray is imported only when --cluster is given (reducer/cluster/ray_runner.py)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from reducer.errors import ExitCode, ReprobotError
from reducer.failure.oracle import Oracle
from reducer.failure.original import Failure
from reducer.run.gpu import GpuPool

INSTALL_HINT = "pip install 'reprobot[ray]'"


def _ray_runner():
    try:
        from reducer.cluster import ray_runner
    except ImportError as e:
        if (e.name or "").split(".")[0] == "ray":
            raise ReprobotError(f"--cluster needs Ray, which is not installed: {INSTALL_HINT}",
                                ExitCode.USAGE) from None
        raise
    return ray_runner


def check_available() -> None:
    """Fail at once (before the original is even run) when Ray is missing."""
    _ray_runner()


@contextmanager
def on_cluster(address: str, failure: Failure, oracle: Oracle, pool: GpuPool, slots: int | None,
               warm: bool, report: dict[str, Any], say: Callable[[str], None],
               warn: Callable[[str], None]) -> Iterator[int]:
    """For the block, the oracle's candidates run on the cluster; yields how many slots there are
    (0: the candidates stay local). ``report`` gets the cluster's figures for reduction.json;
    ``say`` hears where the slots are, ``warn`` what stays local and why."""
    if failure.runner.launched:
        warn("cluster: a launch line starts its own processes; its candidates run locally")
        yield 0
        return
    engine = _ray_runner()
    from reducer.cluster.gpus import ClusterGpus
    from reducer.run.zygote import warm_imports
    local, local_gpus = failure.runner, oracle.gpus
    per_job = pool.per_job if len(pool) else 0
    modules = warm_imports(failure.source, local.script_dir) if warm and local.zygotes is not None else []

    def local_run(source: str, **kwargs: Any):
        # runs that stay here (traces, a cluster gone) are pinned to a local set as before
        extra = {k: v for k, v in (kwargs.pop("extra_env", None) or {}).items() if not k.startswith("REPROBOT_CLUSTER_")}
        with local_gpus.acquire() as slot:
            outcome = local.run(source, extra_env={**extra, **(slot.env() or {})}, **kwargs)
            slot.pgid = outcome.pid
            return outcome

    try:
        runner = engine.RayRunner(local, address=None if address == "auto" else address, slots=slots,
                                  gpus_per_job=per_job, warm_modules=modules, local_run=local_run, notify=warn)
    except Exception as e:  # noqa: BLE001 - Ray's connection errors are of many kinds
        raise ReprobotError(f"--cluster {address}: cannot use the cluster: {str(e).splitlines()[0][:200]}",
                            ExitCode.USAGE) from None
    st = runner.stats
    say(f"cluster: {runner.slots} slot(s) on {len(st.nodes)} node(s) "
        f"({', '.join(f'{k}: {v}' for k, v in st.nodes.items())}), {per_job or 'no'} GPU(s) per job, "
        f"{'warm' if modules else 'cold'}; started in {st.start_seconds:.1f}s")
    oracle.runner, oracle.gpus = runner, ClusterGpus(pool)
    try:
        yield max(runner.slots, 1)
    finally:
        oracle.runner, oracle.gpus = local, local_gpus
        report.update(runner.stats.to_dict())
        runner.close()
