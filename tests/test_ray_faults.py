"""Faults on a real two-node Ray cluster (ray.cluster_utils.Cluster, one cluster for the module;
the head holds no CPU, so every slot lives on a worker node): a node whose stack version differs
is refused; a slot killed mid-run has its candidate run again elsewhere and its process group
killed; nodes removed mid-reduction lose nothing, and when the last one goes the remaining
candidates run on local slots — with the same result and accepted sequence as the local engine.

Needs the extra (skipped cleanly without it): pip install 'reprobot[ray]'."""
from __future__ import annotations

import os
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.ray_support import CORPUS, gone as _gone, local_result, need_ray, reduce_with

ray = need_ray()
pytestmark = pytest.mark.ray

from ray.cluster_utils import Cluster  # noqa: E402

from reducer.cluster.ray_runner import RayRunner, job_runtime_env  # noqa: E402
from reducer.run.runner import Runner, RunSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _stack(folder: Path, version: str) -> Path:
    """A site folder holding the distribution ``stackpkg`` at ``version`` (its metadata is what
    the env probe reads; the candidates would import it)."""
    (folder / "stackpkg").mkdir(parents=True)
    (folder / "stackpkg" / "__init__.py").write_text(f"VERSION = {version!r}\n")
    info = folder / f"stackpkg-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: stackpkg\nVersion: {version}\n")
    (info / "top_level.txt").write_text("stackpkg\n")
    return folder


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("stacks")
    v1, v2 = _stack(base / "v1", "1.0"), _stack(base / "v2", "2.0")
    before = os.environ.get("PYTHONPATH")
    # this process (the local runs) and the nodes started from it see stackpkg 1.0
    os.environ["PYTHONPATH"] = f"{v1}{os.pathsep}{ROOT}"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    node_a = cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False, runtime_env=job_runtime_env())
    try:
        yield {"cluster": cluster, "a": node_a, "v2": v2}
    finally:
        ray.shutdown()
        cluster.shutdown()
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def _node_id(node) -> str:
    return node.node_id


def test_a_node_with_another_stack_version_is_refused(two_nodes, tmp_path: Path) -> None:
    cluster = two_nodes["cluster"]
    other = cluster.add_node(num_cpus=1, env_vars={"PYTHONPATH": f"{two_nodes['v2']}{os.pathsep}{ROOT}"})
    try:
        script = tmp_path / "job" / "uses_stack.py"
        script.parent.mkdir()
        source = "import shlex\nimport stackpkg\n\nprint(stackpkg.VERSION)\nshlex.split('a \"b')\n"
        script.write_text(source)
        lines: list[str] = []
        runner = RayRunner(Runner(RunSpec(script=script)), slots=3, notify=lines.append, start_timeout=120)
        try:
            assert runner.slots == 2                     # node A's two; the other node's one refused
            assert {s.node_id for s in runner._slots} == {_node_id(two_nodes["a"])}
            outcome = runner.run(source, timeout=60)
        finally:
            runner.close()
        refused = [line for line in lines if "refused" in line]
        assert len(refused) == 1 and "stackpkg 1.0 here, 2.0 there" in refused[0], lines
        assert runner.stats.refused == refused
        assert outcome.stdout.strip() == "1.0" and outcome.tracebacks[-1].message == "No closing quotation"
    finally:
        cluster.remove_node(other)


def test_a_slot_killed_mid_run_loses_nothing(two_nodes, tmp_path: Path) -> None:
    script = tmp_path / "job" / "slow_fail.py"
    script.parent.mkdir()
    source = textwrap.dedent("""
        import os, time
        with open(os.environ["PID_FILE"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(3)
        raise ValueError("the bug")
        """)
    script.write_text(source)
    pid_file = tmp_path / "pids"
    lines: list[str] = []
    runner = RayRunner(Runner(RunSpec(script=script)), slots=2, notify=lines.append, start_timeout=120)
    got: list = []
    thread = threading.Thread(target=lambda: got.append(runner.run(source, timeout=120,
                                                                   extra_env={"PID_FILE": str(pid_file)})))
    try:
        thread.start()
        deadline = time.monotonic() + 60
        while not pid_file.is_file() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, "the remote run never started"
            time.sleep(0.05)
        first = int(pid_file.read_text().split()[0])
        busy = [s for s in runner._slots if s not in runner._free]
        assert len(busy) == 1
        ray.kill(busy[0].actor, no_restart=True)
        thread.join(timeout=120)
        assert not thread.is_alive()
        stats = runner.stats
    finally:
        thread.join(timeout=120)
        runner.close()
    outcome = got[0]
    # the verdict is the re-run's, which finished: the failure, exit 1, a fresh process
    assert outcome.returncode == 1 and outcome.tracebacks[-1].message == "the bug"
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2 and pids[1] != first
    assert stats.reruns == 1 and stats.lost_slots == 1 and stats.fallback is None
    assert any("lost the slot" in line for line in lines)
    # the killed slot's candidate was killed on its node, not left sleeping
    assert _gone(first)
    # ...and its folder removed (by the slot left on that node)
    assert not list(Path(tempfile.gettempdir()).glob(f"reprobot-slot-{busy[0].pid}-*"))


def test_nodes_removed_mid_reduction_lose_nothing_and_then_local_slots_take_over(two_nodes, tmp_path: Path) -> None:
    cluster = two_nodes["cluster"]
    node_c = cluster.add_node(num_cpus=1)
    script = tmp_path / "job" / "constants_dead_code.py"
    script.parent.mkdir()
    script.write_text((CORPUS / "constants_dead_code.py").read_text(encoding="utf-8"))
    local = local_result(script)
    lines: list[str] = []
    runner = RayRunner(Runner(RunSpec(script=script)), slots=3, notify=lines.append, start_timeout=30)
    assert runner.slots == 3
    removed: list[str] = []

    def remove_nodes() -> None:
        for node, after in ((two_nodes["a"], 8), (node_c, 25)):
            while runner.stats.runs < after and not done.is_set():
                time.sleep(0.05)
            if done.is_set():
                return
            cluster.remove_node(node)
            removed.append(node.node_id)

    done = threading.Event()
    chaos = threading.Thread(target=remove_nodes)
    chaos.start()
    try:
        remote = reduce_with(runner, script.read_text(encoding="utf-8"), jobs=3)
    finally:
        done.set()
        chaos.join(timeout=120)
        runner.close()
    assert len(removed) == 2, (removed, runner.stats)
    assert remote.best == local.best
    assert remote.accepted == local.accepted
    stats = runner.stats
    assert stats.lost_slots >= 1 and stats.fallback is not None
    assert sum("remaining candidates run on local slots" in line for line in lines) == 1
