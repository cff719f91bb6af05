"""Warm children: a candidate's spawn / forkserver children start from the warm image too.

Runs in the USER's interpreter, loaded by zygote_server.py (stdlib only, Python >= 3.9).

A candidate forked by the zygote (call it C) runs the script; a child it starts with the
``spawn`` or ``forkserver`` start method (a ``multiprocessing`` Process or Pool,
``ProcessPoolExecutor(mp_context=...)``, ``torch.multiprocessing.spawn``, DataLoader workers
with a spawn context) would exec a fresh ``python -c 'from multiprocessing.spawn import
spawn_main; ...' --multiprocessing-fork`` and import torch/transformers again, cold.

Instead, before the script runs, C forks a *child zygote* Z: a pristine copy of the warm
image (the zygote's imports, the run's environment, cwd and rlimits; nothing the script did),
and becomes a child subreaper. Z is the first of a chain of spares (see ``_serve``). ``multiprocessing.util.spawnv_passfds`` is wrapped in C: when
it is asked to exec this interpreter with a spawn / forkserver command line, C sends Z the
command line, its current environment and cwd, and the fds the child must have (0, 1, 2 and
the ones spawn passes), by SCM_RIGHTS. The spare that takes the request answers with its own
pid (C goes on at once), leaves a copy of itself behind for C's next spawn, and becomes the
child W. Every spare is C's own child (the first one C forked; each next one was double-forked
by the one before and reparented to C, the subreaper), so ``os.waitpid`` in multiprocessing's
Popen, the sentinel pipe, ``kill``/``terminate`` all work as with a real spawn. W makes itself look
like the freshly exec'd interpreter: the same fd numbers (and no others of C's), C's process
group, environment and cwd, ``sys.argv`` of ``-c``, a fresh empty ``__main__`` (so spawn
re-imports the script as ``__mp_main__``: module-level code runs again, the ``__main__``
block does not, nothing of the parent's state is there), and runs the ``-c`` code with the
interpreter's exit behaviour (exit code, uncaught traceback, atexit, threads joined).

CUDA: the zygote never initialises it, and neither does Z, so W initialises it itself.

It is an optimisation only, with the real spawn as the fallback on any doubt: another
executable, a command line that is not multiprocessing's, a call from another process than C
(a fork-started worker), an environment changed in a variable read at import time (threads,
CUDA, the HF stack's settings), Z gone, or any error.
"""
import json
import os
import socket
import sys

# sitecustomize imported it already (the recorder's folder is on every run's PYTHONPATH)
from reprobot_after_import import when_imported

# The -c programs multiprocessing execs for a child that runs user code.
_PROGRAMS = ("from multiprocessing.spawn import spawn_main", "from multiprocessing.forkserver import main")
# Variables a library may read while it is imported (the zygote imported it with the run's
# initial environment): when a module that read nothing but the whole environment is in the warm
# image, a change to one of these before the spawn sends the child cold.
_IMPORT_TIME = ("OMP_", "MKL_", "OPENBLAS_", "KMP_", "GOMP_", "CUDA_", "NVIDIA_", "PYTORCH_", "TORCH_",
                "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "DIFFUSERS_", "ACCELERATE_",
                "BNB_", "BITSANDBYTES_", "XLA_", "LD_", "PYTHON", "NUMEXPR_", "VECLIB_", "TRITON_")
# ...except those only read when something runs (torch.distributed's rendezvous).
_RUNTIME = {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT",
            "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER"}
