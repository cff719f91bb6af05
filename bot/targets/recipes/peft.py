"""peft's value recipes (reducer/recipes.py is the contract). Runs in the USER's interpreter.

- a ``PeftConfig`` (``LoraConfig``...) -> its class with the fields that differ from its defaults;
- a ``PeftModel`` -> ``get_peft_model(<its base, rebuilt>, <its config>)``; one that
  ``PeftModel.from_pretrained`` loaded (``install`` notes its keyword arguments) -> that adapter
  saved first from a fresh copy of the base, then loaded onto the rebuilt base with the same
  keyword arguments (the load is where PEFT re-dispatches an offloaded base).
"""
import sys

ADAPTER = "reprobot_adapter"
_SKIP = frozenset({"base_model_name_or_path", "revision", "peft_type", "runtime_config", "inference_mode",
                   "auto_mapping"})


def _merge(into, got):
    for key in ("imports", "setup"):
        for line in got[key]:
            if line not in into[key]:
                into[key].append(line)


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
    out = {"imports": ["from peft import %s" % cls.__name__], "setup": [], "expr": ""}
    parts = []
    for f in dataclasses.fields(cfg):
        if not f.init or f.name in _SKIP:
            continue
        value = getattr(cfg, f.name)
        if default is not None and _plain(value) == _plain(getattr(default, f.name, object())):
            continue
        got = source(_plain(value))
        if got is None:
            return None
        _merge(out, got)
        parts.append("%s=%s" % (f.name, got["expr"]))
    out["expr"] = "%s(%s)" % (cls.__name__, ", ".join(parts))
    return out


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
    _merge(out, got_base)
    _merge(out, got_cfg)
    named = "" if name == "default" else ", adapter_name=%r" % name
    noted = getattr(model, "_reprobot_load", None)
    if isinstance(noted, dict):
        parts = []
        for key, value in noted.items():
            got = source(value)
            if got is None or not key.isidentifier():
                return None
            _merge(out, got)
            parts.append("%s=%s" % (key, got["expr"]))
        plain = _plain_base(base, source)
        if plain is None:
            return None
        _merge(out, plain)
        out["imports"].append("from peft import PeftModel, get_peft_model")
        # saved under the default name (another name saves into a subfolder); loaded under its own
        out["setup"].append("get_peft_model(%s, %s).save_pretrained(%r)" % (plain["expr"], got_cfg["expr"], ADAPTER))
        out["expr"] = "PeftModel.from_pretrained(%s)" % ", ".join([got_base["expr"], repr(ADAPTER)] + parts)
        return out
    out["imports"].append("from peft import get_peft_model")
    out["expr"] = "get_peft_model(%s, %s%s)" % (got_base["expr"], got_cfg["expr"], named)
    return out


def _plain_base(base, source):
    """The base built from its config alone, never loaded: what the adapter is saved from."""
    config = getattr(base, "config", None)
    got = source(config) if config is not None else None
    if got is None:
        return None
    cls = type(base)
    return {"imports": ["from %s import %s" % (_home(cls), cls.__name__)] + got["imports"],
            "setup": list(got["setup"]), "expr": "%s(%s)" % (cls.__name__, got["expr"])}


def _home(cls):
    top = sys.modules.get(cls.__module__.split(".")[0])
    return top.__name__ if top is not None and getattr(top, cls.__name__, None) is cls else cls.__module__


# folders adapters were saved into: a path the script wrote is rebuilt as the save that writes it
_SAVED = {}


def _saved_path(value, source):
    import os
    try:
        path = os.path.abspath(os.fspath(value))
    except Exception:
        return None
    model = _SAVED.get(path)
    got = source(model) if model is not None else None
    if got is None:
        return None
    name = "reprobot_" + (os.path.basename(path.rstrip(os.sep)) or "adapter")
    setup = got["setup"] + ["%s.save_pretrained(%r)" % (got["expr"], name)]
    return {"imports": got["imports"], "setup": setup, "expr": repr(name)}


def _note_saves(module):
    import os
    cls = getattr(module, "PeftModel", None)
    real = getattr(cls, "save_pretrained", None)
    if real is None or getattr(real, "_reprobot", False):
        return

    def save_pretrained(self, save_directory, *args, **kwargs):
        out = real(self, save_directory, *args, **kwargs)
        try:
            if len(_SAVED) < 16:
                _SAVED[os.path.abspath(os.fspath(save_directory))] = self
        except Exception:
            pass
        return out
    save_pretrained._reprobot = True
    save_pretrained.__wrapped__ = real
    save_pretrained.__name__ = real.__name__
    save_pretrained.__qualname__ = real.__qualname__
    cls.save_pretrained = save_pretrained


def install(when_imported):
    """Note the keyword arguments of every ``PeftModel.from_pretrained``, and the folder of every
    ``save_pretrained``."""
    when_imported("peft.peft_model", _note_saves)

    def patch(module):
        cls = getattr(module, "PeftModel", None)
        real = cls.__dict__.get("from_pretrained") if cls is not None else None
        if not isinstance(real, classmethod) or getattr(real.__func__, "_reprobot", False):
            return
        fn = real.__func__

        def from_pretrained(cls, model, model_id, *args, **kwargs):
            loaded = fn(cls, model, model_id, *args, **kwargs)
            try:
                noted = dict(kwargs)
                names = ("adapter_name", "is_trainable", "config", "autocast_adapter_dtype",
                         "ephemeral_gpu_offload", "low_cpu_mem_usage", "key_mapping")
                noted.update(zip(names, args))
                noted.pop("config", None)
                loaded._reprobot_load = noted
            except Exception:
                pass
            return loaded
        from_pretrained._reprobot = True
        from_pretrained.__wrapped__ = fn
        from_pretrained.__name__ = fn.__name__
        from_pretrained.__qualname__ = fn.__qualname__
        cls.from_pretrained = classmethod(from_pretrained)
    when_imported("peft.peft_model", patch)


def rebuild(value, source):
    peft = sys.modules.get("peft")
    if peft is None:
        return None
    import os
    if isinstance(value, (str, os.PathLike)):
        return _saved_path(value, source)
    model_cls = getattr(sys.modules.get("peft.peft_model"), "PeftModel", None)
    if isinstance(model_cls, type) and isinstance(value, model_cls):
        return _model(peft, value, source)
    config_cls = getattr(sys.modules.get("peft.config"), "PeftConfig", None)
    if isinstance(config_cls, type) and isinstance(value, config_cls):
        return _config(value, source)
    return None
