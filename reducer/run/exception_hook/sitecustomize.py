"""reprobot's exception recorder, loaded in every interpreter a run starts (stdlib only, 3.9+).

It sits on PYTHONPATH only for reprobot's runs. While ``REPROBOT_EXCEPTIONS`` names a file, each
exception the interpreter reports - uncaught, in a thread, unraisable, or formatted by the
traceback module (``logging``'s ``log.exception``, ``traceback.print_exc``, a multiprocessing
child) - is appended there as one JSON line, before it is printed. reprobot then knows which
tracebacks in the output were raised and which were only printed text.

The footprint is kept small on purpose, because cold runs carry it too: nothing is imported
at start-up but the finder it shares (reprobot_after_import.py), the hooks call the functions
they wrap unchanged, and a user's own sitecustomize still runs.
"""
import os
import sys

from reprobot_after_import import append_json_line, when_imported

_ENV = "REPROBOT_EXCEPTIONS"
_MAX_RECORDS = 500
_written = set()
_built = None
if os.environ.get("REPROBOT_BUILT"):
    # which package made the tensors the failing line reads (reprobot_built.py): one run only
    try:
        import reprobot_built as _built
        _built.start()
    except BaseException:
        _built = None


def _type_name(cls):
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "?")
    return name if module in (None, "builtins", "__main__") else "%s.%s" % (module, name)


def _headline(exc):
    """The exception's line as Python prints it (``ValueError: first line of the message``)."""
    stype = _type_name(type(exc))
    if isinstance(exc, SyntaxError):
        text = exc.msg if isinstance(getattr(exc, "msg", None), str) else ""
    else:
        try:
            text = str(exc)
        except BaseException:
            text = ""
    first = text.splitlines()[0] if text else ""
    return "%s: %s" % (stype, first) if first else stype


def _record(exc, how):
    if _built is not None:
        _built.record(exc, how)
    path = os.environ.get(_ENV)
    if not path or not isinstance(exc, BaseException):
        return
    try:
        import json
        lines, seen = [], set()
        while exc is not None and id(exc) not in seen and len(_written) < _MAX_RECORDS:
            seen.add(id(exc))
            headline = _headline(exc)
            if (path, headline) not in _written:
                _written.add((path, headline))
                lines.append(json.dumps({"headline": headline, "how": how, "pid": os.getpid()}) + "\n")
            exc = exc.__cause__ if exc.__cause__ is not None else (
                None if exc.__suppress_context__ else exc.__context__)
        if lines:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, "".join(lines).encode("utf-8", "replace"))
            finally:
                os.close(fd)
    except BaseException:
        pass


def _exception_of(args, kwargs):
    if args and isinstance(args[0], BaseException):
        return args[0]
    if len(args) > 1:
        return args[1]
    return kwargs.get("value")


def _wrap_formatter(real, how):
    def wrapper(*args, **kwargs):
        _record(_exception_of(args, kwargs), how)
        return real(*args, **kwargs)
    wrapper.__wrapped__ = real
    wrapper._reprobot = True
    wrapper.__name__ = getattr(real, "__name__", "wrapper")
    wrapper.__doc__ = getattr(real, "__doc__", None)
    return wrapper


def _patch_traceback(module):
    for name in ("print_exception", "format_exception"):
        real = getattr(module, name, None)
        if real is not None and not getattr(real, "_reprobot", False):
            setattr(module, name, _wrap_formatter(real, "formatted"))


def _patch_threading(module):
    real = getattr(module, "excepthook", None)
    if real is None or getattr(real, "_reprobot", False):
        return

    def excepthook(args):
        _record(getattr(args, "exc_value", None), "thread")
        return real(args)
    excepthook.__wrapped__ = real
    excepthook._reprobot = True
    module.excepthook = excepthook


def _patch_rich_traceback(module):
    """rich's traceback handler left uninstalled: its boxed traceback is one no parser reads, so
    a failure behind it is no failure to reprobot (accelerate before 0.22 installs it whenever
    rich is importable: peft-860's stale-accelerate import error was seen only in the runs where
    it was not). The run prints Python's own traceback; what raised it is unchanged."""
    real = getattr(module, "install", None)
    if real is None or getattr(real, "_reprobot", False):
        return

    def install(*args, **kwargs):
        return sys.excepthook
    install.__wrapped__ = real
    install._reprobot = True
    module.install = install