# ...and those a running process can still be given as a fresh interpreter would have read them:
# OpenMP's thread count, which libgomp reads when it is loaded and torch's ``set_num_threads`` sets
# later (what torch's intra-op pool then uses, as in a child that imported torch with it). Applied
# in the warm child (``_apply_runtime``) when torch is in the warm image; otherwise the child is
# cold, as for any other variable read at import. And torch.distributed's debug level, which its
# import reads (``set_debug_level_from_env``) and which that function reads again; and
# transformers' log level, which its logging module reads at import (``set_verbosity`` again).
_SET_AT_RUNTIME = {"OMP_NUM_THREADS", "TORCH_DISTRIBUTED_DEBUG", "TRANSFORMERS_VERBOSITY"}
# Read before any module: by the interpreter at its start (a spawn child's own start) and by the
# dynamic loader. The warm child's interpreter started long ago, so a change is never seen warm.
_STARTUP = ("PYTHONPATH", "PYTHONHOME", "PYTHONHASHSEED", "PYTHONSAFEPATH", "PYTHONNOUSERSITE",
            "PYTHONOPTIMIZE", "PYTHONWARNINGS", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDONTWRITEBYTECODE",
            "PYTHONMALLOC", "PYTHONDEVMODE", "PYTHONPLATLIBDIR", "PYTHONINTMAXSTRDIGITS", "LD_")
# Native runtimes read their variables (from C, where no Python hook sees it) when they are loaded:
# a shared library's name in the warm image's memory map -> the prefixes it reads then.
_NATIVE = (("libgomp", ("OMP_", "GOMP_")), ("libiomp", ("KMP_", "OMP_")), ("libomp", ("KMP_", "OMP_")),
           ("libmkl", ("MKL_",)), ("libopenblas", ("OPENBLAS_", "GOTO_")), ("libnvidia-ml", ("CUDA_",)),
           ("libcuda.", ("CUDA_",)))

# What the modules of the warm image read of the environment while they were imported, filled in
# by the zygote (zygote_server.py) before it forks anything: variable -> the module that read it
# first; "*" -> a module that went through the whole environment; native prefixes -> library.
IMPORT_READS = {}
NATIVE_READS = {}
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

_state = {"owner": None, "sock": None, "env": None, "warm": 0, "cold": 0, "why_cold": []}
_lock = None   # threading.Lock() once C serves children (not imported before that: a cold run may not)
_real_spawnv_passfds = None


def _prctl(option, value):
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except Exception:
        return False


def _debug(*what):
    path = os.environ.get("REPROBOT_CHILDREN_DEBUG")
    if path:
        import time
        with open(path, "a") as f:
            f.write("%.3f %d %s\n" % (time.time(), os.getpid(), " ".join(map(str, what))))


def stats():
    return {"warm": _state["warm"], "cold": _state["cold"], "why_cold": _state["why_cold"][:5]}


# Words of a script that may start a spawn / forkserver child, itself or through a library it
# drives (a Trainer's or DataLoader's workers, datasets' num_proc, accelerate's launchers). A
# script without any of them gets no child zygote (a fork less per candidate); should it spawn
# anyway, its children start cold, as they would without this module.
_MAY_SPAWN = ("multiprocessing", "spawn", "forkserver", "ProcessPool", "num_workers", "num_proc", "Trainer",
              "accelerate", "launch", "concurrent", "DataLoader", "torchrun", "start_method", "mp.")


def may_spawn(paths):
    """Whether any of these files (the script; a traced run's script too) mentions one of them."""
    for path in paths:
        try:
            with open(path, "rb") as f:
                text = f.read(4 << 20).decode("utf-8", "replace")
        except OSError:
            continue
        if any(word in text for word in _MAY_SPAWN):
            return True
    return False


# ---- in C: start the child zygote, route spawns to it ------------------------------------------
def start(disabled=False, close_in_child=()):
    """Called in C once the run is set up and before the script runs. Returns True when spawned
    children will be served warm. ``close_in_child``: C's fds Z must not hold."""
    if disabled or not hasattr(socket, "send_fds"):
        return False
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1):
        return False  # W could not be C's child: leave spawn alone
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    # before the fork: the spares (and every warm child) compare against the same start
    _state.update(env=dict(os.environ), torch="torch" in sys.modules)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            ours.close()
            for fd in close_in_child:
                os.close(fd)
            _serve(theirs)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    theirs.close()
    global _lock
    import threading
    _lock = threading.Lock()
    _state.update(owner=os.getpid(), sock=ours)
    _install_patch()
    return True


