"""huggingface/transformers: its bug-report form and the block ``transformers env`` prints, the model
families and integrations routing files here, and how a repro builds a config from its model type."""
from __future__ import annotations

from bot.targets.base import EXPECTED, OWN_SCRIPTS, REPRODUCTION, WHO_CAN_HELP, Target, checkboxes, system_info_field
from bot.targets.sysinfo import (accelerate_config_lines, cuda_notes, fields, gpu_names, install_notes, pkg,
                                 platform_of, python_of, torch_of, version_of)
from reducer.stack import Spelling


def render(env: dict) -> str:
    t = torch_of(env)
    accel_installed = pkg(env, "accelerate").get("installed")
    acc_cfg = accelerate_config_lines(env, "not found") if accel_installed else "not found"
    if t.get("installed") and t.get("version"):
        accel = {"CUDA": "CUDA", "XPU": "XPU"}.get(t.get("accelerator") or "", "NA")
        pt = f"{t['version']} ({accel})"
    else:
        accel, pt = "NA", "not installed (NA)"
    items = [
        ("`transformers` version", version_of(env, "transformers")),
        ("Platform", platform_of(env)),
        ("Python version", python_of(env)),
        ("Huggingface_hub version", version_of(env, "huggingface_hub")),
        ("Safetensors version", version_of(env, "safetensors", "unknown")),
        ("Accelerate version", version_of(env, "accelerate")),
        ("Accelerate config", acc_cfg),
        ("DeepSpeed version", version_of(env, "deepspeed")),
        ("PyTorch version (accelerator?)", pt),
        ("Using distributed or parallel set-up in script?", "<fill in>"),
    ]
    if accel == "CUDA":
        items += [("Using GPU in script?", "<fill in>"), ("GPU type", (gpu_names(env) or ["unknown"])[0])]
    return fields(items + install_notes(env) + cuda_notes(env))


def config_by_type(owner: str) -> Spelling:
    """A config or model folder rebuilt in the repro (reducer/reduction/standalone.py): ``AutoConfig.for_model(
    "llama", <its non-default values>)``, spelled through the module the script spells the class it
    loaded through (``transformers.AutoConfig`` after ``import transformers``), imported when bare."""
    prefix = owner.rsplit(".", 1)[0] + "." if "." in owner else ""
    if prefix.startswith("transformers"):
        return Spelling(prefix + "AutoConfig.for_model")
    return Spelling("AutoConfig.for_model", (("transformers", "AutoConfig"),))


TARGET = Target(
    recipes="transformers.py", key="transformers", repo="huggingface/transformers", packages=("transformers",), order=10,
    fields=(system_info_field(), WHO_CAN_HELP,
            checkboxes("information-scripts-examples", "Information", OWN_SCRIPTS),
            checkboxes("information-tasks", "Tasks",
                       ("An officially supported task in the `examples` folder (such as GLUE/SQuAD, ...)",
                        "My own task or dataset (give details below)")),
            REPRODUCTION, EXPECTED),
    render_system_info=render, system_info_command="transformers env",
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
    env_packages=("huggingface_hub", "safetensors", "deepspeed"),
    probe_import=True,
    # Routing: its model families (transformers/models/<family>/, and the class names that spell one),
    # and the integrations it wires (a failure across three of the stack's packages on its models).
    family_path=r"^transformers/models/(?P<family>[\w]+)/",
    family_class=(r"\b(?P<stem>[A-Z][A-Za-z0-9_]*?)(?:ForConditionalGeneration|For[A-Z][A-Za-z0-9]+|LMHeadModel|"
                  r"PreTrainedModel|TextModel|VisionModel|Model|ClippableLinear|DecoderLayer|Attention|Config)\b"),
    not_families=frozenset(["auto", "peft", "lora", "pretrained", "bitsandbytes", "generation", "base", "training",
                            "quanto", "gptq", "awq", "hqq", "torch", "hf", "fbgemm", "compressed", "accelerator",
                            "ia3", "adalora", "prefix", "prompt", "multihead", "self", "cross", "flash", "sdpa",
                            "eager", "quantization", "cache", "text", "vision", "audio"]),
    integration_home=True,
    config_by_type=config_by_type,
)
