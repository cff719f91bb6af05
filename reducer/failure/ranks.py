"""Which process's failure a multi-process run is about.

A child that raises is reported twice: by itself (its traceback, printed by the child or quoted
in the parent's message) and by the parent, whose own exception only says "a child failed":
``torch.multiprocessing.spawn.ProcessRaisedException`` (an empty message, the child's traceback
after it), torchrun's ``ChildFailedError`` (a table of ranks, exit codes and times), a pool's
``BrokenProcessPool``, or the re-raise of a remote exception in the parent
(``concurrent.futures``' ``__get_result``, ``multiprocessing.pool``'s ``get``, chained to the
child's own traceback). Such a WRAPPER is never a target: its signature says nothing of which
error the child raised, so any child error would match it.

The other ranks of a distributed job then fail too, because the first one is gone: a collective
times out, the peer closed the connection, the process group was destroyed or aborted, a rank
was sent SIGTERM. Those SECONDARY failures are listed after the primary one, so the first
rank's own raised error is the target.

An address already in use (EADDRINUSE) is a COLLISION with another run's rendezvous, never the
failure being reduced (reducer/run/rendezvous.py gives every run its own port).
"""
from __future__ import annotations

import re

from reducer.failure.normalize import library_frames
from reducer.failure.outcome import TracebackRecord

PRIMARY, SECONDARY, WRAPPER = 0, 1, 2

# Parent-side exceptions that only report that a child failed (last component of the type).
_WRAPPER_TYPES = frozenset({
    "ProcessRaisedException",       # torch.multiprocessing.spawn
    "ProcessExitedException",       # torch.multiprocessing.spawn, a child died by a signal/exit code
    "ChildFailedError",             # torch.distributed.elastic (torchrun, accelerate launch)
    "BrokenProcessPool",            # concurrent.futures.process
    "_RemoteTraceback",             # concurrent.futures.process, the child's text as an exception
    "RemoteTraceback",              # multiprocessing.pool
})

# Launcher functions whose exception only says that the process they started exited non-zero:
# `accelerate launch` with one process runs the script as a plain subprocess and raises
# CalledProcessError when it exits non-zero, whatever the script raised (or an argparse exit,
# which prints no traceback at all).
_LAUNCHER_FRAMES = frozenset({
    "accelerate/commands/launch.py:simple_launcher",
    # A DataLoader's worker failed: the parent raises the worker's exception type again with
    # "Caught X in DataLoader worker process N." and the worker's traceback quoted after it (which
    # the parser reads as the worker's own record). Its frames are the parent's iteration, which a
    # collate_fn or a dataset called in the parent (num_workers=0) never has.
    "torch/_utils.py:reraise",
})

# A parent re-raising the exception a child sent back: the child's own traceback is chained.
_RERAISE_FRAMES = frozenset({
    "concurrent/futures/_base.py:__get_result",
    "multiprocessing/pool.py:get",
})

_SECONDARY_TYPES = frozenset({
    "DistBackendError", "DistNetworkError", "DistStoreError",   # torch.distributed
    "SignalException",                                           # torch.distributed.elastic: SIGTERM'ed
    "BrokenPipeError", "ConnectionResetError", "ConnectionAbortedError",
})
_SECONDARY_MESSAGE = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe"
    r"|process group (?:has been |was )?(?:destroyed|aborted)|ProcessGroup\w* (?:is|was|has been) aborted"
    r"|communicator was aborted|NCCL communicator .*abort"
    r"|Timed out waiting \d+ms for (?:recv|send) operation|Socket Timeout"
    r"|Watchdog caught collective operation timeout|collective operation timeout"
    r"|Process \d+ got signal: \d+|terminated with signal SIG(?:TERM|KILL|INT)"
    r"|wait timeout after \d+ms|Rank \d+ is not responding",
    re.IGNORECASE)
_SECONDARY_SIGNALS = frozenset({"SIGTERM", "SIGINT", "SIGKILL"})

_COLLISION = re.compile(r"address already in use|EADDRINUSE|errno:? ?98\b|\[Errno 98\]", re.IGNORECASE)


def _short(exc_type: str) -> str:
    return exc_type.rsplit(".", 1)[-1]


def is_collision(record: TracebackRecord) -> bool:
    """A rendezvous port or address another process already holds."""
    return bool(_COLLISION.search(record.message)) or any(is_collision(c) for c in record.chain)


def role(record: TracebackRecord) -> int:
    """PRIMARY, SECONDARY or WRAPPER (see the module's doc)."""
    if _short(record.exc_type) in _WRAPPER_TYPES or _innermost_library(record) in _LAUNCHER_FRAMES:
        return WRAPPER
    if record.chain and _innermost_library(record) in _RERAISE_FRAMES:
        # The parent's re-raise of what a child sent back; the chain holds the child's traceback.
        if any(c.exc_type == record.exc_type for c in record.chain):
            return WRAPPER
    if _short(record.exc_type) in _SECONDARY_TYPES or _SECONDARY_MESSAGE.search(record.message or ""):
        return SECONDARY
    if record.exc_type == "Signal" and record.message in _SECONDARY_SIGNALS:
        return SECONDARY
    if is_collision(record):
        return SECONDARY
    return PRIMARY


def _innermost_library(record: TracebackRecord) -> str | None:
    frames = library_frames(record)
    return frames[0] if frames else None


def describe_wrapper(record: TracebackRecord) -> str:
    return (f"{record.exc_type} is raised by the parent process only to say that a child failed; "
            f"its message{' is empty and' if not record.message.strip() else ''} does not say which "
            f"error the child raised, so it cannot be the failure to reduce")
