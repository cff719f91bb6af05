"""The environment probe, and the reprobot-side code that runs it.

The top half of this file is a standalone script: reprobot copies its source into an empty
temporary folder and runs it with the USER's interpreter (``python probe.py OUT.jsonl ...``).
It must therefore run on Python 3.9+, import nothing from reprobot, and survive an
environment where torch, transformers and friends are missing or broken. It writes one JSON
line per finished section to OUT (flushed each time), after a ``begin`` line, so that when a
section crashes the interpreter (segfaulting import, CUDA init hang), reprobot knows which
section it was, records it as failed and re-runs the probe skipping it.

The bottom half (``capture_env``, ``write_env``) is reprobot's side. It never imports the
user's stack; everything it stores goes through the scrubber.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

# ---------------------------------------------------------------------------------------------
# Probe side (runs in the user's interpreter; Python 3.9+, stdlib only).
# ---------------------------------------------------------------------------------------------

# The target packages, whose versions env.json always records (absent ones recorded as absent):
# reprobot's side passes them with --stack from the target registry (bot/targets/), which this
# script cannot import.
STACK = []
# Recorded beside them in every env.json: the libraries every stack stands on.
SUPPORT = ("safetensors", "huggingface_hub", "tokenizers", "numpy")
# Also recorded because one of the System Info commands prints them.
EXTRA = ("deepspeed", "diffusers", "pip", "triton", "torchao", "psutil", "setuptools")
# What reprobot's side adds with --packages: the other distributions each registered target's
# System Info names.
REQUESTED = []
# Imported one by one (each its own section) to record import errors; torch has a section of its
# own, a target may bring one (bitsandbytes: TARGET_SECTIONS), and reprobot's side adds an
# "import:NAME" section per target that asks.
IMPORTED = ("numpy", "safetensors", "huggingface_hub", "tokenizers")
# The targets' own commands whose location `tools` records (`accelerate env` prints its own);
# reprobot's side passes them with --clis.
CLIS = []

# Environment variables worth recording: exact names and prefixes. Values of anything that
# looks like a credential are never read (the name is checked before the value is touched).
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_HOME", "CUDA_PATH",
             "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ENABLE_MPS_FALLBACK", "PYTORCH_NO_CUDA_MEMORY_CACHING",
             "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_ENABLE_HF_TRANSFER",
             "HF_HUB_DISABLE_TELEMETRY", "HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_CACHE",
             "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BNB_CUDA_VERSION",
             "LD_LIBRARY_PATH", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "WORLD_SIZE", "LOCAL_RANK",
             "RANK", "MASTER_ADDR", "MASTER_PORT", "PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG")
ENV_PREFIXES = ("CUDA_", "PYTORCH_", "TORCH_", "HF_", "TRANSFORMERS_", "ACCELERATE_", "PEFT_", "BNB_",
                "NCCL_", "TORCHDYNAMO_", "TORCHINDUCTOR_")
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)


def _err(exc):
    return "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "")


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _metadata():
    import importlib.metadata as md
    return md


def _install_info(dist):
    """How one distribution was installed: PEP 610 direct_url.json and the INSTALLER file."""
    info = {"name": dist.metadata["Name"], "version": dist.version}
    try:
        installer = dist.read_text("INSTALLER")
    except Exception:
        installer = None
    info["installer"] = installer.strip() if installer else None
    kind, direct = "index", None
    try:
        raw = dist.read_text("direct_url.json")
        direct = json.loads(raw) if raw else None
    except Exception as e:
        direct = {"error": _err(e)}
    if direct and "url" in direct:
        url = direct["url"]
        if "vcs_info" in direct:
            vcs = direct["vcs_info"]
            kind = "vcs"
            info["vcs"] = vcs.get("vcs")
            info["commit"] = vcs.get("commit_id")
            info["requested_revision"] = vcs.get("requested_revision")
        elif "dir_info" in direct:
            kind = "editable" if direct["dir_info"].get("editable") else "local-dir"
        elif "archive_info" in direct:
            kind = "archive"
            info["archive_hash"] = direct["archive_info"].get("hash") or \
                (direct["archive_info"].get("hashes") or {}).get("sha256")
        info["url"] = url
        if direct.get("subdirectory"):
            info["subdirectory"] = direct["subdirectory"]
    elif info["installer"] and info["installer"] not in ("pip", "uv"):
        kind = info["installer"]  # conda, poetry, ... : where from is the installer's business
    info["kind"] = kind
    try:
        info["location"] = str(dist.locate_file(""))
    except Exception:
        info["location"] = None
    return info


def section_python():
    impl = sys.implementation
    ver = "%d.%d.%d" % sys.version_info[:3]
    # The values PEP 508 markers are evaluated against, so reprobot can walk dependency trees.
    iv = impl.version
    impl_version = "%d.%d.%d" % (iv.major, iv.minor, iv.micro)
    if iv.releaselevel != "final":
        impl_version += iv.releaselevel[0] + str(iv.serial)
    markers = {
        "implementation_name": impl.name,
        "implementation_version": impl_version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }
    return {
        "version": ver,
        "full_version": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "virtualenv": getattr(sys, "base_prefix", sys.prefix) != sys.prefix,
        "conda": bool(os.environ.get("CONDA_PREFIX")) or os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
        "bits": 64 if sys.maxsize > 2 ** 32 else 32,
        "markers": markers,
    }


def section_platform():
    out = {"platform": platform.platform(), "system": platform.system(), "release": platform.release(),
           "machine": platform.machine()}
    if platform.system() == "Linux":
        out["libc"] = "-".join(platform.libc_ver())
        try:
            with open("/etc/os-release") as fh:
                rel = dict(line.rstrip("\n").split("=", 1) for line in fh if "=" in line)
            out["distro"] = rel.get("PRETTY_NAME", "").strip('"') or None
        except OSError:
            pass
    elif platform.system() == "Darwin":
        out["mac_ver"] = platform.mac_ver()[0]
    elif platform.system() == "Windows":
        out["win32_ver"] = " ".join(x for x in platform.win32_ver() if x)
    return out


def section_cpu():
    model = None
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/cpuinfo") as fh:
                for line in fh:
                    if line.lower().startswith(("model name", "hardware", "cpu model")):
                        model = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
    elif sys.platform == "darwin":
        try:
            model = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                   text=True, timeout=10).stdout.strip() or None
        except Exception:
            pass
    return {"model": model or platform.processor() or None, "count": os.cpu_count(),
            "machine": platform.machine()}


def section_memory():
    # psutil first: it is what `accelerate env` reports; then the OS's own numbers.
    try:
        import psutil
        return {"total_bytes": int(psutil.virtual_memory().total), "source": "psutil"}
    except Exception:
        pass
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/meminfo") as fh:
                for line in fh:
                    if line.startswith("MemTotal:"):
                        return {"total_bytes": int(line.split()[1]) * 1024, "source": "/proc/meminfo"}
        except OSError:
            pass
    try:
        return {"total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "source": "sysconf"}
    except (ValueError, OSError, AttributeError):
        pass
    if sys.platform == "win32":
        import ctypes

        class MEMORYSTATUSEX(ctypes.Structure):
            _fields_ = [("dwLength", ctypes.c_ulong), ("dwMemoryLoad", ctypes.c_ulong),
                        ("ullTotalPhys", ctypes.c_ulonglong), ("ullAvailPhys", ctypes.c_ulonglong),
                        ("ullTotalPageFile", ctypes.c_ulonglong), ("ullAvailPageFile", ctypes.c_ulonglong),
                        ("ullTotalVirtual", ctypes.c_ulonglong), ("ullAvailVirtual", ctypes.c_ulonglong),
                        ("sullAvailExtendedVirtual", ctypes.c_ulonglong)]
        stat = MEMORYSTATUSEX()
        stat.dwLength = ctypes.sizeof(stat)
        if ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(stat)):
            return {"total_bytes": int(stat.ullTotalPhys), "source": "GlobalMemoryStatusEx"}
    return {"total_bytes": None, "source": None}


def section_packages():
    """The stack's versions and how each was installed, from metadata only (nothing imported)."""
    md = _metadata()
    out = {}
    for name in dict.fromkeys(tuple(STACK) + SUPPORT + EXTRA + tuple(REQUESTED)):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            out[name] = {"installed": False}
            continue
        except Exception as e:
            out[name] = {"installed": False, "error": _err(e)}
            continue
        info = _install_info(dist)
        info["installed"] = True
        out[name] = info
    return out


