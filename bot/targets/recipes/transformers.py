"""transformers' value recipes (reducer/analysis/recipes.py is the contract). Runs in the USER's interpreter.

- a config (``PretrainedConfig``, ``GenerationConfig``, a quantization config such as
  ``BitsAndBytesConfig``, a feature extractor) -> its class called with the values that differ from that class's
  defaults (a sub-config as a dict of its own differences), checked by building it again;
- ``TrainingArguments`` (and the argument classes built on it, trl's configs too) -> its class
  called with the fields that differ from a default instance's, a path of the machine as a fresh
  relative name, checked by building it again;
- a tokenizer's output (``BatchEncoding``) -> ``BatchEncoding({...})`` of its items rebuilt;
- a fast tokenizer built in code over a small vocabulary (WordLevel, BPE, WordPiece, Unigram) ->
  its model, normalizer, pre-tokenizer, post-processor, decoder, added tokens, special tokens and
  chat template, built again in code (its whole JSON read back where the parts are not their
  constructors' keywords);
- a model -> ``Class(Config(...))`` with its dtype, device and eval mode, and its generation config
  where it is not the one a model built from that config gets; a model whose load is
  part of the failure (quantized, or placed by a ``device_map``) -> a tiny checkpoint saved first
  and ``Class.from_pretrained(that, **the load's keyword arguments)``, which ``install`` notes on
  every model ``from_pretrained`` returns;
- a pipeline -> ``pipeline(task, model=..., tokenizer=..., ...)`` with its parts rebuilt (its class
  called the same way where it has no task).
"""
import os
import sys

# merge, import_of, call_of, fresh_name, remember_saves and note_loads are given by reducer/analysis/recipes.py's loader
# flake8: noqa: F821

# Not the config's to say: versions, names and paths of the checkpoint it was read from, its dtype
# (the model's own, written on the model), and how it was quantized (the load's keyword arguments).
_SKIP = frozenset({"transformers_version", "model_type", "architectures", "_name_or_path", "_commit_hash",
                   "dtype", "torch_dtype", "_attn_implementation_autoset", "auto_map", "quant_method",
                   "_load_in_4bit", "_load_in_8bit", "_from_model_config", "quantization_config",
                   "feature_extractor_type", "processor_class"})
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
    """A config, a quantization config, or a feature extractor (its settings are a config's: the
    class called with those that differ from its defaults, checked by building it again)."""
    bases = [getattr(tf, n, None) for n in ("PretrainedConfig", "PreTrainedConfig", "GenerationConfig")]
    bases.append(getattr(sys.modules.get("transformers.feature_extraction_utils"), "FeatureExtractionMixin", None))
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
    # Not what the model's config says as well: a library may have synced those while the script
    # ran (a Trainer turns ``use_cache`` back on: two values that differ), and the config's
    # recipe carries them. But a value the config holds and the generation config does not
    # hold at all (None) is the generation config's own:
    # ``model.config.decoder_start_token_id = 2`` set after the model was built never reaches
    # ``generate`` (heldout4's title generator), and a model built from that config would get it.
    config = model.config.to_dict()
    own = [k for k in set(mine) | set(fresh) if not k.startswith("_") and k != "transformers_version"
           and (k not in config or (mine.get(k) is None and config[k] is not None))
           and mine.get(k) != fresh.get(k)]
    return source(gen) if own else None


_MAX_VOCAB = 500
_MAX_JSON = 16000
# A component module -> the JSON key under which its Sequence holds its items.
_SEQUENCE_KEYS = {"normalizers": "normalizers", "pre_tokenizers": "pretokenizers", "decoders": "decoders",
                  "processors": "processors"}


def _component(module, state):
    """A normalizer / pre-tokenizer / decoder / post-processor from its JSON as ``module.Type(...)``,
    or None where its JSON is not its constructor's keywords (the whole-JSON form then applies)."""
    kind = state.get("type")
    if not isinstance(kind, str) or not kind.isidentifier():
        return None
    if kind == "Sequence":
        items = [_component(module, item) for item in state.get(_SEQUENCE_KEYS[module]) or []]
        return None if None in items else "%s.Sequence([%s])" % (module, ", ".join(items))
    if kind == "TemplateProcessing":
        return _template(state)
    args = ", ".join("%s=%r" % (k, v) for k, v in state.items() if k != "type" and v is not None)
    return "%s.%s(%s)" % (module, kind, args)


def _template(state):
    """``TemplateProcessing(single="<s> $A </s>", pair=..., special_tokens=[...])`` from its JSON."""
    def text(pieces):
        out = []
        for piece in pieces:
            (what, body), = piece.items()
            name = body["id"] if what == "SpecialToken" else "$" + body["id"]
            out.append(name if not body.get("type_id") else "%s:%d" % (name, body["type_id"]))
        return " ".join(out)
    specials = []
    for token, body in state.get("special_tokens", {}).items():
        if len(body.get("ids") or []) != 1 or body.get("tokens") != [token]:
            return None
        specials.append((token, body["ids"][0]))
    return "processors.TemplateProcessing(single=%r, pair=%r, special_tokens=%r)" % (
        text(state["single"]), text(state["pair"]), specials)


def _ids(vocab):
    """A vocabulary whose ids are its tokens' positions as those tokens enumerated: shrinking the
    list keeps the ids distinct, where the literal ids, shrunk one by one, collide (a vocabulary a
    warm run reads the same way every time and a cold run does not)."""
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        return repr(dict(vocab))
    return "{t: i for i, t in enumerate(%r)}" % tokens


