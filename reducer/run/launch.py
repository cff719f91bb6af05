"""Launch lines: `reprobot reduce -- torchrun --nproc_per_node 2 train.py ARGS`.

The script the line names is what gets reduced; every run (the original's and each candidate's)
runs the same line with the candidate's file in the script's place, in the run's scratch copy:

* ``torchrun OPTS script.py ARGS`` (also ``python -m torch.distributed.run``/``.launch``) runs as
  ``PYTHON -m torch.distributed.run OPTS --master_port PORT script.py ARGS``;
* ``accelerate launch OPTS script.py ARGS`` as ``PYTHON -m accelerate.commands.launch OPTS
  --main_process_port PORT script.py ARGS``;
* ``python -m pkg.mod ARGS``: the module's file is the script; the scratch copy is rooted at the
  folder the line runs in, so ``pkg`` imports as it does for the user;
* ``python [OPTS] script.py ARGS``: a plain script (the same as ``reprobot reduce script.py -- ARGS``).

PYTHON is the interpreter of the run (``--python``), so the launcher and the ranks it starts run
in the user's environment. PORT is the run's own (reducer/run/rendezvous.py): any port the line
fixes is replaced, and one is added where the launcher would use its default (29500).
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reducer.errors import ExitCode, ReprobotError

TORCHRUN, ACCELERATE, MODULE, PYTHON = "torchrun", "accelerate", "module", "python"

_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# Options of the launchers that take no value (everything else starting with "-" takes one,
# unless written --opt=value).
_TORCHRUN_FLAGS = {"--standalone", "-m", "--module", "--no-python", "--no_python", "--run-path",
                   "--run_path", "--virtual-local-rank", "--virtual_local_rank", "--use-env", "--use_env"}
ACCELERATE_FLAGS = {"--cpu", "--multi_gpu", "--tpu", "--ipex", "--use_deepspeed", "--use_fsdp",
                     "--use_megatron_lm", "--use_xpu", "-m", "--module", "--no_python", "-q", "--quiet",
                     "--debug", "--same_network", "--rdzv_conf", "--monitor_interval", "--enable_cpu_affinity",
                     "--downcast_bf16", "--tpu_use_cluster", "--tpu_use_sudo", "--dynamo_use_fullgraph",
                     "--dynamo_use_dynamic", "--dynamo_use_regional_compilation", "--use_parallelism_config"}
_PORT_OPTIONS = {TORCHRUN: ("--master_port", "--master-port"), ACCELERATE: ("--main_process_port",)}
_PY_FLAGS_WITH_VALUE = {"-W", "-X", "-c"}


@dataclass
class LaunchLine:
    kind: str
    launcher_opts: list[str]          # the launcher's options, as given (no interpreter, no script)
    script: Path                      # the script's file, as found
    relpath: str                      # the script's path under ``root`` (POSIX)
    root: Path                        # the folder each run's scratch copy mirrors (the run's cwd)
    args: list[str] = field(default_factory=list)   # the script's own arguments
    module: str | None = None         # python -m / launcher -m: the module name
    tokens: list[str] = field(default_factory=list)  # the line as the user typed it

    @property
    def needs_launcher(self) -> bool:
        """Runs go through a launcher or ``-m`` (a one-node torchrun line still runs warm:
        reducer/run/rank_launch.py)."""
        return self.kind != PYTHON or bool(self.launcher_opts)

    def display(self) -> str:
        """The line as the draft's "steps to reproduce" gives it (the script under its own name)."""
        return shlex.join(self.display_tokens())

    def display_tokens(self, script_name: str | None = None) -> list[str]:
        script_name = script_name or self.relpath
        toks = list(self.tokens)
        if self.module is None:
            idx = self._script_index()
            if idx is not None:
                toks[idx] = script_name
        return toks

    def _script_index(self) -> int | None:
        for i, tok in enumerate(self.tokens):
            if tok == self._typed_script:
                return i
        return None

    _typed_script: str = ""

    def command(self, python: str, script_token: str, port: int | None) -> list[str]:
        """The argv of one run: ``script_token`` is the candidate's path relative to the run's cwd."""
        opts = list(self.launcher_opts)
        if self.kind == TORCHRUN:
            if port is not None and "--standalone" not in opts:
                opts = _set_option(opts, _PORT_OPTIONS[TORCHRUN], str(port))
            head = [python, "-m", "torch.distributed.run", *opts]
        elif self.kind == ACCELERATE:
            if port is not None:
                opts = _set_option(opts, _PORT_OPTIONS[ACCELERATE], str(port))
            head = [python, "-m", "accelerate.commands.launch", *opts]
        else:
            head = [python, *opts]
        if self.module is not None:
            return [*head, *(["-m"] if self.kind in (MODULE,) else []), self.module, *self.args]
        return [*head, script_token, *self.args]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": shlex.join(self.tokens), "tokens": self.tokens,
                "script": self.relpath, "module": self.module, "args": self.args,
                "run": self.display_tokens()}