def section_distributions():
    """Every installed distribution (first on sys.path wins, as for imports), with its requirements."""
    md = _metadata()
    seen, shadowed, dists = set(), [], []
    for dist in md.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            name = None
        if not name:
            continue
        key = _norm(name)
        if key in seen:
            shadowed.append(name)
            continue
        seen.add(key)
        info = _install_info(dist)
        info["requires"] = list(dist.requires or [])
        dists.append(info)
    dists.sort(key=lambda d: _norm(d["name"]))
    return {"distributions": dists, "shadowed": sorted(set(shadowed))}


def section_env_vars():
    out = {}
    for name in sorted(os.environ):
        if SECRET_NAME.search(name):
            continue  # never read a credential's value
        if name in ENV_NAMES:
            out[name] = os.environ[name]
        elif name.startswith(ENV_PREFIXES):
            # A variable reprobot does not know: its value is kept only when it reads like a
            # setting (a number, a flag, a short word), never a URL, a path or a random string.
            value = os.environ[name]
            setting = re.fullmatch(r"[A-Za-z0-9_.,+-]{0,32}", value) and not (
                len(value) >= 16 and re.search(r"\d", value) and re.search(r"[A-Za-z]", value))
            out[name] = value if setting else "<set; value not recorded>"
    return out


def section_nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {"present": False}
    try:
        proc = subprocess.run([exe, "--query-gpu=name,memory.total,driver_version",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except Exception as e:
        return {"present": True, "error": _err(e)}
    if proc.returncode != 0:
        return {"present": True, "error": (proc.stderr or proc.stdout).strip()[:300]}
    gpus = []
    for line in proc.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            try:
                mem = int(float(parts[1])) * 1024 * 1024
            except ValueError:
                mem = None
            gpus.append({"name": parts[0], "memory_bytes": mem, "driver_version": parts[2]})
    return {"present": True, "gpus": gpus,
            "driver_version": gpus[0]["driver_version"] if gpus else None}


def _installed(name):
    md = _metadata()
    try:
        md.distribution(name)
        return True
    except md.PackageNotFoundError:
        return False


def section_torch():
    if not _installed("torch"):
        return {"installed": False}
    t0 = time.time()
    try:
        import torch
    except BaseException as e:  # a broken install raises anything, even SystemExit
        return {"installed": True, "import_error": _err(e)}
    out = {"installed": True, "import_seconds": round(time.time() - t0, 2), "version": torch.__version__}
    ver = str(torch.__version__)
    out["local_tag"] = ver.split("+", 1)[1] if "+" in ver else None
    out["cuda_built"] = getattr(torch.version, "cuda", None)
    out["hip_built"] = getattr(torch.version, "hip", None)
    out["xpu_built"] = getattr(torch.version, "xpu", None)
    out["git_version"] = getattr(torch.version, "git_version", None)
    out["debug"] = bool(getattr(torch.version, "debug", False))
    try:
        out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception as e:
        out["cudnn"] = None
        out["cudnn_error"] = _err(e)
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
    except Exception as e:
        out["cuda_available"] = False
        out["cuda_error"] = _err(e)
    devices = []
    if out["cuda_available"]:
        try:
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                devices.append({"name": p.name, "memory_bytes": int(p.total_memory),
                                "capability": "%d.%d" % (p.major, p.minor)})
        except Exception as e:
            out["device_error"] = _err(e)
        try:
            # The CUDA driver API version (e.g. 12080); the driver's own version comes from nvidia-smi.
            out["cuda_driver_api"] = torch._C._cuda_getDriverVersion()
        except Exception:
            pass
    out["devices"] = devices
    accel = "N/A"
    checks = (("CUDA", lambda: out["cuda_available"]),
              ("XPU", lambda: hasattr(torch, "xpu") and torch.xpu.is_available()),
              ("MPS", lambda: torch.backends.mps.is_available()))
    for label, check in checks:
        try:
            if check():
                accel = label
                break
        except Exception:
            pass
    out["accelerator"] = accel
    return out


def section_import(name):
    if not _installed(name):
        return {"installed": False}
    t0 = time.time()
    try:
        mod = __import__(name)
    except BaseException as e:
        return {"installed": True, "ok": False, "error": _err(e)}
    out = {"installed": True, "ok": True, "seconds": round(time.time() - t0, 2),
           "module_version": getattr(mod, "__version__", None), "file": getattr(mod, "__file__", None)}
    return out


def section_tools():
    # What `accelerate env` reports as its location; with the environment not activated, the
    # script next to this interpreter is the one the user would run.
    scripts = os.path.dirname(sys.executable)
    out = {"scripts_dir": scripts}
    for name in CLIS:
        found = shutil.which(name)
        if not found:
            cand = os.path.join(scripts, name + (".exe" if os.name == "nt" else ""))
            found = cand if os.path.isfile(cand) else None
        out[name + "_cli"] = found
    return out


def section_module_map(modules):
    """Which distributions provide each top-level module name (for requirements.in)."""
    md = _metadata()
    mapping = {}
    if hasattr(md, "packages_distributions"):
        mapping = md.packages_distributions()
    else:  # Python 3.9: build it from top_level.txt or RECORD
        for dist in md.distributions():
            name = dist.metadata["Name"]
            tops = (dist.read_text("top_level.txt") or "").split()
            if not tops:
                for f in dist.files or ():
                    parts = f.parts
                    if parts and not parts[0].endswith((".dist-info", ".egg-info", "..")):
                        top = parts[0][:-3] if parts[0].endswith(".py") else parts[0]
                        if top and top not in tops and top != "__pycache__":
                            tops.append(top)
            for top in tops:
                mapping.setdefault(top, []).append(name)
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    out = {}
    for mod in modules:
        top = mod.split(".", 1)[0]
        if top in stdlib or top in sys.builtin_module_names:
            continue
        if top in mapping:
            out[top] = sorted(set(mapping[top]))
    return out


SECTIONS = ("python", "platform", "cpu", "memory", "packages", "distributions", "env_vars", "tools",
            "nvidia_smi", "torch") + tuple("import:" + n for n in IMPORTED)
# The targets' own sections (Target.probe_section in bot/targets/): reprobot's side writes each one's
# source next to this script and passes the files with --section-files; each runs into this
# namespace before any section and defines section_<name>(), run after the sections above.
TARGET_SECTIONS = []


def _load_section_files(paths):
    for path in paths:
        before = set(globals())
        try:
            with open(path, encoding="utf-8") as fh:
                exec(compile(fh.read(), path, "exec"), globals())
        except Exception:
            continue    # its section then fails on its own (no section_<name>), the others run
        TARGET_SECTIONS.extend(n[len("section_"):] for n in sorted(set(globals()) - before)
                               if n.startswith("section_"))


def _run_section(name, modules):
    if name.startswith("import:"):
        return section_import(name.split(":", 1)[1])
    if name == "module_map":
        return section_module_map(modules)
    return globals()["section_" + name]()


def probe_main(argv):
    import argparse
    parser = argparse.ArgumentParser(prog="reprobot-probe")
    parser.add_argument("out")
    parser.add_argument("--only", default="", help="comma-separated sections (default: all)")
    parser.add_argument("--skip", default="", help="comma-separated sections not to run")
    parser.add_argument("--modules", default="", help="comma-separated module names for module_map")
    parser.add_argument("--stack", default="", help="comma-separated target packages, recorded first")
    parser.add_argument("--packages", default="", help="comma-separated distributions to record as well")
    parser.add_argument("--clis", default="", help="comma-separated commands whose location to record")
    parser.add_argument("--section-files", default="", help="the targets' section files, os.pathsep-separated")
    args = parser.parse_args(argv)
    STACK[:] = [p for p in args.stack.split(",") if p]
    REQUESTED[:] = [p for p in args.packages.split(",") if p]
    CLIS[:] = [p for p in args.clis.split(",") if p]
    _load_section_files([p for p in args.section_files.split(os.pathsep) if p])
    only = [s for s in args.only.split(",") if s] or list(SECTIONS) + TARGET_SECTIONS
    skip = set(s for s in args.skip.split(",") if s)
    modules = [m for m in args.modules.split(",") if m]
    # Libraries print banners and warnings on import; none of that may reach reprobot's output.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with open(args.out, "a", encoding="utf-8") as out:
        def emit(obj):
            out.write(json.dumps(obj, default=str) + "\n")
            out.flush()
            os.fsync(out.fileno())
        for name in only:
            if name in skip:
                continue
            emit({"begin": name})
            t0 = time.time()
            try:
                data = _run_section(name, modules)
            except BaseException as e:  # one section failing must not lose the others
                data = {"probe_error": _err(e)}
            emit({"section": name, "data": data, "seconds": round(time.time() - t0, 3)})
    return 0


if __name__ == "__main__":
    sys.exit(probe_main(sys.argv[1:]))


# ---------------------------------------------------------------------------------------------
# reprobot side: run the probe in the user's interpreter and store what it found.
# ---------------------------------------------------------------------------------------------

ENV_SCHEMA = 1
DEFAULT_TIMEOUT = 120.0  # per probe attempt
MAX_HANGS = 2


def probe_source() -> str:
    """The probe's source, to be run by the user's interpreter (never imported for the user's stack)."""
    with open(__file__, encoding="utf-8") as fh:
        return fh.read()


def run_probe(python: str, sections: "list[str] | None" = None, modules: "list[str] | None" = None,
              timeout: float = DEFAULT_TIMEOUT) -> dict:
    """Run the probe's sections in ``python``; returns {section: data}, raw (not scrubbed).

    A section during which the interpreter dies or hangs (``timeout`` seconds per attempt) is
    recorded as ``{"probe_error": "..."}`` and the probe is re-run for the sections left, so
    one broken package costs its own entry, never the whole record. After MAX_HANGS hangs the
    remaining sections are given up on, which bounds the total time.
    """
    import tempfile
    from reducer.errors import ExitCode, ReprobotError
    from reducer.run.processes import kill_group, resolve_python
    exe = resolve_python(python)
    wanted = list(sections or probe_sections())
    results: dict = {}
    hangs = 0
    with tempfile.TemporaryDirectory(prefix="reprobot-probe-") as tmp:
        script = os.path.join(tmp, "reprobot_probe.py")
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(probe_source())
        section_files = os.pathsep.join(write_target_sections(tmp))
        work = os.path.join(tmp, "cwd")  # empty cwd: nothing there can shadow the user's packages
        os.mkdir(work)
        # The same environment the candidates run in (the runner keeps PYTHONPATH too): a stack
        # installed with `pip install --target` and put on PYTHONPATH is the failing stack.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
        env["PYTHONIOENCODING"] = "utf-8"
        for attempt in range(len(wanted) + 1):
            todo = [s for s in wanted if s not in results]
            if not todo:
                break
            out = os.path.join(tmp, f"out{attempt}.jsonl")
            cmd = [exe, script, out, "--only", ",".join(todo)]
            for flag, value in probe_args().items():
                cmd += [flag, value]
            if section_files:
                cmd += ["--section-files", section_files]
            if modules:
                cmd += ["--modules", ",".join(modules)]
            failure = None
            try:
                proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        start_new_session=True)
            except OSError as e:
                raise ReprobotError(f"{python}: cannot run this interpreter ({e.strerror})",
                                    ExitCode.NO_INTERPRETER) from None
            try:
                _, err = proc.communicate(timeout=timeout)
                if proc.returncode != 0:
                    tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                    failure = (f"interpreter died (exit {proc.returncode}"
                               + (f", signal {-proc.returncode}" if proc.returncode < 0 else "")
                               + f"): {tail[0][:200]}")
            except subprocess.TimeoutExpired:
                # A hung import may have spawned helpers: the whole session goes, not just the child.
                kill_group(proc.pid)
                proc.communicate()
                hangs += 1
                failure = f"timed out after {timeout:.0f}s"
            begun = None
            if os.path.exists(out):
                with open(out, encoding="utf-8") as fh:
                    for line in fh:
                        try:
                            rec = json.loads(line)
                        except ValueError:
                            continue  # a line cut short by the crash
                        if "begin" in rec:
                            begun = rec["begin"]
                        elif "section" in rec:
                            results[rec["section"]] = rec["data"]
                            begun = None
            if failure is None:
                continue
            if begun is None:
                if not results:  # died before its first section: not a usable Python
                    raise ReprobotError(f"{python}: the environment probe failed to start ({failure})",
                                        ExitCode.NO_INTERPRETER)
                begun = next(s for s in wanted if s not in results)
            results[begun] = {"probe_error": failure}
            if hangs >= MAX_HANGS:
                for s in wanted:
                    results.setdefault(s, {"probe_error": f"skipped: the probe hung {hangs} times"})
                break
    return results


# Imported here, not at the top: the top half of this file runs alone in the user's interpreter.
def stack_names() -> "list[str]":
    """What every env.json records by name, in order: the targets' distributions (the
    foundation's first), then the libraries under them."""
    from bot.targets import ordered_dists
    return list(dict.fromkeys((*ordered_dists(), *SUPPORT)))


def probe_sections() -> "list[str]":
    """Every section, with an import section for each target that asks for one, and each
    target's own section last."""
    from bot.targets import probe_imports
    from bot.targets.registry import probe_sections as target_sections
    base = [s for s in SECTIONS if not s.startswith("import:")]
    at = base.index("torch") + 1
    imports = ["import:" + n for n in dict.fromkeys((*IMPORTED, *probe_imports()))]
    return base[:at] + imports + base[at:] + [section.name for section in target_sections()]


def probe_args() -> "dict[str, str]":
    """What the probe is told from the target registry: the stack, the other distributions the
    targets' System Info names, and the targets' commands (their own sections' files are written
    by ``run_probe``, next to the script)."""
    from bot.targets import env_packages, ordered_dists, system_info_clis
    stack = list(ordered_dists())
    recorded = set(stack) | set(SUPPORT) | set(EXTRA)
    return {"--stack": ",".join(stack), "--packages": ",".join(p for p in env_packages() if p not in recorded),
            "--clis": ",".join(system_info_clis())}


def write_target_sections(folder: str) -> "list[str]":
    """Each target's probe section as a file in ``folder`` (the probe's temporary one)."""
    from bot.targets.registry import probe_sections as target_sections
    paths = []
    for section in target_sections():
        path = os.path.join(folder, f"reprobot_probe_{section.name}.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(section.source())
        paths.append(path)
    return paths


def shape_env(raw: dict) -> dict:
    """Arrange the probe's sections into env.json's shape (not yet scrubbed)."""
    imports = {k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("import:")}
    packages = raw.get("packages", {})
    # Attach what importing each package showed (its error, or a __version__ that differs
    # from the metadata: a stale editable install).
    for name, imp in imports.items():
        pkg = packages.get(name)
        if isinstance(pkg, dict) and isinstance(imp, dict) and "probe_error" in imp and pkg.get("installed"):
            pkg["import"] = imp["probe_error"]
        elif isinstance(pkg, dict) and isinstance(imp, dict) and imp.get("installed"):
            pkg["import"] = "ok" if imp.get("ok") else (imp.get("error") or imp.get("probe_error"))
            mv = imp.get("module_version")
            if mv and mv != pkg.get("version"):
                pkg["module_version"] = mv
    torch = raw.get("torch", {})
    if isinstance(packages.get("torch"), dict) and packages["torch"].get("installed"):
        packages["torch"]["import"] = torch.get("import_error") or torch.get("probe_error") or "ok"
    # The targets' own sections (bitsandbytes, accelerate_config), each under its own key; one
    # that imports its package says how that import went.
    from bot.targets.registry import probe_sections as target_sections
    sections = {}
    for section in target_sections():
        data = sections[section.name] = raw.get(section.name, {})
        pkg = packages.get(section.imports or "")
        if isinstance(pkg, dict) and pkg.get("installed") and isinstance(data, dict):
            pkg["import"] = data.get("import_error") or data.get("probe_error") or "ok"
    smi = raw.get("nvidia_smi", {})
    gpus = smi.get("gpus") or [{"name": d.get("name"), "memory_bytes": d.get("memory_bytes"),
                                "capability": d.get("capability")} for d in torch.get("devices", [])]
    dists = raw.get("distributions", {})
    env = {
        "schema": ENV_SCHEMA,
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": raw.get("python", {}),
        "platform": raw.get("platform", {}),
        "cpu": raw.get("cpu", {}),
        "memory": raw.get("memory", {}),
        "torch": torch,
        "gpu": {"gpus": gpus, "driver_version": smi.get("driver_version"),
                "nvidia_smi": bool(smi.get("present")), **({"nvidia_smi_error": smi["error"]} if smi.get("error") else {})},
        "packages": packages,
        **sections,
        "env_vars": raw.get("env_vars", {}),
        "tools": raw.get("tools", {}),
        "distributions": {d["name"]: d["version"] for d in dists.get("distributions", [])},
        "shadowed_distributions": dists.get("shadowed", []),
    }
    errors = {k: v["probe_error"] for k, v in raw.items() if isinstance(v, dict) and "probe_error" in v}
    if errors:
        env["probe_errors"] = errors
    return env


def recorded_names() -> "list[str]":
    """Every distribution env.json names on purpose (kept by name even when installed from a
    private source: bot/env/privacy.py)."""
    args = probe_args()
    return [*stack_names(), *EXTRA, *(p for p in args["--packages"].split(",") if p)]


def capture_env(python: str, timeout: float = DEFAULT_TIMEOUT, notebook: "list[str] | None" = None) -> dict:
    """env.json's content for the interpreter ``python``: only what a maintainer needs (no
    interpreter path, host, private distribution or private source: bot/env/privacy.py), then
    scrubbed (no usernames, homes, hosts). ``notebook``: what a reduced notebook installs, recorded
    beside the run's versions (bot/env/notebook_installs.py)."""
    # Imported here: the top of this file also runs on its own in the user's interpreter.
    from bot.env.privacy import private_env
    from bot.scrub import scrub_tree
    raw = run_probe(python, timeout=timeout)
    env = private_env(shape_env(raw), raw, recorded_names())
    if notebook is not None:
        from bot.env.notebook_installs import KEY, installs_section
        env[KEY] = installs_section(notebook, raw, recorded_names())
    return scrub_tree(env)


def write_env(repro_dir, python: str, timeout: float = DEFAULT_TIMEOUT) -> dict:
    """Capture the environment of ``python`` into ``repro_dir/env.json``; returns what was written.
    A repro of a notebook also records what the notebook installs, and says on screen which of
    those the run's versions do not satisfy."""
    from bot.env.notebook_installs import notebook_requirements, screen_line
    from bot.store import write_json_atomic
    env = capture_env(python, timeout=timeout, notebook=notebook_requirements(repro_dir.path))
    write_json_atomic(repro_dir.env_json, env)
    if line := screen_line(env):
        from rich.markup import escape

        from bot.output import console
        console.print(f"[yellow]{escape(line)}[/]")
    return env
