"""transformers' value recipes (reducer/analysis/recipes.py is the contract). Runs in the USER's interpreter.

- a config (``PretrainedConfig``, ``GenerationConfig``, a quantization config such as
  ``BitsAndBytesConfig``) -> its class called with the values that differ from that class's
  defaults (a sub-config as a dict of its own differences), checked by building it again;
- ``TrainingArguments`` (and the argument classes built on it, trl's configs too) -> its class
  called with the fields that differ from a default instance's, a path of the machine as a fresh
  relative name, checked by building it again;
- a tokenizer's output (``BatchEncoding``) -> ``BatchEncoding({...})`` of its items rebuilt;
- a fast tokenizer built in code over a small WordLevel vocabulary -> that vocabulary, its
  pre-tokenizer and special tokens, built again in code;
- a model -> ``Class(Config(...))`` with its dtype, device and eval mode, and its generation config
  where it is not the one a model built from that config gets; a model whose load is
  part of the failure (quantized, or placed by a ``device_map``) -> a tiny checkpoint saved first
  and ``Class.from_pretrained(that, **the load's keyword arguments)``, which ``install`` notes on
  every model ``from_pretrained`` returns.
"""
import os
import sys

# merge, import_of, call_of, fresh_name, remember_saves and note_loads are given by reducer/analysis/recipes.py's loader
# flake8: noqa: F821

# Not the config's to say: versions, names and paths of the checkpoint it was read from, its dtype
# (the model's own, written on the model), and how it was quantized (the load's keyword arguments).
_SKIP = frozenset({"transformers_version", "model_type", "architectures", "_name_or_path", "_commit_hash",
                   "dtype", "torch_dtype", "_attn_implementation_autoset", "auto_map", "quant_method",
                   "_load_in_4bit", "_load_in_8bit", "_from_model_config", "quantization_config"})
CHECKPOINT = "reprobot_model"


def _call(cls, kwargs, source):
    """``Cls(k=v, ...)`` with every value rebuilt by ``source``; None when one cannot be."""
    return call_of(cls, {k: _plain(v) for k, v in kwargs.items()}, source)


