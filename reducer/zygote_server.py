"""The warm interpreter: runs in the USER's interpreter (stdlib only, Python >= 3.9).

It imports the heavy modules a script imports once, then forks one child per candidate. The
child is made to look like a cold `python script.py` run: its own session and process group,
stdout/stderr on the pipes reprobot passed in, stdin on /dev/null, the run's cwd, environment,
argv and sys.path[0], and the script executed as ``__main__`` with the interpreter's own exit
behaviour (exit codes, uncaught tracebacks, atexit, non-daemon threads joined).

Protocol over a SOCK_SEQPACKET socket inherited as fd argv[1], one JSON object per packet:
  server -> {"ready": true, "imported": [...], "failed": [[name, why]...], "threads": n}
         or {"ready": false, "why": "...", "cuda_initialized_by": name}
  client -> {"script": path, "args": [...], "cwd": dir, "env": {...}, "limits": {"NPROC": n, ...}}
            with fds [stdout, stderr]
  server -> {"pid": n}, then {"pid": n, "returncode": rc, "children": {"warm": n, "cold": n, "why_cold": [...]}}
            when the child has exited (children: its spawn/forkserver children, zygote_children.py)
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


def _exit_code_of(exc):
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


def _run_script(req):
    import runpy
    script = os.path.abspath(req["script"])
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code_of(exc)
    except BaseException as exc:
        tb = _user_frames_only(exc.__traceback__, script)
        exc.__traceback__ = tb
        sys.excepthook(type(exc), exc, tb)
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    # What the interpreter does on its way out: join non-daemon threads, run atexit handlers.
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_shutdown"):
        try:
            threading._shutdown()
        except BaseException:
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
    return code


def _apply_limits(limits):
    """The run's rlimits (reducer/limits.py, which a cold run applies before exec), set before
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


def _load_children():
    """reducer/zygote_children.py, next to this file: warm spawn children (None if it fails)."""
    try:
        import importlib.util
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote_children.py")
        spec = importlib.util.spec_from_file_location("_reprobot_zygote_children", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    except Exception:
        return None


_CHILDREN = None


def _child(req, fds, sock, stats_fd=None):
    code = 1
    children = None
    try:
        sock.close()
        os.setsid()
        _die_with_parent()
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
        _apply_limits(req.get("limits") or {})
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        recorder = getattr(sys.modules.get("sitecustomize"), "reprobot_run_started", None)
        if recorder is not None:  # reprobot's exception recorder (reducer/exception_hook)
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
        # the script to look at: a traced run's launcher (reducer/trace.py) runs the one after it
        looked_at = [script] + [a for a in req["args"][:1] if a.endswith(".py")]
        if _CHILDREN is not None and _CHILDREN.may_spawn(looked_at):
            # spawn / forkserver children of the script start from this warm image too
            try:
                if _CHILDREN.start(disabled=os.environ.get("REPROBOT_WARM_CHILDREN") == "0",
                                   close_in_child=[stats_fd] if stats_fd is not None else []):
                    children = _CHILDREN
            except Exception:
                children = None
        code = _run_script(req)
    finally:
        if stats_fd is not None:
            try:
                os.write(stats_fd, json.dumps(children.stats() if children is not None else {}).encode())
            except Exception:
                pass
        os._exit(code)


def serve(sock, modules):
    imported, failed = [], []
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
            return 3
        imported.append(name)
    threading = sys.modules.get("threading")
    threads = threading.active_count() if threading is not None else 1
    _send(sock, {"ready": True, "imported": imported, "failed": failed, "threads": threads,
                 "cuda_initialized": _cuda_initialized(), "gpus": _gpus_visible()})
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
        except OSError:
            return 0
        if not data:
            return 0
        req = json.loads(data.decode())
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        stats_r, stats_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(stats_r)
            _child(req, fds, sock, stats_w)
        os.close(stats_w)
        for fd in fds:
            os.close(fd)
        _send(sock, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        # what the candidate's spawned children were started from (written just before it exited;
        # a child still running may hold the pipe open, so no waiting for its end)
        os.set_blocking(stats_r, False)
        try:
            children = json.loads(os.read(stats_r, 1 << 16).decode() or "{}")
        except (OSError, ValueError):
            children = {}
        os.close(stats_r)
        _send(sock, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status), "children": children})


def main(argv):
    global _CHILDREN
    _die_with_parent()
    _CHILDREN = _load_children()
    sock = socket.socket(fileno=int(argv[1]))
    # Imports resolve from site-packages, never from reprobot's own folder.
    sys.path[0] = os.getcwd()
    return serve(sock, argv[2:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
