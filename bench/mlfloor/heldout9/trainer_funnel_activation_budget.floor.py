from transformers import FunnelConfig, FunnelForSequenceClassification

FunnelForSequenceClassification(FunnelConfig(vocab_size=1, d_model=2, n_head=1, d_head=2, d_inner=1,
                                             block_sizes=[1])).gradient_checkpointing_enable()
