from transformers.pipelines.zero_shot_classification import ZeroShotClassificationArgumentHandler

ZeroShotClassificationArgumentHandler()("a", "b", "this ticket is about %s")
