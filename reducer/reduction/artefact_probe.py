"""Run in the user's interpreter (by path, so reprobot need not be importable there):
``python artefact_probe.py config|adapter PATH`` prints, as JSON, what rebuilding the artefact
in code takes: the values that differ from the class's defaults, the class, the model type.
Offline: it reads the folder and nothing else."""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# written back by the config that reads them; never worth repeating in a repro
_LOADING_KEYS = {"transformers_version", "_name_or_path", "architectures", "_commit_hash", "base_model_name_or_path",
                 "revision", "auto_mapping", "peft_type"}


def _plain(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if hasattr(value, "value"):      # an Enum
        return value.value
    raise TypeError(type(value).__name__)


def _differs(values, defaults):
    """The entries of ``values`` a default-built config does not already have (nested configs
    entry by entry): what a reader of the repro needs to see."""
    out = {}
    for key, value in values.items():
        default = defaults.get(key, object())
        if value == default:
            continue
        if isinstance(value, dict) and isinstance(default, dict) and key.endswith("_config"):
            value = _differs(value, default)
        out[key] = value
    return out


def config(path):
    from transformers import AutoConfig
    cfg = AutoConfig.from_pretrained(path)
    values = {k: v for k, v in cfg.to_diff_dict().items() if k not in _LOADING_KEYS}
    try:
        defaults = type(cfg)().to_dict()
    except Exception:       # a config class that needs arguments: its diff against the base class
        defaults = {}
    values = {"model_type": cfg.model_type, **_differs(values, defaults)}
    return {"class": type(cfg).__name__, "module": type(cfg).__module__, "model_type": cfg.model_type,
            "architectures": list(getattr(cfg, "architectures", None) or []), "values": values}


def adapter(path):
    from peft import PeftConfig
    cfg = PeftConfig.from_pretrained(path)
    default = type(cfg)()
    values = {}
    for key, value in cfg.to_dict().items():
        if key in _LOADING_KEYS or value == getattr(default, key, object()):
            continue
        values[key] = value
    return {"class": type(cfg).__name__, "module": type(cfg).__module__, "values": values,
            "base": cfg.base_model_name_or_path}


if __name__ == "__main__":
    kind, target = sys.argv[1], sys.argv[2]
    print(json.dumps({"config": config, "adapter": adapter}[kind](target), default=_plain))