def _install_patch():
    # Wraps ``multiprocessing.util.spawnv_passfds`` right after that module's first import
    # (importing it here would register its atexit handler in a script that never uses it).
    when_imported("multiprocessing.util", _patch)


def _patch(util):
    global _real_spawnv_passfds
    real = getattr(util, "spawnv_passfds", None)
    if real is None or getattr(real, "_reprobot", False):
        return
    _real_spawnv_passfds = real

    def spawnv_passfds(path, args, passfds):
        pid, why = _warm_spawn(path, args, passfds)
        if pid is not None:
            return pid
        if why is not None and _lock is not None:
            with _lock:
                _state["cold"] += 1
                if why not in _state["why_cold"]:
                    _state["why_cold"].append(why)
        return real(path, args, passfds)

    spawnv_passfds.__wrapped__ = real
    spawnv_passfds._reprobot = True
    spawnv_passfds.__name__ = real.__name__
    spawnv_passfds.__doc__ = real.__doc__
    util.spawnv_passfds = spawnv_passfds


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except (OSError, TypeError, ValueError):
        return False


def import_time_reader(key):
    """Who in the warm image read ``key`` while it was being set up, or None: the child can then
    take a changed value as a spawned interpreter would, since nothing warm has seen it."""
    if key.startswith(_STARTUP):
        return "the interpreter (at its start)"
    if key in IMPORT_READS:
        return IMPORT_READS[key]
    for prefix, lib in NATIVE_READS.items():
        if key.startswith(prefix):
            return lib
    if "*" in IMPORT_READS and key.startswith(_IMPORT_TIME) and key not in _RUNTIME:
        return IMPORT_READS["*"] + " (it read the whole environment)"
    return None


def _settable(key, value):
    """Whether the warm child can take ``key=value`` itself (``_SET_AT_RUNTIME``)."""
    if key == "TORCH_DISTRIBUTED_DEBUG":
        return True     # read again below where torch.distributed is warm, else at its import
    if key == "TRANSFORMERS_VERBOSITY":
        # transformers' logging read it at import for its default level; a level it knows is set
        # again below (one it does not know it would only have warned about)
        logs = sys.modules.get("transformers.utils.logging")
        return logs is None or value is None or value.lower() in getattr(logs, "log_levels", {})
    return key in _SET_AT_RUNTIME and bool(_state.get("torch")) and (value or "").isdigit() and int(value) > 0


def _apply_runtime(env, before):
    """In the warm child: the changed variables ``_settable`` allowed, given to the running image."""
    value = env.get("OMP_NUM_THREADS")
    if value != before.get("OMP_NUM_THREADS") and _settable("OMP_NUM_THREADS", value):
        sys.modules["torch"].set_num_threads(int(value))
    dist = sys.modules.get("torch.distributed")
    if env.get("TORCH_DISTRIBUTED_DEBUG") != before.get("TORCH_DISTRIBUTED_DEBUG") and dist is not None:
        dist.set_debug_level_from_env()
    logs = sys.modules.get("transformers.utils.logging")
    if env.get("TRANSFORMERS_VERBOSITY") != before.get("TRANSFORMERS_VERBOSITY") and logs is not None:
        value = (env.get("TRANSFORMERS_VERBOSITY") or "").lower()
        logs.set_verbosity(logs.log_levels.get(value, getattr(logs, "_default_log_level", 30)))


def _env_change(env, before):
    """The first variable the parent changed that the warm image already read, with its reader."""
    for key in sorted(set(env) | set(before)):
        if env.get(key) != before.get(key) and not _settable(key, env.get(key)):
            reader = import_time_reader(key)
            if reader is not None:
                return key, reader
    return None