def _install():
    real_excepthook = sys.excepthook

    def excepthook(exc_type, value, tb):
        _record(value, "uncaught")
        return real_excepthook(exc_type, value, tb)
    excepthook.__wrapped__ = real_excepthook
    sys.excepthook = excepthook
    real_unraisable = getattr(sys, "unraisablehook", None)
    if real_unraisable is not None:
        def unraisablehook(unraisable):
            _record(getattr(unraisable, "exc_value", None), "unraisable")
            return real_unraisable(unraisable)
        unraisablehook.__wrapped__ = real_unraisable
        sys.unraisablehook = unraisablehook
    # right after their first import: most scripts import them long after start-up, and
    # importing them here would change the run
    when_imported("traceback", _patch_traceback)
    when_imported("threading", _patch_threading)
    when_imported("rich.traceback", _patch_rich_traceback)
    reprobot_run_started()


def reprobot_run_started():
    """An empty file says "the recorder ran", even when nothing was raised. A warm interpreter's
    child calls this once it has taken its run's environment."""
    path = os.environ.get(_ENV)
    if path:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
        except OSError:
            pass


_TRACE_LAUNCHER = "REPROBOT_TRACE_LAUNCHER"
_traced = []


def reprobot_trace_child():
    """In a child of a traced run (reducer/analysis/trace.py: its launcher put its own path and the
    script's in the environment, which every child inherits), install the same tracer before the
    child runs any of the script, so the lines only a child ran count as executed. Nothing at
    all happens outside traced runs."""
    launcher = os.environ.get(_TRACE_LAUNCHER)
    if not launcher or _traced or not os.environ.get("REPROBOT_TRACE_OUT") \
            or not os.environ.get("REPROBOT_TRACE_SCRIPT"):
        return
    _traced.append(launcher)
    try:
        with open(launcher, encoding="utf-8") as f:
            code = compile(f.read(), launcher, "exec")
        exec(code, {"__name__": "_reprobot_trace_child", "__file__": launcher,
                    "__builtins__": __builtins__, "_REPROBOT_TRACE_CHILD": True})
    except BaseException:
        pass


def reprobot_child_started():
    """A warm interpreter's spawn child (reducer/run/zygote_children.py) calls this once it has
    taken the environment its parent gave it: what a cold child's start-up did here."""
    reprobot_run_started()
    reprobot_trace_child()


def _chain_user_sitecustomize():
    """Run the sitecustomize this one shadows (a user's, or the distribution's), as Python would."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.modules.pop("sitecustomize", None)
    kept = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401  (the next one on sys.path, if any)
    except ImportError as exc:
        if getattr(exc, "name", None) != "sitecustomize":
            raise
    finally:
        sys.path[:] = kept
        sys.modules.pop("sitecustomize", None)
        if saved is not None:
            sys.modules["sitecustomize"] = saved


def _record_devices():
    """At exit, while REPROBOT_DEVICES names a file: which GPUs this process's torch held memory
    on (reducer/run/devices.py). Never imports torch, never initialises CUDA."""
    path = os.environ.get("REPROBOT_DEVICES")
    if not path:
        return
    try:
        row = {"pid": os.getpid(), "cuda": False, "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
        cuda = getattr(sys.modules.get("torch"), "cuda", None)
        if cuda is not None and cuda.is_initialized():
            count = cuda.device_count()
            row.update(cuda=True, count=count, used=[
                i for i in range(count) if cuda.max_memory_allocated(i) > 0 or cuda.memory_reserved(i) > 0])
        append_json_line(path, row)
    except BaseException:
        pass


def _record_modules():
    """At exit, while REPROBOT_MODULES_OUT names a file: the top-level names of the modules this
    process loaded, one JSON line per process (every rank of a launch line writes its own), for
    the lockfile's roots (bot/env/lockfile.py)."""
    path = os.environ.get("REPROBOT_MODULES_OUT")
    if not path:
        return
    try:
        names = sorted({str(m).split(".", 1)[0] for m in list(sys.modules) if m})
        append_json_line(path, {"pid": os.getpid(), "modules": names})
    except BaseException:
        pass


try:
    _install()
except BaseException:
    pass
try:
    import atexit
    # Registered first, so they run last: after the script's own atexit handlers.
    atexit.register(_record_devices)
    atexit.register(_record_modules)
except BaseException:
    pass
if os.environ.get("REPROBOT_HANG_AFTER"):
    # --hang-after: reprobot sends SIGUSR1 to a run that made no progress for that long, and
    # every process of it (children inherit this through the environment, forks the handler)
    # dumps all its threads' stacks; reducer/failure/tracebacks.py hang_record reads them.
    try:
        import faulthandler
        import signal
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except BaseException:
        pass
if os.environ.get("REPROBOT_RENDEZVOUS"):
    # This run's own rendezvous port and file (reducer/run/rendezvous.py).
    try:
        import reprobot_rendezvous  # noqa: F401
    except BaseException:
        pass
reprobot_trace_child()
_chain_user_sitecustomize()
