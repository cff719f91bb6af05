# reprobot corpus: nested_config_registry
# Exercises: configuration in nested dicts merged from several places (defaults, a preset,
#   "environment" overrides), a registry of step classes looked up by name from the config,
#   REGISTRY[key] lookups, a value (the wrap width) that only reaches the failing call
#   through three merges and a computed expression.
# Expected failure: ValueError: invalid width 0 (must be > 0)
#   raised by `textwrap.wrap(text, width=self.width)` in WrapStep.apply (line 101, marked FAILING LINE):
#   the "compact" preset sets margin 80 against a line length of 80.
# Ideal result (2 statements): import textwrap; textwrap.wrap('', width=0)
from __future__ import annotations

import copy
import re
import string
import textwrap
import unicodedata
from typing import Any

DEFAULTS: dict[str, Any] = {
    "pipeline": {
        "steps": ["normalize", "strip_urls", "wrap", "number"],
        "options": {
            "normalize": {"form": "NFKC", "lower": False},
            "strip_urls": {"placeholder": "<url>"},
            "wrap": {"line_length": 80, "margin": 4},
            "number": {"start": 1, "fmt": "{:>3}. "},
        },
    },
    "output": {"encoding": "utf-8", "trailing_newline": True},
}

PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    "compact": {"pipeline": {"options": {"wrap": {"margin": 80}, "number": {"fmt": "{}. "}}}},
    "plain": {"pipeline": {"steps": ["normalize"]}},
}

ENV_OVERRIDES: dict[str, Any] = {"output": {"trailing_newline": False}}

STEPS: dict[str, type[Step]] = {}


def register(name: str):
    def deco(cls: type[Step]) -> type[Step]:
        STEPS[name] = cls
        cls.step_name = name
        return cls

    return deco


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve_config(preset: str) -> dict[str, Any]:
    cfg = deep_merge(DEFAULTS, PRESETS[preset])
    return deep_merge(cfg, ENV_OVERRIDES)


class Step:
    step_name = "?"

    def __init__(self, **options: Any):
        self.options = options

    def apply(self, lines: list[str]) -> list[str]:
        raise NotImplementedError


@register("normalize")
class NormalizeStep(Step):
    def apply(self, lines: list[str]) -> list[str]:
        form = self.options.get("form", "NFC")
        out = [unicodedata.normalize(form, line) for line in lines]
        return [line.lower() for line in out] if self.options.get("lower") else out


@register("strip_urls")
class StripUrlsStep(Step):
    URL = re.compile(r"https?://\S+")

    def apply(self, lines: list[str]) -> list[str]:
        return [self.URL.sub(self.options["placeholder"], line) for line in lines]


@register("wrap")
class WrapStep(Step):
    @property
    def width(self) -> int:
        return self.options["line_length"] - self.options["margin"]

    def apply(self, lines: list[str]) -> list[str]:
        text = " ".join(lines)
        return textwrap.wrap(text, width=self.width)  # FAILING LINE: 80 - 80 == 0


@register("number")
class NumberStep(Step):
    def apply(self, lines: list[str]) -> list[str]:
        fmt, start = self.options["fmt"], self.options["start"]
        return [fmt.format(i) + line for i, line in enumerate(lines, start)]


def build_pipeline(cfg: dict[str, Any]) -> list[Step]:
    options = cfg["pipeline"]["options"]
    return [STEPS[name](**options.get(name, {})) for name in cfg["pipeline"]["steps"]]


def render(lines: list[str], cfg: dict[str, Any]) -> str:
    text = "\n".join(lines)
    if cfg["output"]["trailing_newline"]:
        text += "\n"
    return text.encode(cfg["output"]["encoding"]).decode(cfg["output"]["encoding"])


def is_printable(text: str) -> bool:
    return all(ch in string.printable for ch in text)


SAMPLE = [
    "Release notes: see https://example.invalid/notes for the full list of changes.",
    "The tokenizer now handles ﬁ ligatures and full-width ＡＢＣ letters.",
    "Bug fixes: offloading, quantized loading, adapter merging.",
]


def main() -> None:
    cfg = resolve_config("compact")
    lines = list(SAMPLE)
    for step in build_pipeline(cfg):
        lines = step.apply(lines)
    out = render(lines, cfg)
    print(out, end="")
    print("printable:", is_printable(out))


if __name__ == "__main__":
    main()
