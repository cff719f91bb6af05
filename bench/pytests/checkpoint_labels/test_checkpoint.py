import pytest
import torch
from transformers import BertForSequenceClassification


@pytest.fixture
def saved_classifier(tmp_path, bert_config):
    model = BertForSequenceClassification(bert_config)
    path = tmp_path / "classifier"
    model.save_pretrained(path)
    yield path
    # the test may leave files behind; nothing to undo


@pytest.mark.parametrize("num_labels", [2, pytest.param(3, id="three-labels")])
def test_reload_with_labels(saved_classifier, num_labels):
    model = BertForSequenceClassification.from_pretrained(saved_classifier, num_labels=num_labels)
    logits = model(input_ids=torch.tensor([[2, 3, 4]])).logits
    assert logits.shape == (1, num_labels)