def _set_option(opts: list[str], names: tuple[str, ...], value: str) -> list[str]:
    """``opts`` with the first of ``names`` set to ``value`` (replaced where given, else added)."""
    out: list[str] = []
    found = False
    i = 0
    while i < len(opts):
        tok = opts[i]
        name = tok.split("=", 1)[0]
        if name in names:
            found = True
            if "=" in tok:
                out.append(f"{name}={value}")
            else:
                out += [tok, value]
                i += 1
        elif name in ("--rdzv-endpoint", "--rdzv_endpoint") and TORCHRUN:
            # host:port of the c10d rendezvous: the port is the run's own
            raw = tok.split("=", 1)[1] if "=" in tok else (opts[i + 1] if i + 1 < len(opts) else "")
            host = raw.rsplit(":", 1)[0] if ":" in raw else raw
            new = f"{host or 'localhost'}:{value}"
            if "=" in tok:
                out.append(f"{name}={new}")
            else:
                out += [tok, new]
                i += 1
        else:
            out.append(tok)
        i += 1
    if not found:
        out += [names[0], value]
    return out


def _split_options(tokens: list[str], flags: set[str]) -> tuple[list[str], int, bool]:
    """(the options, the index of the first positional, whether -m/--module was given)."""
    i, module = 0, False
    while i < len(tokens):
        tok = tokens[i]
        if tok == "--":
            return tokens[:i], i + 1, module
        if not tok.startswith("-") or tok == "-":
            break
        name = tok.split("=", 1)[0]
        if name in ("-m", "--module"):
            module = True
        if "=" in tok or name in flags:
            i += 1
        else:
            i += 2
    return tokens[:i], i, module


def _module_file(module: str, cwd: Path, python: str) -> Path:
    """The file ``python -m module`` runs, looked up from ``cwd`` as the interpreter would."""
    parts = module.split(".")
    for base in (cwd,):
        candidate = base.joinpath(*parts)
        for f in (candidate.with_suffix(".py"), candidate / "__main__.py"):
            if f.is_file():
                return f
    import subprocess
    probe = ("import importlib.util, sys\n"
             "spec = importlib.util.find_spec(sys.argv[1])\n"
             "print(spec.origin if spec and spec.origin else '')\n")
    try:
        out = subprocess.run([python, "-c", probe, module], cwd=cwd, capture_output=True, text=True,
                             timeout=120).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    if out and out.endswith("__init__.py"):
        out = str(Path(out).with_name("__main__.py"))
    if not out or not Path(out).is_file():
        raise ReprobotError(f"python -m {module}: no such module from {cwd}", ExitCode.FILE_MISSING)
    return Path(out)


def _rooted(script: Path, root: Path) -> tuple[Path, str]:
    try:
        rel = script.resolve().relative_to(root.resolve())
    except ValueError:
        raise ReprobotError(f"{script}: the module's file is outside {root}; run the line from the "
                            f"folder its package lives in", ExitCode.USAGE) from None
    return root, rel.as_posix()