def _warm_spawn(path, args, passfds):
    """(pid, None) when Z started the child, else (None, why not)."""
    try:
        if os.getpid() != _state["owner"] or _state["sock"] is None:
            return None, "started by a forked worker"  # W would not be its child
        if not (_same_file(path, sys.executable) and args and _same_file(args[0], sys.executable)):
            return None, "another executable"
        args = [str(a) for a in args]
        if "-c" not in args[1:]:
            return None, "not a multiprocessing command line"
        i = args.index("-c", 1)
        if i + 1 >= len(args) or not args[i + 1].startswith(_PROGRAMS):
            return None, None  # the resource tracker, say: no user code, nothing to warm
        env = dict(os.environ)
        changed = _env_change(env, _state["env"])
        if changed:
            return None, "%s changed before the child started, and %s read it when imported" % changed
        fds = sorted(set(int(fd) for fd in passfds))
        req = {"code": args[i + 1], "argv": ["-c"] + args[i + 2:], "orig_argv": args, "env": env,
               "cwd": os.getcwd(), "fds": fds, "pgid": os.getpgrp()}
        with _lock:
            sock = _state["sock"]
            socket.send_fds(sock, [json.dumps(req).encode()], [0, 1, 2] + fds)
            data = sock.recv(1 << 16)
            if not data:
                _state["sock"] = None
                return None, "the child zygote exited"
            reply = json.loads(data.decode())
            if "pid" not in reply:
                return None, reply.get("why") or "the child zygote refused"
            _state["warm"] += 1
            return int(reply["pid"]), None
    except Exception as exc:  # noqa: BLE001 - any doubt: the real spawn
        return None, "%s: %s" % (type(exc).__name__, exc)


# ---- in Z: a chain of spares, each of them C's own child, each becoming one W ------------------
def _serve(sock):
    """Z, forked by C: the first spare. A spare waits for its turn, takes one request, answers with
    its OWN pid (C goes on at once), leaves a successor behind (a double fork, so that the
    successor is reparented to C, the subreaper), hands the socket over, and becomes that W."""
    _prctl(_PR_SET_PDEATHSIG, 9)  # dies with C
    os.setpgid(0, 0)  # its own group: spares' memory is not the run's (group_usage), and C's group kill misses them
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # hold none of the run's pipes open
    os.close(null)
    owner = os.getppid()
    baton = None
    while True:
        if baton is not None:  # a successor: wait until the spare before took its request
            try:
                os.read(baton, 1)
            except OSError:
                pass
            os.close(baton)
        handover = None
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 22, 256)
            except OSError as exc:
                _debug("recv failed", exc)
                return
            if not data:
                _debug("socket closed")
                return
            _debug("request")
            try:
                req = json.loads(data.decode())
                if len(fds) != 3 + len(req["fds"]):
                    raise ValueError("%d fds for %d" % (len(fds), 3 + len(req["fds"])))
            except Exception as exc:  # noqa: BLE001 - C runs the real spawn
                for fd in fds:
                    os.close(fd)
                sock.send(json.dumps({"why": "%s: %s" % (type(exc).__name__, exc)}).encode())
                continue
            sock.send(json.dumps({"pid": os.getpid()}).encode())
            if handover is None:
                # C goes on at once; this spare leaves a copy of itself behind for C's next spawn
                # (one fork on its way: the helper's fork and exit run beside it), then becomes
                # the child. Nothing is prepared ahead: most scripts spawn once, if at all, and a
                # spare made ahead would take the CPU from the children at work (Z making one
                # beside the script's start gave no measurable gain under load, #29).
                _debug("preparing successor after the reply")
                try:
                    baton, handover = _prepare_successor(owner, close=fds, reap_later=_TO_REAP)
                except OSError:
                    baton, handover = None, None  # no successor (RLIMIT_NPROC, say): C's next ask finds
                    # the socket closed and runs the real spawn; this child still starts
                if baton == -1:
                    return
                if baton is not None and handover is None:
                    break  # the successor: back to the top, to wait for its turn
            if handover is not None:
                os.close(handover)  # the successor's turn
            _debug("becoming the child")
            _become_child(sock, req, fds)  # never returns


