"""dedup's "likely duplicate" as a calibrated probability (bot/upstream/calibration.py): the
logistic fit and threshold, the model shipped with reprobot, and real labelled pairs from the
train part of bot/data/upstream (a duplicate flagged, a non-duplicate with the same stock message
not), through a real SQLite index of the bundled known issues."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from bot.prepare import likely_duplicate
from bot.upstream.calibration import FEATURES, Model, fit, model, threshold_for
from bot.upstream.dedup import dedup
from bot.upstream.failure import failure_from_text
from bot.upstream.index import IssueIndex
from bot.upstream.seed import seed, traceback_text


def test_the_fit_orders_by_evidence_and_the_threshold_keeps_the_precision() -> None:
    rows = [([x / 10], x >= 6) for x in range(11)] * 3 + [([0.7], False)]
    w, b = fit(rows, steps=3000)
    m = Model(tuple(w), b, 0.0)
    probs = [m.probability([x / 10]) for x in range(11)]
    assert probs == sorted(probs) and probs[0] < 0.2 and probs[-1] > 0.8
    scored = [(m.probability(x), y) for x, y in rows]
    t = threshold_for(scored, 0.95)
    flagged = [y for p, y in scored if p >= t]
    assert flagged and sum(flagged) / len(flagged) >= 0.95
    # a lower threshold would let the wrong one (0.7, not a duplicate) through at 0.95 precision
    assert t > m.probability([0.6])


def test_the_shipped_model_is_the_one_the_code_reads() -> None:
    data = json.loads(resources.files("bot").joinpath("data/dedup_calibration.json").read_text(encoding="utf-8"))
    assert data["features"] == list(FEATURES) and "train part only" in data["fitted_on"]
    fitted = model()
    assert fitted is not None and 0.5 <= fitted.threshold < 1.0
    assert len(fitted.weights) == len(FEATURES)


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory) -> IssueIndex:
    index = IssueIndex.open(Path(tmp_path_factory.mktemp("known")) / "known.sqlite3")
    seed(index)
    yield index
    index.close()


def _pair(a: str, b: str) -> dict:
    text = resources.files("bot").joinpath("data/upstream/pairs_train.jsonl").read_text(encoding="utf-8")
    for line in text.splitlines():
        p = json.loads(line)
        ends = {f"{p[k]['repo']}#{p[k]['number']}": p[k] for k in ("a", "b")}
        if set(ends) == {a, b}:
            return {"label": p["label"], **ends}
    raise AssertionError(f"{a} / {b} is not a train pair")


def _flag(index: IssueIndex, issue: dict) -> tuple[dict | None, list[dict]]:
    index.excluded = (issue["repo"], int(issue["number"]))     # the query is not its own duplicate
    try:
        related = dedup(index, failure_from_text(traceback_text(issue))).to_dict()
    finally:
        index.excluded = None
    return likely_duplicate(related), related["results"]


def test_a_labelled_duplicate_is_flagged_with_its_probability(known: IssueIndex) -> None:
    a, b = "huggingface/peft#414", "huggingface/accelerate#1515"     # one report filed at both
    pair = _pair(a, b)
    assert pair["label"] == "duplicate"
    top, results = _flag(known, pair[a])
    assert top is not None and f"{top['repo']}#{top['number']}" == b
    assert top["duplicate_probability"] >= model().threshold
    assert all(r["duplicate_probability"] is not None for r in results)


@pytest.mark.parametrize("a, b", [
    # the same stock message, a different bug (different frames, different fix)
    ("huggingface/peft#2874", "huggingface/peft#727"),
    # the same call rejecting a keyword, a different keyword and the opposite version mismatch
    ("huggingface/transformers#34699", "huggingface/accelerate#2551"),
])
def test_a_labelled_non_duplicate_is_not_flagged(known: IssueIndex, a: str, b: str) -> None:
    pair = _pair(a, b)
    assert pair["label"] == "not_duplicate" and pair[a]["exc_type"] == pair[b]["exc_type"]
    top, _ = _flag(known, pair[a])
    assert top is None or f"{top['repo']}#{top['number']}" != b