def parse_launch(tokens: list[str], cwd: Path, python: str) -> LaunchLine:
    """Read a launch line; a one-line error when it names no script reprobot can reduce."""
    if not tokens:
        raise ReprobotError("no script: give SCRIPT, or a launch line after `--`", ExitCode.USAGE)
    exe = os.path.basename(tokens[0])
    rest = tokens[1:]
    if exe == "torchrun" or exe == "torch.distributed.run":
        return _launcher(TORCHRUN, tokens, rest, _TORCHRUN_FLAGS, cwd, python)
    if exe == "accelerate" or exe == "accelerate-launch":
        if exe == "accelerate":
            if not rest or rest[0] != "launch":
                raise ReprobotError("accelerate: only `accelerate launch ...` lines can be reduced", ExitCode.USAGE)
            rest = rest[1:]
        return _launcher(ACCELERATE, tokens, rest, ACCELERATE_FLAGS, cwd, python)
    if exe.startswith("python") or exe.endswith(".exe"):
        i = 0
        py_opts: list[str] = []
        while i < len(rest) and rest[i].startswith("-") and rest[i] != "-m":
            if rest[i] in _PY_FLAGS_WITH_VALUE:
                if rest[i] == "-c":
                    raise ReprobotError("python -c: no script file to reduce", ExitCode.USAGE)
                py_opts += rest[i:i + 2]
                i += 2
            else:
                py_opts.append(rest[i])
                i += 1
        if i < len(rest) and rest[i] == "-m":
            if i + 1 >= len(rest):
                raise ReprobotError("python -m: no module named", ExitCode.USAGE)
            module = rest[i + 1]
            if module in _TORCHRUN_MODULES:
                return _launcher(TORCHRUN, tokens, rest[i + 2:], _TORCHRUN_FLAGS, cwd, python)
            if module in ("accelerate.commands.launch",):
                return _launcher(ACCELERATE, tokens, rest[i + 2:], ACCELERATE_FLAGS, cwd, python)
            script = _module_file(module, cwd, python)
            root, rel = _rooted(script, cwd)
            line = LaunchLine(MODULE, py_opts, script, rel, root, list(rest[i + 2:]), module, list(tokens))
            return line
        if i >= len(rest):
            raise ReprobotError(f"{tokens[0]}: no script named", ExitCode.USAGE)
        script = (cwd / rest[i]) if not os.path.isabs(rest[i]) else Path(rest[i])
        line = LaunchLine(PYTHON, py_opts, script, script.name, script.resolve().parent,
                          list(rest[i + 1:]), None, list(tokens))
        line._typed_script = rest[i]
        return line
    if exe.endswith(".py"):
        script = (cwd / tokens[0]) if not os.path.isabs(tokens[0]) else Path(tokens[0])
        line = LaunchLine(PYTHON, [], script, script.name, script.resolve().parent, list(rest), None,
                          ["python", *tokens])
        line._typed_script = tokens[0]
        return line
    raise ReprobotError(f"{tokens[0]}: not a launcher reprobot knows (python, python -m, torchrun, "
                        f"accelerate launch)", ExitCode.USAGE)


def _launcher(kind: str, tokens: list[str], rest: list[str], flags: set[str], cwd: Path,
              python: str) -> LaunchLine:
    opts, idx, module = _split_options(rest, flags)
    if idx >= len(rest):
        raise ReprobotError(f"{tokens[0]}: no script named in the launch line", ExitCode.USAGE)
    opts = [o for o in opts if o != "--"]
    target, args = rest[idx], list(rest[idx + 1:])
    if module:
        script = _module_file(target, cwd, python)
        root, rel = _rooted(script, cwd)
        opts = [o for o in opts if o.split("=", 1)[0] not in ("-m", "--module")]
        line = LaunchLine(kind, opts + ["-m"], script, rel, root, args, target, list(tokens))
        return line
    script = (cwd / target) if not os.path.isabs(target) else Path(target)
    if not script.is_file():
        raise ReprobotError(f"{target}: no such file (named in the launch line)", ExitCode.FILE_MISSING)
    line = LaunchLine(kind, opts, script, script.name, script.resolve().parent, args, None, list(tokens))
    line._typed_script = target
    return line
