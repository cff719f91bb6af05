"""The interpreter's way out, for a process forked from the warm image (a candidate, or a spawn
child served by zygote_children.py). Runs in the USER's interpreter (stdlib only, Python >= 3.9),
loaded by zygote_server.py.

A forked process ends with ``os._exit``, so it does by hand what a cold interpreter does when its
program ends: join the non-daemon threads, run the atexit handlers, flush the streams. It leaves
out one thing that nobody can see: the atexit finalizers with which ``torch.library`` takes its
kernels out of the dispatcher again, thousands of them (0.07 s on an idle core, several times that
under load, in every candidate and in every child). They only undo registrations in a process
that is about to vanish; no output, no file, no exit status depends on them. A user's own
finalizers and atexit handlers all run, in their order.
"""
import sys

# (module, function) of weakref.finalize callbacks that only tear down the dying process's own
# in-memory tables.
_INERT_FINALIZERS = {("torch.library", "_del_library")}


def exit_code_of(exc):
    """What the interpreter does with an uncaught SystemExit."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def _drop_inert_finalizers():
    weakref = sys.modules.get("weakref")
    registry = getattr(getattr(weakref, "finalize", None), "_registry", None)
    if not registry:
        return
    for f, info in list(registry.items()):
        func = getattr(info, "func", None)
        if (getattr(func, "__module__", None), getattr(func, "__name__", None)) in _INERT_FINALIZERS:
            f.atexit = False  # still a live finalizer; only its run at exit is left out


def finish():
    """Join non-daemon threads, run atexit handlers, flush stdout and stderr."""
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_shutdown"):
        try:
            threading._shutdown()
        except BaseException:
            pass
    try:
        _drop_inert_finalizers()
    except Exception:
        pass
    try:
        import atexit
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
