"""Pairwise preference tuning with the KTO-pair loss instead of the default sigmoid DPO loss.

Follows the alignment-handbook DPO recipe; data is a small preference set written in code and
the policy/reference are small GPT-2 models built from a config.
"""
import torch
from datasets import Dataset, DatasetDict
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, TrainingArguments
from trl import DPOTrainer

HP = {"beta": 0.4, "loss_type": "kto_pair", "max_prompt_length": 16, "max_length": 32, "lr": 5e-7}

ROWS = [
    {"prompt": "how do i boil an egg", "chosen": "simmer it for nine minutes", "rejected": "microwave it whole"},
    {"prompt": "is the stove hot", "chosen": "yes be careful", "rejected": "touch it and see"},
    {"prompt": "how long do i rest dough", "chosen": "about one hour", "rejected": "never"},
    {"prompt": "can i freeze bread", "chosen": "yes wrap it well", "rejected": "no it explodes"},
]


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1}
    for row in ROWS:
        for w in " ".join(row.values()).split():
            vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>",
                                  bos_token="<|endoftext|>")
    tok.pad_token = tok.eos_token
    return tok


def main():
    tokenizer = build_tokenizer()
    raw_datasets = DatasetDict({"train": Dataset.from_list(ROWS * 4), "test": Dataset.from_list(ROWS)})
    cfg = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=64,
                     bos_token_id=1, eos_token_id=1)
    torch.manual_seed(42)
    model = GPT2LMHeadModel(cfg)
    model_ref = GPT2LMHeadModel(cfg)
    model_ref.load_state_dict(model.state_dict())

    training_args = TrainingArguments(output_dir="dpo-kto", per_device_train_batch_size=2, max_steps=2,
                                      learning_rate=HP["lr"], logging_steps=1, remove_unused_columns=False,
                                      report_to=[])
    dpo_trainer = DPOTrainer(
        model,
        model_ref,
        args=training_args,
        loss_type=HP["loss_type"],
        beta=HP["beta"],
        train_dataset=raw_datasets["train"],
        eval_dataset=raw_datasets["test"],
        tokenizer=tokenizer,
        max_prompt_length=HP["max_prompt_length"],
        max_length=HP["max_length"],
    )
    dpo_trainer.train()
    print(dpo_trainer.evaluate())


if __name__ == "__main__":
    main()
