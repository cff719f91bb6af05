"""pytorch's value recipes (reducer/analysis/recipes.py is the contract). Runs in the USER's interpreter.

A tensor becomes a factory call of its shape, dtype and device (the dynamo minifier writes
``rand_strided`` for the same reason): its values exactly when it is small, and an integer or
bool tensor's up to a few hundred (token ids, labels and masks: a pad of -1 among 40 labels is the
bug, and ``randint`` would hold it in a third of the runs), else ``randn``/``randint`` over the
range it held. A float tensor holding NaN or inf is not rebuilt (its slice is kept). A slice or a
transpose keeps its strides (``torch.empty_strided(...).copy_(...)``): ``view`` and kernels that want
contiguous memory fail on the layout, not the values.
A numpy array is written by the same rules (``np.array``, ``np.full``, ``np.random``).
A map-style ``Dataset`` of the script's own class becomes the list of its items (a Trainer or a
DataLoader reads a list the same way), each item rebuilt in turn: the class, its file reading and
its preprocessing are the user's code, not the bug's. A parameter-free or leaf
``torch.nn`` layer becomes its constructor, read from its ``extra_repr`` and checked by building it.
A DistributedDataParallel becomes the module it wraps.
An optimizer of torch.optim becomes its class over fresh parameters of the same shapes (a model's
many as one flat parameter per group), group by group, with the settings that differ from its
defaults; a learning-rate scheduler of torch.optim.lr_scheduler its class over that optimizer,
with the settings it keeps under their own names that differ from the defaults, checked by
building it again.
"""
import sys

# merge is given by reducer/analysis/recipes.py's loader
# flake8: noqa: F821

_EXACT = 16          # at most this many elements are written out as they are
_EXACT_INT = 256     # integer and bool tensors: ids, labels, masks whose values are often the bug


def _torch():
    return sys.modules.get("torch")


def _dtype(torch, dtype):
    text = str(dtype)
    return text if text.startswith("torch.") and isinstance(getattr(torch, text[6:], None), torch.dtype) else None


def _device_kw(t):
    dev = t.device
    if dev.type == "cpu":
        return ""
    return ", device=%r" % (str(dev),)


def _tensor(torch, t):
    dtype = _dtype(torch, t.dtype)
    if dtype is None or t.layout != torch.strided or t.is_quantized or t.is_sparse:
        return None
    shape = tuple(int(s) for s in t.shape)
    dev = _device_kw(t)
    # a tensor computed with grad (a loss) as a leaf that requires it, then one op: a non-leaf
    # again, which backward() and in-place checks treat as the original
    grad = "" if not t.requires_grad else ".requires_grad_()" if t.is_leaf else ".requires_grad_().mul(1)"
    if t.device.type == "meta" or t.numel() == 0:
        return "torch.empty(%r, dtype=%s%s)%s" % (shape, dtype, dev, grad)
    data = t.detach()
    floating = t.is_floating_point() or t.is_complex()
    if floating and not bool(torch.isfinite(data).all()):
        return None
    made = _values(torch, t, data, shape, dtype, dev, floating)
    if t.is_contiguous() or t.dim() < 2:
        return made + grad
    # a slice or a transpose: its layout is part of what a call does with it (``view`` refuses a
    # stride it cannot span, a kernel wants contiguous memory), so the same strides, filled. A leaf
    # asks for grad once filled (copy_ into a leaf that requires grad is refused); a non-leaf is the
    # copy of values that require it (``.mul(1)`` would give contiguous memory back)
    strided = "torch.empty_strided(%r, %r, dtype=%s%s)" % (shape, tuple(int(s) for s in t.stride()), dtype, dev)
    if t.requires_grad and not t.is_leaf:
        return "%s.copy_(%s.requires_grad_())" % (strided, made)
    return "%s.copy_(%s)%s" % (strided, made, grad)


def _values(torch, t, data, shape, dtype, dev, floating):
    """A factory call of the tensor's values (contiguous; see _tensor for its layout)."""
    if data.numel() <= _EXACT:
        return "torch.tensor(%r, dtype=%s%s)" % (data.cpu().tolist(), dtype, dev)
    if floating:
        return "torch.randn(%r, dtype=%s%s)" % (shape, dtype, dev)
    low, high = int(data.min()), int(data.max())
    if low == high:     # a mask of ones, a row of pads: one value, however many
        if t.dtype == torch.bool:
            return "torch.%s(%r, dtype=torch.bool%s)" % ("ones" if low else "zeros", shape, dev)
        return "torch.full(%r, %d, dtype=%s%s)" % (shape, low, dtype, dev)
    if data.numel() <= _EXACT_INT:
        return "torch.tensor(%r, dtype=%s%s)" % (data.cpu().tolist(), dtype, dev)
    if t.dtype == torch.bool:
        return "torch.randint(0, 2, %r%s).bool()" % (shape, dev)
    return "torch.randint(%d, %d, %r, dtype=%s%s)" % (low, high + 1, shape, dtype, dev)


