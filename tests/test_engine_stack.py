"""The engine's interface to what the targets know (reducer/stack.py): the engine alone keeps the
editable-checkout rule it always had and knows no standalone spelling; the bot registers the
targets at start-up, so a target added later is known to the engine at once, and reducer/reduction/standalone.py
writes a config or adapter folder with the spelling the owning target gives, never its own."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import targets as registry
from bot.targets import Target, textarea
from bot.targets.registry import ENGINE_STACK
from reducer import stack
from reducer.analysis.artefacts import Context, find_reads
from reducer.failure.normalize import library_path
from reducer.reduction.standalone import rewrites

ROOT = Path(__file__).resolve().parents[1]


def test_the_engine_alone_keeps_its_rule_and_imports_no_bot() -> None:
    code = textwrap.dedent("""
        import json, sys
        from reducer import stack
        from reducer.failure.normalize import library_path
        print(json.dumps({
            "stack": type(stack.current()).__name__,
            "transformers": library_path("/home/u/transformers/src/transformers/trainer.py"),
            "datasets": library_path("/home/u/datasets/src/datasets/load.py"),
            "mine": library_path("/home/u/myproj/src/myproj/train.py"),
            "config": stack.config_by_type("AutoModel"), "adapter": stack.adapter_wrapper("LoraConfig"),
            "bot": sorted(m for m in sys.modules if m == "bot" or m.startswith("bot."))}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=True)
    got = json.loads(proc.stdout)
    assert got == {"stack": "_Alone", "transformers": "transformers/trainer.py", "datasets": "datasets/load.py",
                   "mine": None, "config": None, "adapter": None, "bot": []}


def test_the_bot_registers_the_targets_and_the_engines_rule_is_theirs() -> None:
    assert stack.current() is ENGINE_STACK
    # The engine's own rule is what the built-in targets (and the owners filed elsewhere) register:
    # a target that changes its packages changes this test, not the engine silently.
    assert stack.ALONE.checkout_packages() == stack.checkout_packages() == registry.checkout_packages()
    assert set(stack.checkout_packages()) >= {p for t in registry.targets() for p in t.packages}


@pytest.fixture
def widgetlib() -> Iterator[Target]:
    target = registry.register(Target(key="widgetlib", repo="example-org/widgetlib", packages=("widgetlib",),
                                      fields=(textarea("what", "What happened", required=True),),
                                      render_system_info=lambda env: "widgetlib"))
    try:
        yield target
    finally:
        registry.unregister("widgetlib")


CHECKOUT = "/home/u/widgetlib/src/widgetlib/core.py"


def test_a_target_registered_later_has_its_checkout_frames_read_as_library_code(widgetlib: Target) -> None:
    # No list in the engine names it: the registry told the engine when it was registered.
    assert "widgetlib" in stack.checkout_packages() and "widgetlib" not in stack.ALONE.checkout_packages()
    assert library_path(CHECKOUT) == "widgetlib/core.py"


def test_once_unregistered_its_checkout_is_user_code_again() -> None:
    assert "widgetlib" not in stack.checkout_packages() and library_path(CHECKOUT) is None


# ---- reducer/reduction/standalone.py asks the interface, the targets answer -----------------------------------

CONFIG_INFO = {"class": "LlamaConfig", "model_type": "llama",
               "values": {"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 1}}
ADAPTER_INFO = {"class": "LoraConfig", "values": {"r": 4, "target_modules": ["q_proj"]}}


def _rewrites(tmp_path: Path, source: str, info: dict) -> list[tuple[str, str]]:
    (tmp_path / "saved").mkdir(parents=True)
    (tmp_path / "saved" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    script = tmp_path / "s.py"
    script.write_text(source)
    module, reads = find_reads(source, Context(script))
    assert len(reads) == 1, reads
    return list(rewrites(module, reads[0], lambda kind, path: info, lambda text: False))


MODEL = ("from transformers import AutoModelForCausalLM\n"
         "model = AutoModelForCausalLM.from_pretrained('saved')\nmodel.generate()\n")
ADAPTER = ("from peft import PeftModel\nfrom transformers import AutoModelForCausalLM\n"
           "base = AutoModelForCausalLM.from_pretrained('gpt2')\n"
           "model = PeftModel.from_pretrained(base, 'saved')\nmodel.generate()\n")


def test_a_model_folder_is_rebuilt_with_transformers_spelling(tmp_path: Path) -> None:
    found = dict(_rewrites(tmp_path, MODEL, CONFIG_INFO))
    code = found["model from its config, random weights"]
    assert "from transformers import AutoConfig\n" in code
    assert "model = AutoModelForCausalLM.from_config(AutoConfig.for_model(\n        'llama',\n        hidden_size=16," in code


def test_an_adapter_folder_is_rebuilt_with_peft_spelling(tmp_path: Path) -> None:
    found = dict(_rewrites(tmp_path, ADAPTER, ADAPTER_INFO))
    code = found["adapter config inline, get_peft_model"]
    assert "from peft import get_peft_model" in code and "from peft import LoraConfig" in code
    assert "model = get_peft_model(base, LoraConfig(" in code


def test_with_nothing_registered_no_library_spelling_is_written(tmp_path: Path) -> None:
    stack.unregister(ENGINE_STACK)
    try:
        model = [how for how, _ in _rewrites(tmp_path / "m", MODEL, CONFIG_INFO)]
        adapter = [how for how, _ in _rewrites(tmp_path / "a", ADAPTER, ADAPTER_INFO)]
    finally:
        stack.register(ENGINE_STACK)
    # Only the engine's own rewrites are left (the folder's files written by the repro itself).
    assert model == adapter == ["written to a temporary folder by the repro"]
