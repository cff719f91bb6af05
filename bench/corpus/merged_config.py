# reprobot corpus: merged_config
# Exercises: logging settings merged from three dicts (package defaults, a named preset and the
#   user's overrides, with `{**a, **b}` and dict.update), filtered to the keys the call accepts
#   and passed as **kwargs to logging.basicConfig, whose error names the user's value. Also: an
#   environment-variable layer that is empty here, a settings dataclass, a banner nobody needs.
# Expected failure: ValueError: Unknown level: 'verbose'
#   raised by `logging.basicConfig(**kwargs)` in configure_logging
#   (line 85, marked FAILING LINE), with the user's `--level=VERBOSE` lowercased on the way.
#   Library frames: logging/__init__.py:_checkLevel < setLevel < basicConfig.
# Ideal result (2 statements):
#   import logging
#   logging.basicConfig(level='verbose')
from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

DEFAULTS: dict[str, Any] = {
    "level": "INFO",
    "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
    "datefmt": "%H:%M:%S",
    "stream": None,
    "force": True,
    "color": False,
}
PRESETS: dict[str, dict[str, Any]] = {
    "quiet": {"level": "WARNING", "format": "%(levelname)s %(message)s"},
    "debug": {"level": "DEBUG", "datefmt": "%H:%M:%S.%f"},
    "ci": {"format": "::%(levelname)s:: %(message)s", "color": False},
}
ENV_PREFIX = "SVC_LOG_"
BASIC_CONFIG_KEYS = {"level", "format", "datefmt", "style", "stream", "filename", "filemode", "force"}


@dataclass
class Settings:
    preset: str
    overrides: dict[str, Any] = field(default_factory=dict)
    service: str = "ingest"


def from_env(environ: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if key.startswith(ENV_PREFIX):
            out[key[len(ENV_PREFIX):].lower()] = value
    return out


def parse_overrides(argv: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            continue
        out[key.lstrip("-").replace("-", "_")] = value.lower() if key.endswith("level") else value
    return out


def merged(settings: Settings, environ: dict[str, str]) -> dict[str, Any]:
    config = {**DEFAULTS, **PRESETS.get(settings.preset, {})}
    config.update(from_env(environ))
    config.update(settings.overrides)
    return config


def basic_config_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    kwargs = {k: v for k, v in config.items() if k in BASIC_CONFIG_KEYS and v is not None}
    if kwargs.get("stream") is None:
        kwargs["stream"] = sys.stderr
    return kwargs


def banner(settings: Settings, config: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in sorted(config.items()) if k != "format")
    return f"{settings.service}: logging preset {settings.preset!r} ({shown})"


def configure_logging(settings: Settings, environ: dict[str, str]) -> logging.Logger:
    config = merged(settings, environ)
    kwargs = basic_config_kwargs(config)
    logging.basicConfig(**kwargs)  # FAILING LINE: the user's level 'VERBOSE' is no level name
    logger = logging.getLogger(settings.service)
    logger.debug(banner(settings, config))
    return logger


def process(logger: logging.Logger, items: list[str]) -> int:
    done = 0
    for item in items:
        if not item.strip():
            logger.warning("skipping an empty item")
            continue
        done += 1
    return done


def main(argv: list[str]) -> int:
    settings = Settings("debug", parse_overrides(argv))
    environ = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    logger = configure_logging(settings, environ)
    logger.info("processed %d items", process(logger, ["a", "", "b"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