def _array(np, a):
    """A numpy array (what a Trainer hands compute_metrics, what a feature extractor takes) by the
    tensor's rules: its values where it is small or an integer array of ids and labels, one value
    however many, else random values of its shape and dtype; None for an array of objects or
    strings, or floats holding NaN or inf."""
    kind = a.dtype.kind
    dtype = "np.%s" % a.dtype.name
    if kind not in "biuf" or getattr(np, a.dtype.name, None) is None:
        return None
    shape = tuple(int(s) for s in a.shape)
    if a.size == 0:
        return "np.empty(%r, dtype=%s)" % (shape, dtype)
    if kind == "f" and not bool(np.isfinite(a).all()):
        return None
    if a.size <= _EXACT or (kind != "f" and a.size <= _EXACT_INT):
        return "np.array(%r, dtype=%s)" % (a.tolist(), dtype)
    if kind == "f":
        return "np.random.randn(*%r).astype(%s)" % (shape, dtype)
    low, high = int(a.min()), int(a.max())
    if low == high:
        return "np.full(%r, %r, dtype=%s)" % (shape, a.flat[0].item(), dtype)
    if kind == "b":
        return "np.random.randint(0, 2, %r).astype(np.bool_)" % (shape,)
    return "np.random.randint(%d, %d, %r).astype(%s)" % (low, high + 1, shape, dtype)


def _masks(module) -> dict:
    """The masks torch.nn.utils.prune keeps, by the pruned parameter's own name: it keeps
    ``weight`` as ``weight_orig`` beside a ``weight_mask`` buffer."""
    params = dict(module.named_parameters(recurse=False))
    return {name[:-5]: mask for name, mask in module.named_buffers(recurse=False)
            if name.endswith("_mask") and name[:-5] + "_orig" in params}


def _shapes(module) -> dict:
    """Parameter shapes by name, a pruned parameter under its own name: the layer rebuilt
    unpruned stands for it (``_pruned_layer`` prunes it again)."""
    masks = _masks(module)
    return {name[:-5] if name.endswith("_orig") and name[:-5] in masks else name: tuple(p.shape)
            for name, p in module.named_parameters(recurse=False)}


def _layer(torch, module):
    """A leaf layer of torch.nn (Linear, Embedding, LayerNorm, Conv2d...), built from its
    extra_repr and kept only when the one built from that text has the same repr and shapes."""
    cls = type(module)
    if not cls.__module__.startswith("torch.nn.modules.") or getattr(torch.nn, cls.__name__, None) is not cls:
        return None
    if any(True for _ in module.children()):
        return None
    expr = "torch.nn.%s(%s)" % (cls.__name__, module.extra_repr())
    params = list(module.parameters())
    dtype = _dtype(torch, params[0].dtype) if params else None
    try:
        built = eval(expr, {"torch": torch})
    except Exception:
        return None
    if repr(built) != repr(module):
        return None
    if _shapes(built) != _shapes(module):
        return None
    if dtype and dtype != "torch.float32":
        expr += ".to(%s)" % dtype
    if params and params[0].device.type != "cpu":
        expr += ".to(%r)" % (str(params[0].device),)
    if not module.training:
        expr += ".eval()"
    return expr


def _pruned_layer(masks: dict, layer: str) -> dict:
    """A pruned leaf layer: the layer, then as many entries pruned as its masks hold. Which entries
    is left to l1 on fresh weights (the count is what the next prune reads: a later amount is taken
    from the entries left); where the failure needs the very positions, the oracle refuses it."""
    setup = ["reprobot_pruned = %s" % layer]
    setup += ["torch.nn.utils.prune.l1_unstructured(reprobot_pruned, %r, amount=%d)" % (name, int((mask == 0).sum()))
              for name, mask in sorted(masks.items())]
    return {"expr": "reprobot_pruned", "imports": ["import torch", "import torch.nn.utils.prune"], "setup": setup}


_ITEMS = 64          # a dataset longer than this keeps its slice


