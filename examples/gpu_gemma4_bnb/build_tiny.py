"""Build a tiny Gemma4 (vision + audio + text towers) and a LoRA adapter for it, locally.

Nothing is downloaded: the model comes from a config with random weights, the adapter from
`peft.get_peft_model`, and callers feed `input_ids` directly (no tokenizer). The result is a
stand-in for the forum's `unsloth/gemma-4-E4B-it` + LoRA pair that is small enough to build in
about a second on a CPU and to load in bitsandbytes 4-bit on a GPU.

    python build_tiny.py OUT_DIR          # writes OUT_DIR/base and OUT_DIR/adapter
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

# Module names the example's device maps refer to; checked after building so a transformers
# release that renames them fails here, loudly, instead of silently ignoring a device_map key.
REQUIRED_MODULES = ("model.vision_tower", "model.audio_tower", "model.language_model")

# LoRA on the text tower's plain nn.Linear projections only. The vision/audio towers wrap their
# projections in Gemma4ClippableLinear, which PEFT rejects as a target (peft#3129); that is a
# different failure from the one this example is about, so the regex keeps clear of it.
LORA_TARGET_REGEX = r".*language_model\.layers\.\d+\.(self_attn\.(q_proj|k_proj|v_proj|o_proj)|mlp\.(gate_proj|up_proj|down_proj))"

ADAPTER_NAME = "tiny-lora"


@dataclass(frozen=True)
class TinyPaths:
    root: Path
    base: Path
    adapter: Path

    @classmethod
    def under(cls, root: Path) -> TinyPaths:
        root = Path(root)
        return cls(root=root, base=root / "base", adapter=root / "adapter")

    def exists(self) -> bool:
        return (self.base / "config.json").is_file() and (self.adapter / "adapter_config.json").is_file()


def tiny_config():
    """The Gemma4Config of the tiny model: every tower present, every width a multiple of 16.

    Widths stay multiples of 16 so bitsandbytes' 4-bit kernels accept every nn.Linear;
    `num_kv_shared_layers=2` keeps the shared-KV path (the seed's `KeyError: 22`) in play, and
    `global_head_dim` is pinned because its default (512) would make the full-attention layers
    the largest thing in the model.
    """
    from transformers import (
        Gemma4AudioConfig,
        Gemma4Config,
        Gemma4TextConfig,
        Gemma4VisionConfig,
    )

    text = Gemma4TextConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        global_head_dim=32,
        vocab_size_per_layer_input=128,
        hidden_size_per_layer_input=16,
        num_kv_shared_layers=2,
        sliding_window=32,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    )
    # position_embedding_size defaults to 10240 rows, which would make the vision tower 30x the
    # text tower; the device-map planning in the example needs the text layers to dominate.
    vision = Gemma4VisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        position_embedding_size=64,
    )
    audio = Gemma4AudioConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, output_proj_dims=32)
    return Gemma4Config(text_config=text, vision_config=vision, audio_config=audio)


def check_module_names(model) -> None:
    names = {name for name, _ in model.named_modules()}
    missing = [name for name in REQUIRED_MODULES if name not in names]
    if missing:
        raise RuntimeError(f"tiny Gemma4 lacks the modules the device maps name: {', '.join(missing)}")


def lora_config():
    from peft import LoraConfig

    # init_lora_weights=False: a non-zero B matrix, so the adapter visibly changes the logits
    # and a test can tell "adapter loaded" from "adapter silently ignored".
    return LoraConfig(
        r=8,
        lora_alpha=16,
        target_modules=LORA_TARGET_REGEX,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        init_lora_weights=False,
    )


def build(root: Path, *, seed: int = 0, force: bool = False) -> TinyPaths:
    """Write the tiny base model and its LoRA adapter under `root`; skip if both are there."""
    import torch
    from peft import get_peft_model
    from transformers import Gemma4ForConditionalGeneration

    paths = TinyPaths.under(root)
    if paths.exists() and not force:
        return paths
    paths.root.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(seed)
    model = Gemma4ForConditionalGeneration(tiny_config())
    check_module_names(model)
    model.save_pretrained(paths.base)

    peft_model = get_peft_model(model, lora_config(), adapter_name=ADAPTER_NAME)
    # save_pretrained writes a named adapter into a subfolder; save the default layout instead
    # by renaming on the way out, so `PeftModel.from_pretrained(base, paths.adapter)` just works.
    peft_model.save_pretrained(paths.adapter, selected_adapters=[ADAPTER_NAME])
    nested = paths.adapter / ADAPTER_NAME
    if nested.is_dir():
        for item in nested.iterdir():
            item.replace(paths.adapter / item.name)
        nested.rmdir()

    (paths.root / "tiny.json").write_text(
        json.dumps({"seed": seed, "adapter_name": ADAPTER_NAME, "lora_targets": LORA_TARGET_REGEX}, indent=2) + "\n"
    )
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write base/ and adapter/ into")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="rebuild even if the folder is complete")
    args = parser.parse_args(argv)
    paths = build(args.out, seed=args.seed, force=args.force)
    print(json.dumps({k: str(v) for k, v in asdict(paths).items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
