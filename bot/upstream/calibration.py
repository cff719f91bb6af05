"""How likely a dedup match is the same failure: a logistic model over the parts of its score.

dedup's score ranks candidates; it is not a probability (a shared generic message and a matching
innermost frame can add up to the same number). The model here turns a ranked candidate's parts
(same message and how many issues share it, frame overlap, innermost frame, BM25, the margin over
the next candidate, whether the message is stock wording) into the chance that a maintainer would
call it a duplicate. It is fitted by ``bench/calibrate_dedup.py`` on the TRAIN part of the
labelled set only (bot/data/upstream/), and "likely duplicate" is a probability at or above the
threshold chosen there for ≥ 90% precision on that part; the held-out part is reported by
``bench/upstream_eval.py``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Sequence

FEATURES = ("same_message", "message_weight", "message_in_text", "frames", "innermost", "bm25", "margin",
            "generic", "github_search", "query_frames")


def vector(components: dict[str, float], *, full: dict[str, float], innermost: bool, margin: float,
           generic: bool, query_frames: bool) -> list[float]:
    """A candidate's features, from dedup's score parts; ``full``: what each part weighs at most
    (dedup's weights), so each feature reads 0..1."""
    return [1.0 if components.get("message") else 0.0,
            components.get("message", 0.0) / full["message"],
            1.0 if components.get("message_in_text") else 0.0,
            components.get("frames", 0.0) / full["frames"],
            1.0 if innermost else 0.0,
            components.get("bm25", 0.0) / full["bm25"],
            max(0.0, margin),
            1.0 if generic else 0.0,
            1.0 if components.get("github_search") else 0.0,
            1.0 if query_frames else 0.0]


@dataclass(frozen=True)
class Model:
    weights: tuple[float, ...]
    bias: float
    threshold: float

    def probability(self, x: Sequence[float]) -> float:
        z = self.bias + sum(w * v for w, v in zip(self.weights, x, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@lru_cache(maxsize=1)
def model() -> Model | None:
    """The fitted model (bot/data/dedup_calibration.json), or None when it is missing."""
    try:
        data = json.loads(resources.files("bot").joinpath("data/dedup_calibration.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if list(data.get("features", [])) != list(FEATURES):
        return None     # fitted for other features: the rule in bot/prepare.py decides instead
    return Model(tuple(float(w) for w in data["weights"]), float(data["bias"]), float(data["threshold"]))


def fit(rows: list[tuple[list[float], bool]], *, l2: float = 0.01, steps: int = 4000,
        rate: float = 0.5) -> tuple[list[float], float]:
    """Logistic regression by full-batch gradient descent (a few hundred rows: no library needed)."""
    n_feat = len(rows[0][0])
    w, b = [0.0] * n_feat, 0.0
    n = len(rows)
    for _ in range(steps):
        gw, gb = [l2 * wi for wi in w], 0.0
        for x, y in rows:
            z = b + sum(wi * xi for wi, xi in zip(w, x, strict=True))
            p = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
            err = p - (1.0 if y else 0.0)
            for i, xi in enumerate(x):
                gw[i] += err * xi / n
            gb += err / n
        w = [wi - rate * g for wi, g in zip(w, gw, strict=True)]
        b -= rate * gb
    return w, b


def threshold_for(scored: list[tuple[float, bool]], precision: float, floor: float = 0.5) -> float:
    """The lowest probability at which flags at or above it are right at least ``precision`` of the
    time on ``scored`` (never below ``floor``)."""
    best = 1.0
    for t in sorted({p for p, _ in scored if p >= floor}, reverse=True):
        flagged = [ok for p, ok in scored if p >= t]
        if sum(flagged) / len(flagged) >= precision:
            best = t
        else:
            break
    return best


def to_json(weights: list[float], bias: float, threshold: float, about: dict[str, Any]) -> str:
    return json.dumps({"features": list(FEATURES), "weights": [round(w, 4) for w in weights],
                       "bias": round(bias, 4), "threshold": round(threshold, 4), **about}, indent=2) + "\n"