_TO_REAP = []   # in a child that prepared its successor on its way: the helper process to reap


def _prepare_successor(owner, close=(), reap_later=None):
    import time
    """(baton read end, None) in the successor; (None, baton write end) in this spare; (-1, None)
    in a successor that finds C gone. ``close``: fds of a request this spare took, which the
    successor must not hold (a sentinel pipe held open never tells C its child ended)."""
    r, w = os.pipe()
    mid = os.fork()
    if mid == 0:  # I: fork the successor, then go, so that it is reparented to C
        code = 0
        try:
            me = os.getpid()
            if os.fork() == 0:
                os.close(w)
                for fd in close:
                    os.close(fd)
                while os.getppid() == me:
                    time.sleep(0.0005)
                _prctl(_PR_SET_PDEATHSIG, 9)
                if os.getppid() != owner:
                    os.close(r)
                    return -1, None
                return r, None
        except BaseException:
            code = 1
        os._exit(code)
    os.close(r)
    if reap_later is None:
        os.waitpid(mid, 0)
    else:
        reap_later.append(mid)  # a child on its way: it does not wait for the helper's own fork
    return None, w


# ---- in W: look like `python -c <code> ...` exec'd by C -----------------------------------------
def _place_fds(received, targets):
    """Give W exactly C's fd numbers for what it passed, and drop Z's own fds."""
    base = max(list(targets) + list(received) + [2]) + 1
    import fcntl
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base) for fd in received]
    for fd in received:
        os.close(fd)
    for src, dst in zip(high, targets):
        os.dup2(src, dst, inheritable=True)
    for fd in high:
        os.close(fd)


def _become_child(sock, req, fds):
    code = 1
    try:
        sock.close()
        try:
            os.setpgid(0, int(req["pgid"]))
        except OSError:
            pass
        _place_fds(list(fds), [0, 1, 2] + [int(fd) for fd in req["fds"]])
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        _apply_runtime(req["env"], _state["env"] or {})
        tempfile = sys.modules.get("tempfile")
        if tempfile is not None:
            tempfile.tempdir = None
        import faulthandler
        if os.environ.get("PYTHONFAULTHANDLER"):
            faulthandler.enable()
        elif faulthandler.is_enabled():
            faulthandler.disable()
        import types
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = sys.modules["builtins"]
        import importlib.machinery
        main.__dict__["__loader__"] = importlib.machinery.BuiltinImporter  # as for -c
        sys.modules["__main__"] = main
        sys.argv = list(req["argv"])
        if hasattr(sys, "orig_argv"):
            sys.orig_argv = list(req["orig_argv"])
        sys.path[0] = ""
        hook = getattr(sys.modules.get("sitecustomize"), "reprobot_child_started", None)
        if hook is not None:  # reprobot's exception recorder, and the tracer of a traced run
            hook()
        for pid in _TO_REAP:
            # the helper that made the next spare exits at once; the fork server waits for any of
            # its children, so it must find none of ours, and a spawn child reaps it at its end
            try:
                os.waitpid(pid, 0 if "forkserver" in req["code"] else os.WNOHANG)
            except OSError:
                pass
        code = _run_program(req["code"], main.__dict__)
        for pid in _TO_REAP:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    finally:
        os._exit(code)


def _run_program(code_text, namespace):
    """``exec`` the -c program as the interpreter would, then what it does on its way out."""
    way_out = sys.modules["_reprobot_zygote_exit"]   # zygote_exit.py, loaded by the zygote
    code = 0
    try:
        exec(compile(code_text, "<string>", "exec"), namespace)
    except SystemExit as exc:
        code = way_out.exit_code_of(exc)
    except BaseException as exc:
        tb = exc.__traceback__
        # drop this file's frame: a cold -c traceback starts at "<string>"
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        sys.excepthook(type(exc), exc, tb or exc.__traceback__)
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    way_out.finish()
    return code
