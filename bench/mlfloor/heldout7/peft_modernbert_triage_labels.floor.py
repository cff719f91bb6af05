from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from transformers import ModernBertConfig, ModernBertForSequenceClassification

set_peft_model_state_dict(get_peft_model(ModernBertForSequenceClassification(ModernBertConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2, num_labels=4)), LoraConfig(task_type="SEQ_CLS", target_modules=["Wqkv"])), get_peft_model_state_dict(get_peft_model(ModernBertForSequenceClassification(ModernBertConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2, num_labels=3)), LoraConfig(task_type="SEQ_CLS", target_modules=["Wqkv"]))))
