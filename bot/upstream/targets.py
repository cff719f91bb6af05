"""The target registry: every repository reprobot files at, in one place.

One ``Target`` per repository says everything the rest of reprobot needs about it: its key
(file names, ``--repo KEY``), its GitHub repo, the Python packages whose frames and imports
are its own, its bug-report form field by field, the jinja2 template and System-Info renderer
that fill that form, the API names and callee names routing recognises it by, the path
prefixes that name maintainer areas, and how an editable checkout of it is laid out.

Adding a repository is one ``Target`` in ``_BUILTIN`` below (or a ``register()`` call), one
template, a renderer if its form asks for something new, and tests. Every reader goes through
the functions here (or the live views ``TARGETS`` and ``REPO_KEYS``), so a target registered
at run time (a test fixture, a plugin) is seen everywhere at once.

Who can help stays in bot/data/maintainers.json (people edit it without touching code); it is
keyed by the ``repo`` of each target.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from bot.env.renderers import (COLLECT_ENV, render_accelerate, render_bitsandbytes, render_peft, render_pytorch,
                               render_transformers, render_trl)
from bot.issue.formspec import Field, Form, checkboxes, textarea
from reducer.errors import ExitCode, ReprobotError


@dataclass(frozen=True)
class Target:
    key: str                                   # "peft": draft-peft.md, templates/peft.md.j2, --repo peft
    repo: str                                  # "huggingface/peft"
    packages: tuple[str, ...]                  # top-level import names whose frames are this repo's code
    fields: tuple[Field, ...]                  # the bug-report form, in the form's order
    render_system_info: Callable[[dict], str]  # env.json -> the System Info text the form asks for
    system_info_command: str | None = None     # what the form tells reporters to run for System Info
    form_file: str = "bug-report.yml"          # ?template= of the pre-filled URL
    template: str = ""                         # jinja2 template; default "<key>.md.j2"
    template_dir: Path | None = None           # where that template is, when not in templates/
    # Routing: public API names (a regex) that say a call or a message is this repo's, tried in
    # ``api_rank`` order (lower first; the most generic names, transformers', go last).
    api_names: str | None = None
    api_rank: int = 5
    callee_names: tuple[str, ...] = ()         # names a rejected call's message gives this repo's callees
    area_prefixes: tuple[tuple[str, str], ...] = ()  # package path prefix -> maintainers.json area
    checkout_parent: str | None = None         # editable checkout: ".../<parent>/<package>/x.py"
    env_packages: tuple[str, ...] = ()         # distributions its System Info names (the probe records them)
    # torch: every other target calls into it, so its frames are on almost every path. Its frames
    # count as evidence and earn a cross-link, but it is the target only for a failure with no
    # other target's frames on the path (otherwise the caller's bug would be filed against torch).
    foundation: bool = False
    # trl: it wires transformers, peft and accelerate together itself, so a failure its own
    # code hands to torch is its own rather than "the integration" (transformers').
    wires_integrations: bool = False
    draft_notes: tuple[str, ...] = ()          # said in every draft for this repo (its filing policy)

    @property
    def template_name(self) -> str:
        return self.template or f"{self.key}.md.j2"

    @property
    def form(self) -> Form:
        return Form(self.key, self.repo, self.form_file, self.fields, self.system_info_command)


# --- the fields every form shares ---------------------------------------------------------------

def _system_info(render: str | None = None) -> Field:
    return textarea("system-info", "System Info", required=True, render=render)


_REPRODUCTION = textarea("reproduction", "Reproduction", required=True)
_EXPECTED = textarea("expected-behavior", "Expected behavior", required=True)
_WHO = textarea("who-can-help", "Who can help?")
_OWN_SCRIPTS = ("The official example scripts", "My own modified scripts")


# trl's checklist: every option is required on its own (GitHub refuses the form until all are
# ticked), so a draft ticks what reprobot can vouch for and leaves the rest to the reporter.
_TRL_CHECKLIST = (
    "I have checked that my issue isn't already filed (see [open issues]"
    "(https://github.com/huggingface/trl/issues?q=is%3Aissue))",
    "I have included my system information",
    "Any code provided is minimal, complete, and reproducible ([more on MREs]"
    "(https://docs.github.com/en/get-started/writing-on-github/working-with-advanced-formatting/"
    "creating-and-highlighting-code-blocks))",
    "Any code provided is properly formatted in code blocks, (no screenshot, [more on code blocks]"
    "(https://docs.github.com/en/get-started/writing-on-github/working-with-advanced-formatting/"
    "creating-and-highlighting-code-blocks))",
    "Any traceback provided is complete",
)


# --- the built-in targets, in the order commands list them --------------------------------------

_BUILTIN: tuple[Target, ...] = (
    Target(
        key="transformers", repo="huggingface/transformers", packages=("transformers",),
        fields=(_system_info(), _WHO,
                checkboxes("information-scripts-examples", "Information", _OWN_SCRIPTS),
                checkboxes("information-tasks", "Tasks",
                           ("An officially supported task in the `examples` folder (such as GLUE/SQuAD, ...)",
                            "My own task or dataset (give details below)")),
                _REPRODUCTION, _EXPECTED),
        render_system_info=render_transformers, system_info_command="transformers env",
        api_names=(r"\b(?:Auto(?:Model\w*|Tokenizer|Config|Processor|FeatureExtractor|ImageProcessor)|"
                   r"pipeline|Trainer|TrainingArguments|Seq2SeqTrainer|BitsAndBytesConfig|GenerationConfig|"
                   r"PreTrainedModel|PretrainedConfig|PreTrainedTokenizer\w*|\w+For(?:CausalLM|ConditionalGeneration|"
                   r"SequenceClassification|TokenClassification|QuestionAnswering|MaskedLM|Seq2SeqLM|"
                   r"ImageClassification|PreTraining|SpeechSeq2Seq|CTC)|\w+Tokenizer(?:Fast)?|\w+Config|"
                   r"trainer|tokenizer|processor|generate|apply_chat_template|save_pretrained|from_pretrained|"
                   r"push_to_hub|gradient_checkpointing_enable|resize_token_embeddings)\b|"
                   r"from 'transformers|\btransformers\.\w"),
        api_rank=9,
        callee_names=("PreTrainedModel", "BitsAndBytesConfig", "Trainer", "GenerationConfig", "PretrainedConfig"),
        area_prefixes=(("transformers/quantizers/", "quantization"),
                       ("transformers/integrations/bitsandbytes", "quantization"),
                       ("transformers/integrations/peft", "peft integration"),
                       ("transformers/modeling_utils", "model loading"),
                       ("transformers/core_model_loading", "model loading"),
                       ("transformers/generation/", "generate"),
                       ("transformers/trainer", "trainer")),
        checkout_parent="src",
    ),
    Target(
        key="peft", repo="huggingface/peft", packages=("peft",),
        fields=(_system_info(), _WHO, _REPRODUCTION, _EXPECTED),
        render_system_info=render_peft,
        api_names=(r"\b(?:Peft\w*|AutoPeftModel\w*|Lora\w*|LoRA\w*|AdaLora\w*|IA3\w*|LoHa\w*|LoKr\w*|"
                   r"PromptTuning\w*|PrefixTuning\w*|PromptEncoder\w*|ModulesToSaveWrapper|get_peft_model|"
                   r"prepare_model_for_kbit_training|prepare_model_for_int8_training|inject_adapter_in_model|"
                   r"get_peft_model_state_dict|set_peft_model_state_dict|merge_and_unload|add_weighted_adapter|"
                   r"print_trainable_parameters|unload|delete_adapter|load_peft_weights|hotswap_adapter)\b|"
                   r"from 'peft'|\bpeft\.\w"),
        api_rank=1,
        callee_names=("PeftModel", "LoraConfig", "LoraModel", "PeftConfig", "get_peft_model"),
        area_prefixes=(("peft/", "peft integration"),),
        checkout_parent="src",
    ),
    Target(
        key="accelerate", repo="huggingface/accelerate", packages=("accelerate",),
        fields=(_system_info("Shell"),
                checkboxes("information-scripts-examples", "Information", _OWN_SCRIPTS),
                checkboxes("information-tasks", "Tasks",
                           ("One of the scripts in the examples/ folder of Accelerate or an officially supported "
                            "`no_trainer` script in the `examples` folder of the `transformers` repo (such as "
                            "`run_no_trainer_glue.py`)",
                            "My own task or dataset (give details below)")),
                _REPRODUCTION, _EXPECTED),
        render_system_info=render_accelerate, system_info_command="accelerate env",
        api_names=(r"\b(?:accelerator|Accelerator|AcceleratorState|PartialState|GradientState|"
                   r"dispatch_model|infer_auto_device_map|load_checkpoint_and_dispatch|load_checkpoint_in_model|"
                   r"init_empty_weights|init_on_device|cpu_offload|disk_offload|notebook_launcher|"
                   r"get_balanced_memory|find_executable_batch_size|AlignDevicesHook|"
                   r"set_module_tensor_to_device|skip_first_batches)\b|\baccelerate (?:launch|config|env)\b|"
                   r"from 'accelerate|\baccelerate\.\w"),
        api_rank=2,
        callee_names=("AlignDevicesHook", "Accelerator", "dispatch_model", "init_empty_weights",
                      "set_module_tensor_to_device"),
        area_prefixes=(("accelerate/big_modeling", "big-model inference"),
                       ("accelerate/hooks", "big-model inference"),
                       ("accelerate/utils/modeling", "model loading"),
                       ("accelerate/accelerator", "distributed"),
                       ("accelerate/state", "distributed")),
        checkout_parent="src",
    ),
    Target(
        key="bitsandbytes", repo="bitsandbytes-foundation/bitsandbytes", packages=("bitsandbytes",),
        fields=(_system_info(), _REPRODUCTION, _EXPECTED),
        render_system_info=render_bitsandbytes, system_info_command="python -m bitsandbytes",
        api_names=(r"\b(?:bnb|bitsandbytes)\.|\bpython -m bitsandbytes\b|\bimport bitsandbytes\b|"
                   r"\b(?:Params4bit|Int8Params|Linear4bit|Linear8bitLt|LinearNF4|LinearFP4|Embedding4bit|"
                   r"QuantState|MatmulLtState|GlobalOptimManager|(?:Paged)?(?:AdamW?|Lion|RMSprop|SGD|LAMB|LARS)"
                   r"(?:8bit|32bit)|StableEmbedding|quantize_4bit|dequantize_4bit|matmul_4bit)\b"),
        api_rank=0,
        callee_names=("Params4bit", "Int8Params", "Linear4bit", "Linear8bitLt", "QuantState", "LinearFP4",
                      "LinearNF4", "MatmulLtState", "Embedding4bit"),
        area_prefixes=(("bitsandbytes/", "quantization"),),
        checkout_parent="bitsandbytes",
    ),
    Target(
        # huggingface/trl .github/ISSUE_TEMPLATE/bug-report.yml: Reproduction first, no
        # expected-behaviour field, and a checklist whose options are each required.
        key="trl", repo="huggingface/trl", packages=("trl",),
        fields=(_REPRODUCTION, _system_info(),
                checkboxes("terms", "Checklist", _TRL_CHECKLIST, required_options=_TRL_CHECKLIST)),
        render_system_info=render_trl, system_info_command="trl env",
        api_names=(r"\b(?:(?:SFT|DPO|GRPO|KTO|RLOO|PPO|ORPO|CPO|BCO|GKD|XPO|NashMD|OnlineDPO|PRM|Reward)"
                   r"(?:Trainer|Config)|AutoModelFor(?:CausalLM|Seq2SeqLM)WithValueHead|"
                   r"DataCollatorForCompletionOnlyLM|setup_chat_format|clone_chat_template)\b|"
                   r"\btrl (?:sft|dpo|grpo|kto|rloo|env|vllm-serve)\b|from 'trl|\btrl\.\w"),
        api_rank=3,
        callee_names=("SFTTrainer", "DPOTrainer", "GRPOTrainer", "SFTConfig", "DPOConfig", "GRPOConfig"),
        checkout_parent="trl",
        env_packages=("trl", "datasets", "deepspeed", "liger_kernel", "vllm"),
        wires_integrations=True,
        draft_notes=("trl's checklist must be ticked item by item before GitHub accepts the form: reprobot ticked "
                     "what the draft itself shows; tick the rest once you have checked them (the related issues "
                     "help with the first)",),
    ),
    Target(
        # pytorch/pytorch .github/ISSUE_TEMPLATE/bug-report.yml: two required textareas that
        # declare no ids, so GitHub cannot pre-fill them from a URL (the ids here are reprobot's).
        key="pytorch", repo="pytorch/pytorch", packages=("torch",),
        fields=(textarea("describe-the-bug", "\U0001F41B Describe the bug", required=True, prefill=False),
                textarea("versions", "Versions", required=True, prefill=False)),
        render_system_info=render_pytorch, system_info_command=COLLECT_ENV,
        callee_names=("Parameter", "Tensor", "Module"),
        area_prefixes=(("torch/distributed", "distributed"),),
        checkout_parent="pytorch",
        foundation=True,
        draft_notes=("pytorch's bug form points to its AI-assisted development policy and closes reports that "
                     "do not follow it: read the draft, check it on your machine and put it in your own words "
                     "before filing; torch.compile failures have their own form (pt2-bug-report.yml)",),
    ),
)

# Owners routing can name that reprobot does not file at: where the verdict sends the reader.
ELSEWHERE: dict[str, str] = {
    "huggingface_hub": "huggingface/huggingface_hub",
    "safetensors": "huggingface/safetensors",
    "tokenizers": "huggingface/tokenizers",
    "datasets": "huggingface/datasets",
    "diffusers": "huggingface/diffusers",
    "user code": "",
}
# Packages that are not targets but whose frames routing must still recognise when a forum
# mangled a path or a checkout is installed in editable mode: package -> checkout parent.
OTHER_CHECKOUTS: dict[str, str] = {"huggingface_hub": "src"}


# --- the registry -------------------------------------------------------------------------------

_REGISTRY: dict[str, Target] = {t.key: t for t in _BUILTIN}


def register(target: Target) -> Target:
    """Add ``target`` (after the others). A key or package already registered is refused: two
    owners for one package would make routing depend on registration order."""
    if target.key in _REGISTRY:
        raise ValueError(f"target {target.key!r} is already registered")
    clash = set(target.packages) & set(package_targets())
    if clash:
        raise ValueError(f"package(s) {sorted(clash)} already belong to another target")
    _REGISTRY[target.key] = target
    return target


def unregister(key: str) -> Target:
    return _REGISTRY.pop(key)


def targets() -> tuple[Target, ...]:
    return tuple(_REGISTRY.values())


def repo_keys() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_target(key: str) -> Target:
    """A target by key ("peft") or repo ("huggingface/peft"); a clear usage error otherwise."""
    found = _REGISTRY.get(key) or target_for_repo(key)
    if found is None:
        raise ReprobotError(f"unknown repository {key!r} (expected one of: {', '.join(_REGISTRY)})", ExitCode.USAGE)
    return found


def target_for_repo(repo: str | None) -> Target | None:
    low = (repo or "").lower()
    return next((t for t in _REGISTRY.values() if t.repo.lower() == low), None)


def package_targets() -> dict[str, Target]:
    """Import name -> its target, for every registered target (torch included)."""
    return {pkg: t for t in _REGISTRY.values() for pkg in t.packages}


def stack_packages() -> frozenset[str]:
    """The packages whose frames are evidence of their own: every target's but the foundation's."""
    return frozenset(pkg for t in _REGISTRY.values() if not t.foundation for pkg in t.packages)


def repo_of_package(pkg: str | None) -> str | None:
    """The repository that owns a routing candidate (a package name, or an ELSEWHERE owner)."""
    t = package_targets().get(pkg or "")
    return t.repo if t else (ELSEWHERE.get(pkg or "") or None)


def known_owner(pkg: str | None) -> bool:
    return (pkg or "") in package_targets() or (pkg or "") in ELSEWHERE


def api_names() -> tuple[tuple[str, str], ...]:
    """(package, regex) in the order routing tries them (``api_rank``, then registration)."""
    ranked = sorted((t for t in _REGISTRY.values() if t.api_names), key=lambda t: t.api_rank)
    return tuple((t.packages[0], t.api_names) for t in ranked if t.api_names)


def api_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return _compiled(api_names())


@lru_cache(maxsize=8)
def _compiled(names: tuple[tuple[str, str], ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((pkg, re.compile(pattern)) for pkg, pattern in names)


def callee_packages() -> dict[str, str]:
    """A callee's name in a rejected call's message -> the package it belongs to."""
    return {name: t.packages[0] for t in _REGISTRY.values() for name in t.callee_names}


def area_prefixes() -> tuple[tuple[str, str], ...]:
    return tuple(pair for t in _REGISTRY.values() for pair in t.area_prefixes)


def checkout_parents() -> dict[str, str]:
    """package -> the folder an editable checkout keeps it in (targets first, then the others)."""
    out = {pkg: t.checkout_parent for t in _REGISTRY.values() if t.checkout_parent for pkg in t.packages}
    return {**out, **{k: v for k, v in OTHER_CHECKOUTS.items() if k not in out}}


def env_packages() -> tuple[str, ...]:
    """Distributions the System-Info renderers name, for the probe to record."""
    return tuple(dict.fromkeys(p for t in _REGISTRY.values() for p in (*t.packages, *t.env_packages)))


# --- TARGETS and REPO_KEYS: views read from the registry on each access, so a target registered
# --- after import (a test fixture, a plugin) is seen by every reader that holds them ------------

class _TargetsView(Mapping[str, str]):
    """key -> repo of every registered target, read from the registry on each access."""

    def __getitem__(self, key: str) -> str:
        return _REGISTRY[key].repo

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return f"TARGETS({dict(self)!r})"


class _KeysView(Sequence[str]):
    """The registered keys in order; argparse ``choices=`` reads it at parse time, so a target
    registered after the parser was built is still accepted."""

    def __getitem__(self, i: Any) -> Any:
        return repo_keys()[i]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __contains__(self, key: object) -> bool:
        return key in _REGISTRY

    def __repr__(self) -> str:
        return repr(repo_keys())


TARGETS: Mapping[str, str] = _TargetsView()
REPO_KEYS: Sequence[str] = _KeysView()