def _plain(value):
    """A str/int enum member (``QuantizationMethod.BITS_AND_BYTES``) as its value, in containers too."""
    enum = sys.modules.get("enum")
    if enum is not None and isinstance(value, enum.Enum) and isinstance(value.value, (str, int)):
        return value.value
    if type(value) is dict:
        return {k: _plain(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_plain(v) for v in value)
    return value


def _diff(mine, default):
    return {k: v for k, v in mine.items() if k not in _SKIP and not k.startswith("_")
            and (k not in default or default[k] != v)}


def _clean(d):
    """A config's dict without what it does not decide (_SKIP), at every level: two configs that
    build the same model compare equal."""
    if isinstance(d, dict):
        return {k: _clean(v) for k, v in d.items() if k not in _SKIP and not str(k).startswith("_")}
    return d


def _config_kwargs(cfg):
    """The keyword arguments that rebuild ``cfg``: its differences from its class's defaults (a
    sub-config as the differences from the sub-config class's), or every value when those do not
    build an equal config."""
    cls = type(cfg)
    mine = cfg.to_dict()
    try:
        default = cls().to_dict()
    except Exception:
        default = {}
    kwargs = _diff(mine, default)
    for key, sub_cls in (getattr(cls, "sub_configs", None) or {}).items():
        if isinstance(mine.get(key), dict) and isinstance(sub_cls, type):
            try:
                sub_default = sub_cls().to_dict()
            except Exception:
                sub_default = {}
            kwargs[key] = _diff(mine[key], sub_default)
    full = _clean(mine)
    for candidate in (kwargs, full):
        try:
            again = cls(**candidate).to_dict()
        except Exception:
            continue
        if _clean(again) == full:
            return candidate
    return kwargs


def _config(cfg, source):
    return _call(type(cfg), _config_kwargs(cfg), source)


def _arguments(args, source):
    """``TrainingArguments(<fields that differ from a default instance's>)``; None unless the one
    built from them has the same fields (``__post_init__`` derives some from others)."""
    fields = sys.modules["dataclasses"].fields
    cls = type(args)
    try:
        default = cls()
    except Exception:
        return None
    kwargs = {}
    for f in fields(args):
        mine = getattr(args, f.name, None)
        if f.init and not f.name.startswith("_") and mine != getattr(default, f.name, None):
            kwargs[f.name] = _plain_path(_plain(mine))
    try:
        again = cls(**kwargs)
    except Exception:
        return None
    paths = {k for k, v in kwargs.items() if isinstance(getattr(args, k), str) and os.path.isabs(getattr(args, k))}
    if any(getattr(again, f.name, None) != getattr(args, f.name, None) for f in fields(args)
           if f.init and f.name not in paths and not f.name.startswith("_")):
        return None
    return _call(cls, kwargs, source)


def _is_arguments(tf, value):
    base = getattr(tf, "TrainingArguments", None)
    return isinstance(base, type) and isinstance(value, base) and "dataclasses" in sys.modules


def _is_config(tf, value):
    bases = [getattr(tf, n, None) for n in ("PretrainedConfig", "PreTrainedConfig", "GenerationConfig")]
    quant = sys.modules.get("transformers.utils.quantization_config")
    bases.append(getattr(quant, "QuantizationConfigMixin", None))
    return any(isinstance(b, type) and isinstance(value, b) for b in bases)


def _plain_path(value):
    """A path of the user's machine given to a load (``offload_folder``) as a fresh relative name."""
    if isinstance(value, str) and os.path.isabs(value):
        return fresh_name(value) or "reprobot_dir"
    return value


def _loaded(tf, model):
    """How a model was loaded, when the load matters: (keyword arguments) or None."""
    quantized = bool(getattr(model, "is_quantized", False)) or getattr(model, "hf_quantizer", None) is not None
    placed = getattr(model, "hf_device_map", None)
    if not quantized and not placed:
        return None
    noted = getattr(model, "_reprobot_load", None)
    if isinstance(noted, dict):
        return {k: _plain_path(v) for k, v in noted.items()}
    kwargs = {}
    if quantized and getattr(model.config, "quantization_config", None) is not None:
        kwargs["quantization_config"] = model.config.quantization_config
    if placed:
        kwargs["device_map"] = dict(placed)
    return kwargs


def _model(tf, model, source):
    cls = type(model)
    imp = import_of(cls)
    config = _config(model.config, source)
    if imp is None or config is None:
        return None
    out = {"imports": [imp], "setup": [], "expr": ""}
    merge(out, config)
    built = "%s(%s)" % (cls.__name__, config["expr"])
    load = _loaded(tf, model)
    if load is not None:
        parts = []
        for key, value in load.items():
            got = source(value)
            if got is None or not key.isidentifier():
                return None
            merge(out, got)
            parts.append("%s=%s" % (key, got["expr"]))
        out["setup"].append("%s.save_pretrained(%r)" % (built, CHECKPOINT))
        out["expr"] = "%s.from_pretrained(%s)" % (cls.__name__, ", ".join([repr(CHECKPOINT)] + parts))
        return out
    expr = built
    torch = sys.modules.get("torch")
    dtype = str(getattr(model, "dtype", "torch.float32"))
    if torch is not None and dtype.startswith("torch.") and dtype != "torch.float32":
        expr += ".to(%s)" % dtype
        if "import torch" not in out["imports"]:
            out["imports"].append("import torch")
    device = getattr(model, "device", None)
    if device is not None and getattr(device, "type", "cpu") not in ("cpu", "meta"):
        expr += ".to(%r)" % (str(device),)
    if not getattr(model, "training", True):
        expr += ".eval()"
    gen = _own_generation_config(model, source)
    if gen is None:
        out["expr"] = expr
        return out
    # a generation config of its own (set or loaded): the model is bound, given it, and read
    name = "reprobot_" + cls.__name__.lower()
    merge(out, gen)
    out["setup"] += ["%s = %s" % (name, expr), "%s.generation_config = %s" % (name, gen["expr"])]
    out["expr"] = name
    return out


def _own_generation_config(model, source):
    """The recipe of the model's generation config where it is not what a model built from its
    config gets (``GenerationConfig.from_model_config``): the script set or loaded one, and
    ``generate`` reads it. None when it is that default, or has no recipe."""
    gen = getattr(model, "generation_config", None)
    can = getattr(model, "can_generate", None)
    if gen is None or not callable(can) or not can():
        return None
    try:
        fresh = type(gen).from_model_config(model.config).to_dict()
        mine = gen.to_dict()
    except Exception:
        return None
    # Only what the model's config does not also say: a library may have synced those while the
    # script ran (a Trainer turns ``use_cache`` back on), and the config's recipe carries them.
    config = model.config.to_dict()
    own = [k for k in set(mine) | set(fresh) if not k.startswith("_") and k != "transformers_version"
           and k not in config and mine.get(k) != fresh.get(k)]
    return source(gen) if own else None


_MAX_VOCAB = 500


def _tokenizer(tok, source):
    """A fast tokenizer built in code over a small WordLevel vocabulary: the same vocabulary,
    pre-tokenizer and special tokens, checked by building it again (its JSON and its special
    tokens must match). Anything else (a BPE from the Hub) has no recipe: its slice stays."""
    import json
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        return None
    state = json.loads(backend.to_str())
    model = state.get("model") or {}
    if model.get("type") != "WordLevel" or len(model.get("vocab") or {}) > _MAX_VOCAB:
        return None
    if state.get("normalizer") is not None or state.get("decoder") is not None:
        return None     # (added special tokens come back from the special-token keywords: checked below)
    setup = ["reprobot_tokenizer = Tokenizer(models.WordLevel(vocab=%r, unk_token=%r))"
             % (dict(model["vocab"]), model.get("unk_token"))]
    imports = ["from tokenizers import Tokenizer, models", "from transformers import PreTrainedTokenizerFast"]
    pre = backend.pre_tokenizer
    if pre is not None:
        text = repr(pre)
        if not (text.endswith("()") and text[:-2].isidentifier()):
            return None
        setup.append("reprobot_tokenizer.pre_tokenizer = pre_tokenizers.%s" % text)
        imports.append("from tokenizers import pre_tokenizers")
    kwargs = ["tokenizer_object=reprobot_tokenizer"]
    for key, value in sorted(tok.special_tokens_map.items()):
        if isinstance(value, str):
            kwargs.append("%s=%r" % (key, value))
    if tok.padding_side != "right":
        kwargs.append("padding_side=%r" % tok.padding_side)
    if isinstance(tok.model_max_length, int) and tok.model_max_length < 10 ** 9:
        kwargs.append("model_max_length=%d" % tok.model_max_length)
    expr = "PreTrainedTokenizerFast(%s)" % ", ".join(kwargs)
    try:
        space = {}
        exec("\n".join(imports + setup), space)
        again = eval(expr, space)
    except Exception:
        return None
    if type(again) is not type(tok) or json.loads(again.backend_tokenizer.to_str()) != state \
            or again.special_tokens_map != tok.special_tokens_map:
        return None
    return {"imports": imports, "setup": setup, "expr": expr}


def install(when_imported):
    """A model's folder is rebuilt as its save; a model carries its load's keyword arguments."""
    def patch(module):
        remember_saves(module.PreTrainedModel)
        note_loads(module.PreTrainedModel)
    when_imported("transformers.modeling_utils", patch)


def _batch(value, source):
    """A tokenizer's output (``BatchEncoding``, a dict of ids and masks) -> the class around its
    items rebuilt: ``model.generate(**enc)`` reads it as the dict it is."""
    got = source(dict(value.data))
    if got is None:
        return None
    out = {"imports": ["from transformers import BatchEncoding"], "setup": [], "expr": ""}
    merge(out, got)
    out["expr"] = "BatchEncoding(%s)" % got["expr"]
    return out


def rebuild(value, source):
    tf = sys.modules.get("transformers")
    if tf is None:
        return None
    batch = getattr(sys.modules.get("transformers.tokenization_utils_base"), "BatchEncoding", None)
    if isinstance(batch, type) and isinstance(value, batch):
        return _batch(value, source)
    model_base = getattr(sys.modules.get("transformers.modeling_utils"), "PreTrainedModel", None)
    if isinstance(model_base, type) and isinstance(value, model_base):
        return _model(tf, value, source)
    if _is_config(tf, value):
        return _config(value, source)
    if _is_arguments(tf, value):
        return _arguments(value, source)
    if type(value).__module__.startswith("transformers.tokenization") and hasattr(value, "backend_tokenizer"):
        return _tokenizer(value, source)
    return None