def _model_expr(model):
    """``models.<Type>(vocab=..., ...)`` for a small vocabulary, or None."""
    kind, vocab = model.get("type"), model.get("vocab")
    if kind not in ("WordLevel", "BPE", "WordPiece", "Unigram") or vocab is None or len(vocab) > _MAX_VOCAB:
        return None
    args = ["vocab=" + (_ids(vocab) if kind != "Unigram" else repr([tuple(v) for v in vocab]))]
    if kind == "BPE":
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model.get("merges") or []]
        args.append("merges=%r" % merges)
    # (an unset option is None in the JSON and absent from the constructor's call)
    args += ["%s=%r" % (k, v) for k, v in model.items() if k not in ("type", "vocab", "merges") and v is not None]
    return "models.%s(%s)" % (kind, ", ".join(args))


def _tokenizer(tok, source):
    """A fast tokenizer built in code over a small vocabulary (WordLevel, BPE, WordPiece, Unigram):
    its model, normalizer, pre-tokenizer, post-processor and decoder written as the constructors
    that build them, the tokens added to it, its special tokens and chat template; where its JSON is
    not its constructors' keywords, the whole JSON read back (``Tokenizer.from_str``) while it is
    small. Checked by building it again: the JSON, the special tokens and the chat template must
    match. A large vocabulary (a tokenizer from the Hub) has no recipe: its slice stays."""
    import json
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        return None
    text = backend.to_str()
    state = json.loads(text)
    cls = type(tok)
    imported = import_of(cls)
    if imported is None:
        return None
    kwargs = ["tokenizer_object=reprobot_tokenizer"]
    for key, value in sorted(tok.special_tokens_map.items()):
        if isinstance(value, str):
            kwargs.append("%s=%r" % (key, value))
    if tok.padding_side != "right":
        kwargs.append("padding_side=%r" % tok.padding_side)
    if isinstance(tok.model_max_length, int) and tok.model_max_length < 10 ** 9:
        kwargs.append("model_max_length=%d" % tok.model_max_length)
    if getattr(tok, "chat_template", None) is not None:
        kwargs.append("chat_template=%r" % (tok.chat_template,))
    expr = "%s(%s)" % (cls.__name__, ", ".join(kwargs))

    def same(imports, setup):
        try:
            space = {}
            exec("\n".join(imports + setup), space)
            again = eval(expr, space)
        except Exception:
            return False
        return type(again) is cls and json.loads(again.backend_tokenizer.to_str()) == state \
            and again.special_tokens_map == tok.special_tokens_map \
            and getattr(again, "chat_template", None) == getattr(tok, "chat_template", None)

    for write in (_written, _whole):      # the readable form first; the whole JSON only if it fails
        written = write(state, text)
        if written is None:
            continue
        imports = ["from tokenizers import " + ", ".join(sorted(written["modules"]))] + [imported]
        if same(imports, written["setup"]):
            return {"imports": imports, "setup": written["setup"], "expr": expr}
    return None


def _written(state, _text):
    """The tokenizer as the constructors that build it (see _tokenizer), or None."""
    model = _model_expr(state.get("model") or {})
    if model is None:
        return None
    modules = {"Tokenizer", "models"}
    setup = ["reprobot_tokenizer = Tokenizer(%s)" % model]
    for key, module in (("normalizer", "normalizers"), ("pre_tokenizer", "pre_tokenizers"),
                        ("post_processor", "processors"), ("decoder", "decoders")):
        if state.get(key) is None:
            continue
        part = _component(module, state[key])
        if part is None:
            return None
        modules.add(module)
        setup.append("reprobot_tokenizer.%s = %s" % (key, part))
    special = [t["content"] for t in state.get("added_tokens") or [] if t.get("special")]
    plain = [t["content"] for t in state.get("added_tokens") or [] if not t.get("special")]
    if special:
        setup.append("reprobot_tokenizer.add_special_tokens(%r)" % special)
    if plain:
        setup.append("reprobot_tokenizer.add_tokens(%r)" % plain)
    return {"modules": modules, "setup": setup}


def _whole(_state, text):
    """The tokenizer's whole JSON read back, while it is small."""
    if len(text) > _MAX_JSON:
        return None
    return {"modules": {"Tokenizer"}, "setup": ["reprobot_tokenizer = Tokenizer.from_str(%r)" % text]}


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


_PIPELINE_PARTS = ("model", "tokenizer", "feature_extractor", "image_processor", "video_processor", "processor")


def _pipeline(pipe, source):
    """A pipeline -> ``pipeline(task, model=..., tokenizer=..., ...)``, every part it holds
    rebuilt (a part without a recipe: None, its slice is kept). A zero-shot worker's
    ``clf(texts, labels, hypothesis_template=...)`` fails in the pipeline's own code, so the
    pipeline is the value, as a model is for ``generate``."""
    task = getattr(pipe, "task", "") or ""
    imp = "from transformers import pipeline" if task else import_of(type(pipe))
    if imp is None:
        return None
    out = {"imports": [imp], "setup": [], "expr": ""}
    parts = []
    for key in _PIPELINE_PARTS:
        part = getattr(pipe, key, None)
        if part is None:
            continue
        got = source(part)
        if got is None:
            return None
        merge(out, got)
        parts.append("%s=%s" % (key, got["expr"]))
    if not parts:
        return None
    out["expr"] = "%s(%s)" % ("pipeline" if task else type(pipe).__name__, ", ".join([repr(task)] * bool(task) + parts))
    return out


def rebuild(value, source):
    tf = sys.modules.get("transformers")
    if tf is None:
        return None
    pipe = getattr(sys.modules.get("transformers.pipelines.base"), "Pipeline", None)
    if isinstance(pipe, type) and isinstance(value, pipe):
        return _pipeline(value, source)
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