def _items(torch, ds, source):
    """The script's own map-style Dataset as ``[item, ...]``; None for a library's dataset (its
    class is part of the story) or one whose items have no recipe."""
    cls = type(ds)
    if cls.__module__ not in ("__main__", "__mp_main__") or isinstance(ds, torch.utils.data.IterableDataset):
        return None
    n = len(ds)
    if not 0 < n <= _ITEMS:
        return None
    out = {"imports": [], "setup": [], "expr": ""}
    parts = []
    for i in range(n):
        got = source(ds[i])
        if got is None:
            return None
        merge(out, got)
        parts.append(got["expr"])
    out["expr"] = "[" + ", ".join(parts) + "]"
    return out


def _ddp(torch, module):
    """A DistributedDataParallel: the module it wraps stands for it. A failure raised in the
    module's own forward is the same failure without the wrapper (DDP's forward frames are
    wrappers in a signature, reducer/failure/normalize.py's WRAPPERS), in a rank brought home as
    rank 0 of one and in a rank of several that fails alone (heldout8's CLIP ranks: rank 1's
    second batch). A failure DDP itself raises (unused parameters, a parameter marked ready
    twice, sizes that differ between ranks) needs the wrapper and its peers: the rebuilt call
    fails another way, the oracle refuses it, and the slice that keeps the wrapper follows."""
    ddp = getattr(getattr(torch.nn, "parallel", None), "DistributedDataParallel", None)
    return ddp is not None and isinstance(module, ddp)


_PARAMS = 16         # an optimizer over more parameters than this gets one flat parameter per group


def _params(torch, params, flat):
    """Fresh parameters of the group's shapes; ``flat``: one of all their elements (the torch
    optimizers but LBFGS and Adafactor work element by element, so a model's hundred parameters
    and their concatenation step the same; where the count matters, the oracle refuses it)."""
    each = [(tuple(int(s) for s in p.shape), _dtype(torch, p.dtype), _device_kw(p)) for p in params]
    kinds = {(dtype, dev) for _, dtype, dev in each}
    if not each or any(dtype is None for dtype, _ in kinds) or (flat and len(kinds) > 1):
        return None
    if flat:
        each = [((sum(p.numel() for p in params),), *next(iter(kinds)))]
    return "[%s]" % ", ".join("torch.zeros(%r%s%s, requires_grad=True)"
                              % (shape, "" if dtype == "torch.float32" else ", dtype=%s" % dtype, dev)
                              for shape, dtype, dev in each)


def _optimizer(torch, opt):
    """``torch.optim.X([fresh parameters], **settings)``: zeros of each parameter's shape (an
    optimizer reads shapes and settings, not the values a step has not used yet), one dict per
    group where the groups' settings differ."""
    import inspect
    cls = type(opt)
    if getattr(torch.optim, cls.__name__, None) is not cls:
        return None
    groups = opt.param_groups
    flat = sum(len(g["params"]) for g in groups) > _PARAMS
    if flat and cls.__name__ in ("LBFGS", "Adafactor"):
        return None
    try:
        fresh = cls([torch.zeros(1, requires_grad=True)]).defaults
        accepted = set(inspect.signature(cls.__init__).parameters)
    except Exception:
        return None
    own = {k: v for k, v in opt.defaults.items() if k in accepted and fresh.get(k, object()) != v}
    if any(k not in fresh for k in own):
        return None
    parts = []
    for g in groups:
        params = _params(torch, g["params"], flat)
        if params is None:
            return None
        diff = {k: v for k, v in g.items() if k != "params" and k in opt.defaults and opt.defaults[k] != v}
        parts.append((params, diff))
    if len(parts) == 1 and not parts[0][1]:
        first = parts[0][0]
    else:
        first = "[%s]" % ", ".join("{'params': %s%s}" % (params, "".join(", %r: %r" % kv for kv in diff.items()))
                                   for params, diff in parts)
    kwargs = "".join(", %s=%r" % kv for kv in own.items())
    expr = "torch.optim.%s(%s%s)" % (cls.__name__, first, kwargs)
    try:        # every setting written must read back as it was
        if eval(expr, {"torch": torch}).defaults != opt.defaults:
            return None
    except Exception:
        return None
    return expr


