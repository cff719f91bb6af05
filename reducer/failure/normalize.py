"""Normalisation shared by signatures, dedup and drafts: paths to package-relative form,
messages with their run-specific parts (numbers, addresses, paths, temp names, reprs)
replaced by placeholders."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from reducer.stack import checkout_pattern

if TYPE_CHECKING:
    from reducer.failure.outcome import TracebackRecord

# Where installed packages live, on POSIX and Windows, in venvs, conda and system Pythons.
_SITE = re.compile(r"[\\/](?:site|dist)-packages[\\/]", re.IGNORECASE)
# Editable installs of the stack (pip install -e ~/transformers) run from a source checkout:
# ".../transformers/src/transformers/trainer.py" is still a library frame. Which packages' checkouts
# count is the targets' knowledge (reducer/stack.py: what the bot registers, or the engine's own).
# The standard library: .../lib/python3.12/..., ...\Lib\... (Windows), .../lib64/python3.11/...
_STDLIB = re.compile(r"[\\/](?:lib(?:64)?[\\/]python\d+(?:\.\d+)?t?|Lib)[\\/]", re.IGNORECASE)


def library_path(path: str) -> str | None:
    """Package-relative path of a library frame ("peft/peft_model.py"), or None for
    the user's own code and for synthetic frames (<frozen ...>, <string>)."""
    if not path or (path.startswith("<") and not path.startswith(("<env>/", "<env>\\"))):
        return None
    for elided in (".../", "...\\", "\u2026/", "\u2026\\", "<env>/", "<env>\\"):
        # Pasted tracebacks often elide the environment: ".../peft/peft_model.py"; reprobot's
        # own scrubber (bot/scrub.py) writes stored tracebacks as "<env>/peft/peft_model.py".
        if path.startswith(elided):
            return path[len(elided):].replace("\\", "/") or None
    hits = list(_SITE.finditer(path)) or list(checkout_pattern().finditer(path))
    if hits:
        rel = path[hits[-1].end():]
    else:
        hits = list(_STDLIB.finditer(path))
        if not hits:
            return None
        rel = path[hits[-1].end():]
    rel = rel.replace("\\", "/")
    return rel or None


def package_of(path: str) -> str | None:
    """Top-level import package of a library frame ("peft"), or None."""
    rel = library_path(path)
    if rel is None:
        return None
    top = rel.split("/", 1)[0]
    return top[:-3] if top.endswith(".py") else top


