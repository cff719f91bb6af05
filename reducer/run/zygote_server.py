"""The warm interpreter: runs in the USER's interpreter (stdlib only, Python >= 3.9).

It imports the heavy modules a script imports once, then forks one child per candidate, the
next one while the current one runs (it waits for its request on a socket of its own). The
child is made to look like a cold `python script.py` run: its own session and process group,
stdout/stderr on the pipes reprobot passed in, stdin on /dev/null, the run's cwd, environment,
argv and sys.path[0], and the script executed as ``__main__`` with the interpreter's own exit
behaviour (exit codes, uncaught tracebacks, atexit, non-daemon threads joined).

Protocol over a SOCK_SEQPACKET socket inherited as fd argv[1], one JSON object per packet:
  server -> {"ready": true, "imported": [...], "failed": [[name, why]...], "threads": n}
         or {"ready": false, "why": "...", "cuda_initialized_by": name}
  client -> {"script": path, "args": [...], "cwd": dir, "env": {...}, "limits": {"NPROC": n, ...},
             "cgroup": the cgroup.procs file of the run's pids cgroup, or null}
            with fds [stdout, stderr]
  server -> {"pid": n}, then {"pid": n, "returncode": rc, "children": {"warm": n, "cold": n, "why_cold": [...]}}
            when the child has ended (children: its spawn/forkserver children, zygote_children.py):
            it reported its exit status after the script, its atexit handlers and its streams were
            done, and is exiting; or it died without a report (a signal, os._exit) and was reaped
Closing the socket stops the server.
"""
import importlib
import json
import os
import resource
import socket
import sys

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """A zygote (and its children) must not outlive the process that started it."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except Exception:
        pass


def _cuda_initialized():
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


_HEAVY = {"torch", "transformers", "peft", "accelerate", "bitsandbytes", "diffusers", "trl", "datasets",
          "vllm", "deepspeed", "xformers", "flash_attn", "torchvision", "torchaudio", "timm", "optimum"}


def _gpus_visible():
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return torch.cuda.device_count() > 0  # through NVML here (PYTORCH_NVML_BASED_CUDA_CHECK)
    except Exception:
        return False


def _fork_can_use_cuda():
    """Whether a child forked now can still initialise CUDA: the driver does not survive a fork
    once something in the parent called into it, whether or not torch knows."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import torch
            torch.empty(1, device="cuda")
            torch.cuda.synchronize()
            code = 0
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


_FIRST_CUDA_INIT = []   # where CUDA was first initialised during the imports (file:function, innermost last)


