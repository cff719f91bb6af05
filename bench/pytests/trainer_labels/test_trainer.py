import pytest
from transformers import Trainer, TrainingArguments


def make_rows(n, with_labels):
    rows = []
    for i in range(n):
        row = {"input_ids": [2, 3 + i % 5, 4], "attention_mask": [1, 1, 1]}
        if with_labels:
            row["labels"] = i % 2
        rows.append(row)
    return rows


class TestTrainer:
    @pytest.fixture(autouse=True)
    def quiet_env(self, monkeypatch, tmp_path):
        monkeypatch.setenv("WANDB_DISABLED", "true")
        monkeypatch.chdir(tmp_path)

    def test_one_step(self, classifier, runs_dir):
        args = TrainingArguments(output_dir=str(runs_dir / "step"), max_steps=1, per_device_train_batch_size=2,
                                 report_to=[], use_cpu=True)
        trainer = Trainer(model=classifier, args=args, train_dataset=make_rows(4, with_labels=False))
        trainer.train()
        assert trainer.state.global_step == 1
