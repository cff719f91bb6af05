"""peft's value recipes (reducer/analysis/recipes.py is the contract). Runs in the USER's interpreter.

- a ``PeftConfig`` (``LoraConfig``...) -> its class with the fields that differ from its defaults;
- a ``PeftModel`` -> ``get_peft_model(<its base, rebuilt>, <its config>)``; one that
  ``PeftModel.from_pretrained`` loaded (``install`` notes its keyword arguments) -> that adapter
  saved first from a fresh copy of the base, then loaded onto the rebuilt base with the same
  keyword arguments (the load is where PEFT re-dispatches an offloaded base). An adapter merged
  into the base weights and still held is merged again (``merge_adapter``). Adapter weights
  that went NaN or inf (a training step that overflowed) are the failure's, not the config's: the
  rebuilt model gets them again, one ``torch.nn.init.constant_`` per such weight.
"""
import sys

# merge, import_of, call_of, remember_saves and note_loads are given by reducer/analysis/recipes.py's loader
# flake8: noqa: F821

ADAPTER = "reprobot_adapter"
_SKIP = frozenset({"base_model_name_or_path", "revision", "peft_type", "runtime_config", "inference_mode",
                   "auto_mapping"})


def _plain(value):
    """A str/int enum member (``TaskType.CAUSAL_LM``) as its value; sets sorted for a stable text."""
    enum = sys.modules.get("enum")
    if enum is not None and isinstance(value, enum.Enum) and isinstance(value.value, (str, int)):
        return value.value
    if isinstance(value, (set, frozenset)) and all(isinstance(v, str) for v in value):
        return sorted(value)
    return value


def _config(cfg, source):
    import dataclasses
    cls = type(cfg)
    try:
        default = cls()
    except Exception:
        default = None
    kwargs = {}
    for f in dataclasses.fields(cfg):
        if not f.init or f.name in _SKIP:
            continue
        value = getattr(cfg, f.name)
        if default is not None and _plain(value) == _plain(getattr(default, f.name, object())):
            continue
        kwargs[f.name] = _plain(value)
    return call_of(cls, kwargs, source)


def _model(peft, model, source):
    name = getattr(model, "active_adapter", "default")
    if not isinstance(name, str):
        return None
    cfg = model.peft_config.get(name)
    base = model.get_base_model()
    got_cfg = _config(cfg, source) if cfg is not None else None
    got_base = source(base)
    if got_cfg is None or got_base is None:
        return None
    out = {"imports": [], "setup": [], "expr": ""}
    merge(out, got_base)
    merge(out, got_cfg)
    named = "" if name == "default" else ", adapter_name=%r" % name
    noted = getattr(model, "_reprobot_load", None)
    if isinstance(noted, dict):
        parts = []
        for key, value in noted.items():
            got = source(value)
            if got is None or not key.isidentifier():
                return None
            merge(out, got)
            parts.append("%s=%s" % (key, got["expr"]))
        plain = _plain_base(base, source)
        if plain is None:
            return None
        merge(out, plain)
        out["imports"].append("from peft import PeftModel, get_peft_model")
        # saved under the default name (another name saves into a subfolder); loaded under its own
        out["setup"].append("get_peft_model(%s, %s).save_pretrained(%r)" % (plain["expr"], got_cfg["expr"], ADAPTER))
        out["expr"] = "PeftModel.from_pretrained(%s)" % ", ".join([got_base["expr"], repr(ADAPTER)] + parts)
        return out
    out["imports"].append("from peft import get_peft_model")
    out["expr"] = "get_peft_model(%s, %s%s)" % (got_base["expr"], got_cfg["expr"], named)
    broken = _non_finite(model)
    merged = _merged(model)
    if broken or merged:
        out["setup"].append("reprobot_peft = " + out["expr"])
        out["expr"] = "reprobot_peft"
    if broken:
        out["imports"].append("import torch")
        out["setup"] += ["torch.nn.init.constant_(reprobot_peft.get_parameter(%r), float(%r))" % nv for nv in broken]
    if merged:
        # merged into the base weights and still held (``merge_adapter``, not ``merge_and_unload``):
        # what deleting, unmerging or training it next reads
        names = "" if merged == [name] else "adapter_names=%r" % merged
        out["setup"].append("reprobot_peft.merge_adapter(%s)" % names)
    return out


def _merged(model):
    """The adapters merged into the base weights that the model still holds, in merge order."""
    out = []
    for module in model.modules():
        for adapter in getattr(module, "merged_adapters", None) or ():
            if isinstance(adapter, str) and adapter not in out:
                out.append(adapter)
    return out


def _non_finite(model, most=4):
    """(name, "nan" or "inf") of the adapter weights holding a non-finite value."""
    torch = sys.modules.get("torch")
    out = []
    for name, p in model.named_parameters():
        if torch is None or len(out) >= most or "lora_" not in name:
            continue
        data = p.detach()
        if data.is_floating_point() and not bool(torch.isfinite(data).all()):
            out.append((name, "nan" if bool(torch.isnan(data).any()) else "inf"))
    return out


def _plain_base(base, source):
    """The base built from its config alone, never loaded: what the adapter is saved from."""
    config = getattr(base, "config", None)
    got = source(config) if config is not None else None
    if got is None:
        return None
    cls = type(base)
    return {"imports": [import_of(cls)] + got["imports"],
            "setup": list(got["setup"]), "expr": "%s(%s)" % (cls.__name__, got["expr"])}


def install(when_imported):
    """An adapter's folder is rebuilt as its save; a loaded adapter carries its load's arguments."""
    names = ("adapter_name", "is_trainable", "config", "autocast_adapter_dtype", "ephemeral_gpu_offload",
             "low_cpu_mem_usage", "key_mapping")

    def patch(module):
        remember_saves(module.PeftModel)
        note_loads(module.PeftModel, positional=names, skip=2)
    when_imported("peft.peft_model", patch)


def rebuild(value, source):
    peft = sys.modules.get("peft")
    if peft is None:
        return None
    model_cls = getattr(sys.modules.get("peft.peft_model"), "PeftModel", None)
    if isinstance(model_cls, type) and isinstance(value, model_cls):
        return _model(peft, value, source)
    config_cls = getattr(sys.modules.get("peft.config"), "PeftConfig", None)
    if isinstance(config_cls, type) and isinstance(value, config_cls):
        return _config(value, source)
    return None
