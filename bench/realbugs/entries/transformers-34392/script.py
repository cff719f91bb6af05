"""Fine-tune a Llama-3.2-Vision style model (Mllama) on chart-question pairs with the Trainer.

Our collator already produced the processor's tensors, saved per example; here they are built in
code with the same shapes, and the model is a small Mllama built from a config.
"""
import torch
from transformers import MllamaConfig, MllamaForConditionalGeneration, Trainer, TrainingArguments
from transformers.models.mllama.configuration_mllama import MllamaTextConfig, MllamaVisionConfig

SEQ_LEN = 12
NUM_TILES = 2
IMAGE_SIZE = 28
VOCAB = 128
IMAGE_TOKEN = VOCAB - 1
TRAIN = {"output_dir": "mllama-charts", "per_device_train_batch_size": 2, "max_steps": 2, "learning_rate": 1e-5,
         "logging_steps": 1, "report_to": "none", "remove_unused_columns": False}


def build_model():
    vision = MllamaVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_global_layers=1,
                                num_attention_heads=2, image_size=IMAGE_SIZE, patch_size=14,
                                max_num_tiles=NUM_TILES, intermediate_layers_indices=[0], vision_output_dim=64,
                                supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]])
    text = MllamaTextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=1, cross_attention_layers=[1],
                            max_position_embeddings=64, pad_token_id=0, rope_scaling={"rope_type": "default"})
    torch.manual_seed(0)
    return MllamaForConditionalGeneration(MllamaConfig(vision_config=vision, text_config=text,
                                                       image_token_index=IMAGE_TOKEN))


class ChartQA(torch.utils.data.Dataset):
    """What our collator saved for each (chart, question, answer): the processor's outputs."""

    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.rows = []
        for _ in range(n):
            ids = torch.randint(1, IMAGE_TOKEN, (SEQ_LEN,), generator=g)
            ids[0] = IMAGE_TOKEN
            self.rows.append({
                "input_ids": ids,
                "attention_mask": torch.ones(SEQ_LEN, dtype=torch.long),
                "pixel_values": torch.randn(1, NUM_TILES, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g),
                "aspect_ratio_ids": torch.tensor([2]),
                "aspect_ratio_mask": torch.ones(1, NUM_TILES, dtype=torch.long),
                "cross_attention_mask": torch.ones(SEQ_LEN, 1, NUM_TILES, dtype=torch.long),
            })

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(batch):
    return {k: torch.stack([row[k] for row in batch]) for k in batch[0]}


def main():
    model = build_model()
    trainer = Trainer(model=model, args=TrainingArguments(**TRAIN), train_dataset=ChartQA(8), data_collator=collate)
    trainer.train()
    trainer.save_model(TRAIN["output_dir"])


if __name__ == "__main__":
    main()