# (a name is read from its start: \b also starts one after each ".", so "a.a.a..." was quadratic)
_MULTILINE_REPR = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*+)\(\n")
_MODULE_REPR = re.compile(r"<module '([^']+)'(?: from '[^']*')?>")
_OBJ_AT = re.compile(r" at 0x[0-9a-fA-F]+>")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_WIN_PATH = re.compile(r"(?<![\w])[A-Za-z]:[\\/][^\s'\"<>:|*?]*")
_UNC_PATH = re.compile(r"\\\\[^\s'\"]+")
_POSIX_PATH = re.compile(r"(?<![\w.<>])/(?:[\w.@+~-]+/)*[\w.@+~-]+")
_TMP_NAME = re.compile(r"\btmp[a-z0-9_]{6,}\b", re.IGNORECASE)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
_LONG_HEX = re.compile(r"\b[0-9a-f]{12,}\b", re.IGNORECASE)
# Digits not glued to a name: "Params4bit" and "float16" keep theirs, "layers.3" does not.
_NUMBER = re.compile(r"(?<![A-Za-z_\d])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\d)")
# Device names, kept verbatim unless the match option says otherwise.
_DEVICE = re.compile(r"\b(?:cuda|xpu|mps|npu|hpu):\d+\b|\bGPU \d+\b")
_SPACES = re.compile(r"\s+")


def _collapse_multiline_reprs(message: str) -> str:
    """Replace a module repr printed across lines (``Name(\\n  (linear): ...\\n)``) by
    ``Name(...)``: its inner layout depends on the model's config, not on the bug."""
    out: list[str] = []
    i = 0
    while True:
        m = _MULTILINE_REPR.search(message, i)
        if not m:
            out.append(message[i:])
            return "".join(out)
        depth, j = 1, m.end()
        while j < len(message) and depth:
            if message[j] == "(":
                depth += 1
            elif message[j] == ")":
                depth -= 1
            j += 1
        out.append(message[i:m.start()] + m.group(1) + "(...)")
        i = j


# A set of strings as Python prints it ({'q_proj', 'v_proj'}): its order follows the run's hash
# seed, so two runs of one failure print it differently (peft's "Target modules {...} not found").
_QUOTED = r"""(?:'[^'\n]*'|"[^"\n]*")"""
_STR_SET = re.compile(r"\{\s*" + _QUOTED + r"(?:\s*,\s*" + _QUOTED + r")+\s*\}")


def _sorted_set(m: re.Match[str]) -> str:
    import ast
    try:
        value = ast.literal_eval(m.group())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return m.group()
    if not isinstance(value, set) or not all(isinstance(v, str) for v in value):
        return m.group()
    return "{" + ", ".join(repr(v) for v in sorted(value)) + "}"


_QUOTED_NAME = re.compile(r'"[^"\n]*"')
_NAME_LIST = re.compile(r"<Q>(?:, <Q>)+")
_SHAPE = re.compile(r"\[<N>(?:, <N>)*\]")


def _details(message: str) -> str:
    """A message's tab-indented detail lines (reducer/failure/tracebacks.py) as what kind of
    detail each is: the names it quotes (which keys are missing, which parameter) and how many
    change as a reduction shrinks the model, what happened to them does not; each kind once, in
    order, after the first line."""
    lines = message.split("\n")
    if len(lines) < 2 or not any(line.startswith("\t") for line in lines[1:]):
        return message
    head, kinds = [lines[0]], []
    for line in lines[1:]:
        if not line.startswith("\t"):
            head.append(line)
            continue
        # (a shape's rank too: a weight's [<N>, <N>] and a bias's [<N>] are one kind of detail)
        kind = _SHAPE.sub("[<N>]", _NUMBER.sub("<N>", line.strip()))
        kind = _NAME_LIST.sub("<Q>", _QUOTED_NAME.sub("<Q>", kind))
        if kind not in kinds:
            kinds.append(kind)
    return "\n".join(head + ["| " + k for k in kinds])


def normalize_message(message: str, keep_devices: bool = True) -> str:
    """The message with run-specific parts replaced, on one line.

    ``KeyError: 22`` and ``KeyError: 13`` both become ``<N>``; paths become
    ``<PATH>``, addresses ``<ADDR>``, temp names ``<TMP>``; quoted identifiers such as
    ``'_is_hf_initialized'`` are kept because they say which bug it is.
    """
    msg = _collapse_multiline_reprs(_details(message.strip()))
    msg = _STR_SET.sub(_sorted_set, msg)
    msg = _MODULE_REPR.sub(r"<module '\1'>", msg)
    msg = _OBJ_AT.sub(" at <ADDR>>", msg)
    msg = _HEX.sub("<ADDR>", msg)
    msg = _UUID.sub("<UUID>", msg)
    msg = _WIN_PATH.sub("<PATH>", msg)
    msg = _UNC_PATH.sub("<PATH>", msg)
    msg = _POSIX_PATH.sub("<PATH>", msg)
    msg = _TMP_NAME.sub("<TMP>", msg)
    msg = _LONG_HEX.sub("<HEX>", msg)
    if keep_devices:
        # Shield device indices ("cuda:0", "GPU 1") from the number rule.
        devices = _DEVICE.findall(msg)
        msg = _DEVICE.sub("\x00", msg)
        msg = _NUMBER.sub("<N>", msg)
        for dev in devices:
            msg = msg.replace("\x00", dev, 1)
    else:
        msg = _DEVICE.sub(lambda m: re.sub(r"\d+", "<N>", m.group()), msg)
        msg = _NUMBER.sub("<N>", msg)
    return _SPACES.sub(" ", msg).strip()


# Call plumbing that sits between any two real frames of a forward pass: it says
# nothing about which bug this is, and reduction can add or remove it (a model
# called directly vs through generate, with or without accelerate hooks).
PLUMBING = frozenset({
    "torch/nn/modules/module.py:_call_impl",
    "torch/nn/modules/module.py:_wrapped_call_impl",
    "torch/utils/_contextlib.py:decorate_context",
    "accelerate/hooks.py:new_forward",
    "transformers/utils/generic.py:wrapper",
    "transformers/utils/output_capturing.py:wrapper",
    "transformers/modeling_layers.py:__call__",
    # Where a worker process or thread calls the script's task: the same failure raised in the
    # parent (bring_home, call_directly) has none of them, and a task that fails in a pool worker
    # fails the same way when called directly. Without them a failure with two library frames
    # (`generate` → `_prepare_special_tokens`) had the pool's worker as its third and could
    # never be brought home.
    "concurrent/futures/process.py:_process_worker",
    "concurrent/futures/thread.py:run",
    "multiprocessing/pool.py:worker",
    "multiprocessing/pool.py:mapstar",
    "multiprocessing/pool.py:starmapstar",
    "multiprocessing/process.py:run",
    "multiprocessing/process.py:_bootstrap",
    "torch/multiprocessing/spawn.py:_wrap",
    "torch/utils/data/_utils/worker.py:_worker_loop",
    "threading.py:run",
    "threading.py:_bootstrap_inner",
})

# Wrappers that hand their input to the module they wrap, skipped in a failure's signature only:
# a failure raised inside DistributedDataParallel's module is the module's, and the same call made
# on the module (a rank brought home, the wrapper rebuilt as what it wraps) is the same failure
# (heldout7's Reformer ranks). What DDP raises itself comes from its own frames below these
# (_pre_forward, the reducer). Routing and a draft still name the call the user made
# (``DistributedDataParallel.forward``): library_frames keeps them.
WRAPPERS = frozenset({
    "torch/nn/parallel/distributed.py:forward",
    "torch/nn/parallel/distributed.py:_run_ddp_forward",
})


def library_frames(record: TracebackRecord) -> list[str]:
    """All library frames of a record, innermost first, consecutive repeats collapsed.

    Recursion depth (accelerate's hook attachment recurses once per module level)
    depends on the model, so a repeated frame counts once.
    """
    return _library_keys(record, inner_only=False)


def failing_frames(record: TracebackRecord) -> list[str]:
    """The library frames a failure is known by, innermost first: the library code the user's
    code called into, up to the user's frame that called it. What called the user's code (a
    Trainer running a callback, a DataLoader calling a collate function) is how the script got
    there, not the failure: a repro that makes the same call directly fails the same way.

    A failure raised in the user's own code (no library frame inside it) keeps the library frames
    that called it, up to the next user frame."""
    return _library_keys(record, inner_only=True)


def _library_keys(record: TracebackRecord, inner_only: bool) -> list[str]:
    """``path:function`` of the library frames, innermost first, plumbing skipped and repeats
    collapsed; ``inner_only``: up to the first user frame outside them."""
    out: list[str] = []
    for frame in reversed(record.frames):
        rel = library_path(frame.path)
        if rel is None:
            if out and inner_only:
                break
            continue
        key = f"{rel}:{frame.func}"
        if key in PLUMBING or (inner_only and key in WRAPPERS):
            continue
        if not out or out[-1] != key:
            out.append(key)
    return out
