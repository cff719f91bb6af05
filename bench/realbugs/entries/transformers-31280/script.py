"""QLoRA-style supervised fine-tune of an instruct model on our support transcripts.

The notebook version of this ran every day on Colab; this is the same job as a script. The
model here is a small Mistral built from a config so it runs on a CPU.
"""
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import MistralConfig, MistralForCausalLM, PreTrainedTokenizerFast, TrainingArguments
from trl import SFTTrainer

max_seq_length = 64
TEMPLATE = "<s>[INST] {question} [/INST] {answer}</s>"

PAIRS = [
    ("my card was charged twice", "we refunded the duplicate charge"),
    ("the app crashes on start", "please update to the latest version"),
    ("i forgot my password", "use the reset link on the login page"),
    ("can i pay by invoice", "yes for business accounts"),
    ("where is my parcel", "it left the warehouse this morning"),
    ("how do i close my account", "open settings and choose close account"),
]


def make_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4}
    for q, a in PAIRS:
        for w in (q + " " + a).split():
            vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    return tok


def formatting_prompts(rows):
    return {"text": [TEMPLATE.format(question=q, answer=a) for q, a in zip(rows["question"], rows["answer"])]}


tokenizer = make_tokenizer()
dataset = Dataset.from_dict({"question": [q for q, _ in PAIRS] * 4, "answer": [a for _, a in PAIRS] * 4})
dataset = dataset.map(formatting_prompts, batched=True)

config = MistralConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                       sliding_window=None)
torch.manual_seed(3407)
model = MistralForCausalLM(config)

trainer = SFTTrainer(
    model = model,
    tokenizer = tokenizer,
    train_dataset = dataset,
    dataset_text_field = "text",
    max_seq_length = max_seq_length,
    dataset_num_proc = 1,
    packing = False,
    args = TrainingArguments(
        per_device_train_batch_size = 2,
        gradient_accumulation_steps = 4,
        warmup_steps = 1,
        max_steps = 3,
        learning_rate = 2e-4,
        logging_steps = 1,
        optim = "adamw_torch",
        weight_decay = 0.01,
        lr_scheduler_type = "linear",
        seed = 3407,
        output_dir = "outputs",
        report_to = "none",
    ),
)
trainer_stats = trainer.train()
print(trainer_stats)
