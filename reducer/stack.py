"""What the engine asks of the stack it reduces failures in, and where the answers come from.

The engine defines this interface and never imports the bot: the targets (bot/targets/, one per
upstream repository) implement it, and the bot registers them at start-up (``register``, called
by bot/targets/registry.py when it is imported). The engine asks two things:

* which top-level import names are library code when a frame comes from an editable checkout
  (``.../transformers/src/transformers/trainer.py``): ``checkout_packages()``, read by the frame
  normaliser (reducer/failure/normalize.py). Frames under site-packages, dist-packages or the standard
  library are library frames whatever is registered;
* how a repro spells what it read from a local folder without the folder (reducer/reduction/standalone.py):
  ``config_by_type(owner)``, the call that builds a model config from its model type alone
  (``AutoConfig.for_model``), and ``adapter_wrapper(config_class)``, the call that puts an adapter
  config on a model (``get_peft_model``). None: no registered target knows one, and the rewrites
  that need it are not tried.

How a value of a library class is rebuilt at the boundary call is the other half of what a target
gives the engine; it runs in the user's interpreter, so it is handed over as files
(reducer/analysis/recipes.py), not through this module.

Used without the bot (nothing registered), the engine keeps the frame rule it always had:
``ENGINE_ALONE_CHECKOUTS`` below, the one list of the stack's names outside bot/targets/
(tests/test_stack_lists.py names it as the exception, and tests/test_engine_stack.py checks it is
exactly what the built-in targets register, so it cannot drift from them). It knows no
standalone spelling: those are the targets' alone.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Spelling:
    """Code a target writes into a repro, and what it imports: ``(module, name)`` pairs, each
    ``from module import name`` (added only where the repro does not bind ``name`` already)."""

    code: str
    imports: tuple[tuple[str, str], ...] = ()


class Stack(Protocol):
    """What a registered stack answers (bot/targets/registry.py's ``TargetsStack``)."""

    def checkout_packages(self) -> frozenset[str]:
        """Import names whose editable checkouts (``.../src/<name>/...``) are library code."""
        ...

    def config_by_type(self, owner: str) -> Spelling | None:
        """The callable that builds a config from a model type and its non-default values, for a
        repro that loaded through ``owner`` as the script spells it (``AutoConfig``,
        ``transformers.AutoModelForCausalLM``); None when no target has one."""
        ...

    def adapter_wrapper(self, config_class: str) -> Spelling | None:
        """The callable that wraps a model with an adapter config of ``config_class``
        (``get_peft_model``), with the imports for both; None when no target has one."""
        ...


# The engine used alone: the stack's editable checkouts it has always recognised (see above).
ENGINE_ALONE_CHECKOUTS = ("transformers|peft|accelerate|bitsandbytes|huggingface_hub|safetensors|tokenizers|trl|"
                          "diffusers|datasets|torch")


class _Alone:
    """What the engine knows with nothing registered."""

    def checkout_packages(self) -> frozenset[str]:
        return frozenset(ENGINE_ALONE_CHECKOUTS.split("|"))

    def config_by_type(self, owner: str) -> Spelling | None:
        return None

    def adapter_wrapper(self, config_class: str) -> Spelling | None:
        return None


ALONE: Stack = _Alone()
_registered: list[Stack] = []


def register(stack: Stack) -> Stack:
    """Make ``stack`` what the engine asks (the last registered wins; ``unregister`` restores)."""
    _registered.append(stack)
    return stack


def unregister(stack: Stack) -> None:
    _registered.remove(stack)


def current() -> Stack:
    return _registered[-1] if _registered else ALONE


def checkout_packages() -> frozenset[str]:
    return current().checkout_packages()


def config_by_type(owner: str) -> Spelling | None:
    return current().config_by_type(owner)


def adapter_wrapper(config_class: str) -> Spelling | None:
    return current().adapter_wrapper(config_class)


def checkout_pattern() -> re.Pattern[str]:
    """``/src/`` followed by a checkout package's folder: the point a checkout's frame is cut at."""
    return _checkout_pattern(checkout_packages())


_PATTERNS: dict[frozenset[str], re.Pattern[str]] = {}


def _checkout_pattern(names: frozenset[str]) -> re.Pattern[str]:
    found = _PATTERNS.get(names)
    if found is None:
        alternatives = "|".join(re.escape(n) for n in sorted(names))
        found = re.compile(r"[\\/]src[\\/](?=(?:" + (alternatives or r"(?!)") + r")[\\/])")
        if len(_PATTERNS) > 32:       # registrations come and go in tests: keep the cache small
            _PATTERNS.clear()
        _PATTERNS[names] = found
    return found