def _guard_cuda():
    """Once torch is imported: answer the compute-capability question that libraries ask at
    import time (bitsandbytes picks its native library that way) from NVML, which does not
    initialise CUDA, and record who initialises CUDA anyway."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(torch.cuda, "_reprobot_guarded", False):
        return
    torch.cuda._reprobot_guarded = True
    try:
        import pynvml  # nvidia-ml-py; absent on most CPU machines, where nothing needs guarding
        pynvml.nvmlInit()
    except Exception:
        pynvml = None
    real_capability = torch.cuda.get_device_capability

    def get_device_capability(device=None):
        if pynvml is None or torch.cuda.is_initialized():
            return real_capability(device)
        try:
            index = torch.cuda._get_device_index(device, optional=True)
            if index < 0:
                index = 0
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            if visible:
                index = int(visible.split(",")[index])
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            return tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle))
        except Exception:
            return real_capability(device)

    torch.cuda.get_device_capability = get_device_capability
    real_lazy_init = torch.cuda._lazy_init

    def _lazy_init():
        if not _FIRST_CUDA_INIT and not torch.cuda.is_initialized():
            import traceback
            _FIRST_CUDA_INIT.extend("%s:%s" % (os.path.basename(f.filename), f.name)
                                    for f in traceback.extract_stack()[-8:-1])
        return real_lazy_init()

    torch.cuda._lazy_init = _lazy_init


def _send(sock, obj, fds=()):
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def _user_frames_only(tb, script):
    """Drop the frames of this file and runpy above the script's first frame, so a warm
    traceback reads exactly as a cold one."""
    first = tb
    while first is not None and os.path.abspath(first.tb_frame.f_code.co_filename) != script:
        first = first.tb_next
    return first if first is not None else tb


def _run_script(req):
    import runpy
    script = os.path.abspath(req["script"])
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = _EXIT.exit_code_of(exc)
    except BaseException as exc:
        tb = _user_frames_only(exc.__traceback__, script)
        exc.__traceback__ = tb
        sys.excepthook(type(exc), exc, tb)
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    _EXIT.finish()  # what the interpreter does on its way out (zygote_exit.py)
    return code


def _apply_limits(limits):
    """The run's rlimits (reducer/run/limits.py, which a cold run applies before exec), set before
    any of the script runs; never above a hard limit already in force."""
    for name, value in limits.items():
        which = getattr(resource, "RLIMIT_" + name, None)
        if which is None:
            continue
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, hard))
        except (ValueError, OSError):
            pass


def _enter_cgroup(procs):
    """Into the run's pids cgroup (reducer/run/guard.py) before any of the script runs: its spawn
    children and daemons are counted and killed with it."""
    if not procs:
        return
    try:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # the runner counts the run's process group instead


def _load(name, filename):
    """A module of ours next to this file, by path (reprobot's package is not importable here)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _load_children():
    """reducer/run/zygote_children.py, next to this file: warm spawn children (None if it fails)."""
    try:
        return _load("_reprobot_zygote_children", "zygote_children.py")
    except Exception:
        return None


_CHILDREN = None
_EXIT = None     # zygote_exit.py


def _child(req, fds, stats_fd):
    """The candidate C: becomes the run (its session, streams, limits, cwd, environment, argv),
    runs the script, and reports how it ended on ``stats_fd`` before it exits."""
    code = 1
    children = None
    me = os.getpid()
    try:
        os.setsid()
        out_fd, err_fd = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (null, out_fd, err_fd):
            if fd > 2:
                os.close(fd)
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _enter_cgroup(req.get("cgroup"))
        _apply_limits(req.get("limits") or {})
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        recorder = getattr(sys.modules.get("sitecustomize"), "reprobot_run_started", None)
        if recorder is not None:  # reprobot's exception recorder (reducer/run/exception_hook)
            recorder()
        script = os.path.abspath(req["script"])
        sys.argv = [req["script"]] + list(req["args"])
        sys.path[0] = os.path.dirname(script)
        tempfile = sys.modules.get("tempfile")
        if tempfile is not None:
            tempfile.tempdir = None  # a cold run computes it from this run's TMPDIR
        if os.environ.get("PYTHONFAULTHANDLER"):
            import faulthandler
            faulthandler.enable()
        # the script to look at: a traced run's launcher (reducer/analysis/trace.py) runs the one after it
        looked_at = [script] + [a for a in req["args"][:1] if a.endswith(".py")]
        if _CHILDREN is not None and _CHILDREN.may_spawn(looked_at):
            # spawn / forkserver children of the script start from this warm image too
            try:
                if _CHILDREN.start(disabled=os.environ.get("REPROBOT_WARM_CHILDREN") == "0",
                                   close_in_child=[stats_fd]):
                    children = _CHILDREN
            except Exception:
                children = None
        code = _run_script(req)
    finally:
        if os.getpid() == me:  # not a process the script forked that came back out of it
            _report(stats_fd, code, children.stats() if children is not None else {})
        os._exit(code)


def _report(stats_fd, code, children):
    """Tell the zygote how the run ended, once nothing of it is left to run, and let go of the
    run's streams first: the zygote answers at once, and the run's output ends here, not when the
    kernel has finished tearing this torch-sized process down (tens of milliseconds, more under
    load). One write below PIPE_BUF, so the zygote reads all of it or none."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    except OSError:
        pass
    data = json.dumps({"returncode": code, "children": children}).encode()
    if len(data) > 4000:
        data = json.dumps({"returncode": code, "children": dict(children, why_cold=[])}).encode()
    try:
        os.write(stats_fd, data)
    except OSError:
        pass


def _prefork(sock):
    """Fork the next candidate now, ahead of its request (serve() does it while the current one
    runs): it waits for its request on a socket of its own, so that a request finds C ready
    instead of waiting for a fork of the whole warm image. (pid, socket to it, read end of its
    report pipe)."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stats_r, stats_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            sock.close()
            ours.close()
            os.close(stats_r)
            _die_with_parent()
            data, fds, _flags, _addr = socket.recv_fds(theirs, 1 << 20, 4)
            theirs.close()
            req = json.loads(data.decode()) if data else None
        except BaseException:
            req = None
        if req is None:
            os._exit(0)  # the zygote stopped
        _child(req, fds, stats_w)  # never returns
    theirs.close()
    os.close(stats_w)
    return pid, ours, stats_r


def _discard(ready):
    pid, chan, stats_r = ready
    chan.close()  # it reads EOF and exits
    os.close(stats_r)
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass


def _wait_for(pid, stats_r):
    """(returncode, children, reaped): from C's own report when it wrote one (see ``_report``),
    else from waitpid (a signal, os._exit in the script, a report that did not come)."""
    report = None
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None  # Linux < 5.3, or not Linux: waitpid, then the report
    if pidfd is not None:
        import select
        poller = select.poll()
        poller.register(stats_r, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        try:
            while report is None:
                ready = dict(poller.poll())
                if stats_r in ready:
                    data = os.read(stats_r, 1 << 16)
                    if not data:
                        break  # every writer gone without a word
                    report = _parsed(data)
                elif pidfd in ready:
                    break
        finally:
            os.close(pidfd)
    if report is not None and isinstance(report.get("returncode"), int):
        os.close(stats_r)
        return report["returncode"], report.get("children") or {}, False
    _, status = os.waitpid(pid, 0)
    if report is None:
        # written just before it exited; a child still running may hold the pipe open, so no
        # waiting for its end
        os.set_blocking(stats_r, False)
        try:
            report = _parsed(os.read(stats_r, 1 << 16))
        except OSError:
            report = {}
    os.close(stats_r)
    return os.waitstatus_to_exitcode(status), (report or {}).get("children") or {}, True


def _parsed(data):
    try:
        out = json.loads(data.decode() or "{}")
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


class _EnvReads:
    """While the zygote imports the script's modules: which module read which environment variable
    (through os.environ, os.getenv or a walk over the whole environment). A warm spawn child needs
    a cold start only for a change of one of these (zygote_children.import_time_reader)."""

    def __init__(self):
        self.reads = {}
        self.saved = {}

    def _reader(self):
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if name not in ("os", "_collections_abc", "collections.abc", __name__) and \
                    not name.startswith("importlib"):
                return name or "?"
            frame = frame.f_back
        return "?"

    def __enter__(self):
        cls = type(os.environ)
        me = self

        def getitem(env, key, _real=cls.__getitem__):
            me.reads.setdefault(str(key), me._reader())
            return _real(env, key)

        def contains(env, key, _real=cls.__contains__):
            me.reads.setdefault(str(key), me._reader())
            return _real(env, key)

        def iterate(env, _real=cls.__iter__):
            me.reads.setdefault("*", me._reader())
            return _real(env)
        for attr, fn in (("__getitem__", getitem), ("__contains__", contains), ("__iter__", iterate)):
            self.saved[attr] = cls.__dict__.get(attr)
            setattr(cls, attr, fn)
        return self

    def __exit__(self, *exc):
        cls = type(os.environ)
        for attr, fn in self.saved.items():
            if fn is None:
                delattr(cls, attr)
            else:
                setattr(cls, attr, fn)
        return False


def _native_reads():
    """Native runtimes loaded in the warm image (its memory map) and the prefixes they read."""
    out = {}
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        return out
    for lib, prefixes in getattr(_CHILDREN, "_NATIVE", ()):
        if lib in maps:
            for prefix in prefixes:
                out.setdefault(prefix, lib)
    return out


def serve(sock, modules):
    imported, failed = [], []
    reads = _EnvReads()
    with reads:
        _import_all(sock, modules, imported, failed)
    if _CHILDREN is not None:
        # only what was read while the modules were imported: the run's own reads come later
        _CHILDREN.IMPORT_READS.update(reads.reads)
        _CHILDREN.NATIVE_READS.update(_native_reads())
    return _serve_requests(sock, imported, failed)


def _import_all(sock, modules, imported, failed):
    for name in modules:
        module, _, attrs = name.partition(":")
        try:
            mod = importlib.import_module(module)
        except BaseException as exc:  # a module that fails here fails (or not) in the child too
            failed.append([name, ("%s: %s" % (type(exc).__name__, exc))[:200]])
            continue
        for attr in filter(None, attrs.split(",")):
            try:
                getattr(mod, attr)  # `from module import attr`: a lazy module loads its code here
            except BaseException:  # noqa: BLE001 - the child meets the same error itself
                pass
        _guard_cuda()
        poisoned = _cuda_initialized() or (
            module.split(".")[0] in _HEAVY and _gpus_visible() and not _fork_can_use_cuda())
        if poisoned:
            _send(sock, {"ready": False, "cuda_initialized_by": name, "first_cuda_init": _FIRST_CUDA_INIT,
                         "why": "importing %s initialised CUDA; a forked child could not use the GPU" % name})
            imported[:] = [None]
            return
        imported.append(name)


def _serve_requests(sock, imported, failed):
    if imported == [None]:
        return 3
    threading = sys.modules.get("threading")
    threads = threading.active_count() if threading is not None else 1
    _send(sock, {"ready": True, "imported": imported, "failed": failed, "threads": threads,
                 "cuda_initialized": _cuda_initialized(), "gpus": _gpus_visible()})
    ready = None
    exited = []   # candidates that reported and are still being torn down: reaped later
    while True:
        if ready is None:
            ready = _prefork(sock)
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            _discard(ready)
            return 0
        pid, chan, stats_r = ready
        ready = None
        try:
            socket.send_fds(chan, [data], fds)
        except OSError:
            # the one made ahead is gone (killed from outside): one made now takes the request
            _discard((pid, chan, stats_r))
            pid, chan, stats_r = _prefork(sock)
            socket.send_fds(chan, [data], fds)
        chan.close()
        for fd in fds:
            os.close(fd)
        _send(sock, {"pid": pid})
        # the next candidate is forked while this one runs: a fork of the warm image costs the
        # same CPU whenever it is made, and made now it is not on the next request's path
        ready = _prefork(sock)
        returncode, children, reaped = _wait_for(pid, stats_r)
        _send(sock, {"pid": pid, "returncode": returncode, "children": children})
        if not reaped:
            exited.append(pid)
        exited = [p for p in exited if not _reaped(p)]


def _reaped(pid):
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


def main(argv):
    global _CHILDREN, _EXIT
    _die_with_parent()
    _EXIT = _load("_reprobot_zygote_exit", "zygote_exit.py")
    _CHILDREN = _load_children()
    sock = socket.socket(fileno=int(argv[1]))
    # Imports resolve from site-packages, never from reprobot's own folder.
    sys.path[0] = os.getcwd()
    return serve(sock, argv[2:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
