"""pytorch's value recipes (reducer/recipes.py is the contract). Runs in the USER's interpreter.

A tensor becomes a factory call of its shape, dtype and device (the dynamo minifier writes
``rand_strided`` for the same reason): its few values exactly when it is small (token ids and
masks often matter), else ``randn``/``randint`` over the range it held. A parameter-free or leaf
``torch.nn`` layer becomes its constructor, read from its ``extra_repr`` and checked by building it.
"""
import sys

_EXACT = 16          # at most this many elements are written out as they are


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
    grad = ".requires_grad_()" if t.requires_grad and t.is_leaf else ""
    if t.device.type == "meta" or t.numel() == 0:
        return "torch.empty(%r, dtype=%s%s)%s" % (shape, dtype, dev, grad)
    data = t.detach()
    if data.numel() <= _EXACT:
        values = data.cpu().tolist()
        if t.is_floating_point() and not bool(torch.isfinite(data).all()):
            return None
        if data.dim() == 0:
            return "torch.tensor(%r, dtype=%s%s)%s" % (values, dtype, dev, grad)
        return "torch.tensor(%r, dtype=%s%s)%s" % (values, dtype, dev, grad)
    if t.is_floating_point() or t.is_complex():
        return "torch.randn(%r, dtype=%s%s)%s" % (shape, dtype, dev, grad)
    if t.dtype == torch.bool:
        if bool(data.all()):
            return "torch.ones(%r, dtype=torch.bool%s)" % (shape, dev)
        if not bool(data.any()):
            return "torch.zeros(%r, dtype=torch.bool%s)" % (shape, dev)
        return "torch.randint(0, 2, %r%s).bool()" % (shape, dev)
    low, high = int(data.min()), int(data.max())
    if low == high:
        return "torch.full(%r, %d, dtype=%s%s)" % (shape, low, dtype, dev)
    return "torch.randint(%d, %d, %r, dtype=%s%s)" % (low, high + 1, shape, dtype, dev)


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
    if [tuple(p.shape) for p in built.parameters()] != [tuple(p.shape) for p in params]:
        return None
    if dtype and dtype != "torch.float32":
        expr += ".to(%s)" % dtype
    if params and params[0].device.type != "cpu":
        expr += ".to(%r)" % (str(params[0].device),)
    if not module.training:
        expr += ".eval()"
    return expr


def rebuild(value, source):
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
    elif isinstance(value, torch.nn.Module):
        found = _layer(torch, value)
    if found is None:
        return None
    return {"expr": found, "imports": ["import torch"], "setup": []}
