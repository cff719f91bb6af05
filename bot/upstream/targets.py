"""The repositories reprobot files at, and where failures that are not theirs belong."""
from __future__ import annotations

TARGETS: dict[str, str] = {
    "transformers": "huggingface/transformers",
    "peft": "huggingface/peft",
    "accelerate": "huggingface/accelerate",
    "bitsandbytes": "bitsandbytes-foundation/bitsandbytes",
}
# The keys every command, form, template and System-Info renderer is indexed by.
REPO_KEYS: tuple[str, ...] = tuple(TARGETS)
# Who owns the failures that are not ours, so the verdict can say where to go instead.
ELSEWHERE: dict[str, str] = {
    "torch": "pytorch/pytorch",
    "huggingface_hub": "huggingface/huggingface_hub",
    "safetensors": "huggingface/safetensors",
    "tokenizers": "huggingface/tokenizers",
    "datasets": "huggingface/datasets",
    "diffusers": "huggingface/diffusers",
    "trl": "huggingface/trl",
    "user code": "",
}

# What a user's call or an error message names, and which target it belongs to: public API
# names from each package's documentation (classes, functions, methods no other package of the
# stack has), checked in order, the first match wins. Used where the frames cannot say who owns
# a failure (a pasted traceback cut at the user's line, an error line alone).
API_NAMES: tuple[tuple[str, str], ...] = (
    ("bitsandbytes", r"\b(?:bnb|bitsandbytes)\.|\bpython -m bitsandbytes\b|\bimport bitsandbytes\b|"
                     r"\b(?:Params4bit|Int8Params|Linear4bit|Linear8bitLt|LinearNF4|LinearFP4|Embedding4bit|"
                     r"QuantState|MatmulLtState|GlobalOptimManager|(?:Paged)?(?:AdamW?|Lion|RMSprop|SGD|LAMB|LARS)"
                     r"(?:8bit|32bit)|StableEmbedding|quantize_4bit|dequantize_4bit|matmul_4bit)\b"),
    ("peft", r"\b(?:Peft\w*|AutoPeftModel\w*|Lora\w*|LoRA\w*|AdaLora\w*|IA3\w*|LoHa\w*|LoKr\w*|"
             r"PromptTuning\w*|PrefixTuning\w*|PromptEncoder\w*|ModulesToSaveWrapper|get_peft_model|"
             r"prepare_model_for_kbit_training|prepare_model_for_int8_training|inject_adapter_in_model|"
             r"get_peft_model_state_dict|set_peft_model_state_dict|merge_and_unload|add_weighted_adapter|"
             r"print_trainable_parameters|unload|delete_adapter|load_peft_weights|hotswap_adapter)\b|"
             r"from 'peft'|\bpeft\.\w"),
    ("accelerate", r"\b(?:accelerator|Accelerator|AcceleratorState|PartialState|GradientState|"
                   r"dispatch_model|infer_auto_device_map|load_checkpoint_and_dispatch|load_checkpoint_in_model|"
                   r"init_empty_weights|init_on_device|cpu_offload|disk_offload|notebook_launcher|"
                   r"get_balanced_memory|find_executable_batch_size|AlignDevicesHook|"
                   r"set_module_tensor_to_device|skip_first_batches)\b|\baccelerate (?:launch|config|env)\b|"
                   r"from 'accelerate|\baccelerate\.\w"),
    ("transformers", r"\b(?:Auto(?:Model\w*|Tokenizer|Config|Processor|FeatureExtractor|ImageProcessor)|"
                     r"pipeline|Trainer|TrainingArguments|Seq2SeqTrainer|BitsAndBytesConfig|GenerationConfig|"
                     r"PreTrainedModel|PretrainedConfig|PreTrainedTokenizer\w*|\w+For(?:CausalLM|ConditionalGeneration|"
                     r"SequenceClassification|TokenClassification|QuestionAnswering|MaskedLM|Seq2SeqLM|"
                     r"ImageClassification|PreTraining|SpeechSeq2Seq|CTC)|\w+Tokenizer(?:Fast)?|\w+Config|"
                     r"trainer|tokenizer|processor|generate|apply_chat_template|save_pretrained|from_pretrained|"
                     r"push_to_hub|gradient_checkpointing_enable|resize_token_embeddings)\b|"
                     r"from 'transformers|\btransformers\.\w"),
)