def _scheduler(torch, sched, source):
    """``torch.optim.lr_scheduler.X(<its optimizer>, **settings)``: the constructor's parameters
    the scheduler keeps under their own names (``mode``, ``patience``, ``step_size``), those that
    differ from the defaults; a parameter it does not keep so (``lr_lambda``) with no default, or a
    setting that does not read back, and it keeps its slice."""
    import inspect
    mod = getattr(torch.optim, "lr_scheduler", None)
    cls = type(sched)
    if mod is None or getattr(mod, cls.__name__, None) is not cls:
        return None
    got = source(sched.optimizer)
    if got is None:
        return None
    kwargs = {}
    for name, param in list(inspect.signature(cls.__init__).parameters.items())[2:]:
        if name in ("last_epoch", "verbose") or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if not hasattr(sched, name):
            if param.default is param.empty:
                return None
            continue
        value = getattr(sched, name)
        if param.default is param.empty or value != param.default:
            if not isinstance(value, (int, float, str, bool, type(None))):
                return None
            kwargs[name] = value
    out = {"imports": ["import torch"], "setup": [], "expr": ""}
    merge(out, got)
    out["expr"] = "torch.optim.lr_scheduler.%s(%s%s)" % (cls.__name__, got["expr"],
                                                         "".join(", %s=%r" % kv for kv in kwargs.items()))
    return out


def rebuild(value, source):
    np = sys.modules.get("numpy")
    if np is not None and type(value) is np.ndarray:
        found = _array(np, value)
        return None if found is None else {"expr": found, "imports": ["import numpy as np"], "setup": []}
    torch = _torch()
    if torch is None:
        return None
    found = None
    if isinstance(value, torch.dtype):
        found = _dtype(torch, value)
    elif isinstance(value, torch.device):
        found = "torch.device(%r)" % (str(value),)
    elif isinstance(value, torch.Tensor):
        found = _tensor(torch, value)
    elif _ddp(torch, value):
        return source(value.module)
    elif isinstance(value, torch.optim.Optimizer):
        found = _optimizer(torch, value)
    elif type(value).__module__ == "torch.optim.lr_scheduler":
        return _scheduler(torch, value, source)
    elif isinstance(value, torch.nn.Module):
        found = _layer(torch, value)
        masks = _masks(value) if found is not None else {}
        if masks:
            return _pruned_layer(masks, found)
    elif isinstance(value, getattr(sys.modules.get("torch.utils.data"), "Dataset", ())):
        return _items(torch, value, source)
    if found is None:
        return None
    return {"expr": found, "imports": ["import torch"], "setup": []}


# torchrun and accelerate launch hand every rank these; the env:// rendezvous reads them, so a
# candidate run under the same launch line joins its group with no argument but the backend.
_LAUNCHED = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def process_state():
    """A rank whose process group is up: ``init_process_group`` before the call
    (DistributedDataParallel and every collective need it), and its rank read from the group.

    A rank of a launched job (torchrun, accelerate launch) joins from the environment the launcher
    gives every rank, so the candidate runs under the same launch line. A rank the script started
    itself (``mp.spawn``, a ``Process`` per rank, joining over a ``tcp://`` address or with
    explicit ranks) has no launcher to run it again: the candidate starts the ranks itself
    (``start``), forked from a parent that only defines the rank's function, so every rank joins
    at a fixed address (which the run-time rendezvous patch gives each run its own port of)
    with its rank as the function's argument. Nothing for a multi-device backend spec
    ("cpu:gloo,cuda:nccl"): left to the slice."""
    import os
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not (dist.is_available() and dist.is_initialized()):
            return None
        world = int(dist.get_world_size())
        backend = str(dist.get_backend())
    except Exception:
        return None
    if world < 2 or not backend.isidentifier():
        return None
    # TORCH_DISTRIBUTED_DEBUG is read once, as torch.distributed is imported (a parent that set it
    # after its own import reaches only the ranks it spawned); at DETAIL a collective's shapes are
    # compared across ranks before it runs, which changes what a mismatch raises
    debug = []
    try:
        level = dist.get_debug_level().name
        if level != "OFF" and level.isidentifier():
            debug = ["dist.set_debug_level(dist.DebugLevel.%s)" % level]
    except Exception:
        pass
    if all(k in os.environ for k in _LAUNCHED) and int(os.environ.get("WORLD_SIZE", "0")) == world:
        return {"imports": ["import torch.distributed as dist"],
                "setup": debug + ["dist.init_process_group(%r)" % backend],
                "rank": {"expr": "dist.get_rank()", "imports": ["import torch.distributed as dist"]}}
    # fork: the ranks inherit the parent's imports (no bootstrap, no __main__ guard); the parent
    # touches no device before it, so a CUDA rank starts clean
    return {"imports": ["import torch.distributed as dist"],
            "setup": debug + ["dist.init_process_group(%r, init_method='tcp://127.0.0.1:29500', rank=rank, "
                              "world_size=%d)" % (backend, world)],
            "rank": {"expr": "rank", "imports": []},
            "start": {"param": "rank", "imports": ["import torch.multiprocessing"],
                      "call": "torch.multiprocessing.start_processes({target}, nprocs=%d, "
                              "start_method='fork')" % world}}
