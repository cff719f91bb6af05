"""The walk back after a result that fails warm but not cold (reducer/reduction/cold_verdict.py
``walk_back``): what breaks a result cold stays in every later one, so the walk finds the newest
result that still fails cold by bisection, not only among the newest few."""
from __future__ import annotations

from reducer.reduction.cold_verdict import COLD_FALLBACK_TRIES, walk_back


def _checker(breaks_at: int):
    """A cold check over results named by their index: those from ``breaks_at`` on fail warm only."""
    asked: list[int] = []

    def fails_cold(source: str):
        i = int(source)
        asked.append(i)
        return ("record %d" % i if i < breaks_at else None), "outcome %d" % i
    return fails_cold, asked


def test_the_newest_result_is_asked_first_and_kept_when_it_fails_cold():
    fails_cold, asked = _checker(breaks_at=200)
    assert walk_back([str(i) for i in range(130)], fails_cold) == ("129", "record 129", "outcome 129")
    assert asked == [129]


def test_a_step_that_broke_the_result_long_ago_is_found_by_bisection():
    # heldout6's chat service: ids shrunk into duplicates at the 7th accepted result, 130 after it;
    # the newest six alone (the walk before) all failed warm only
    fails_cold, asked = _checker(breaks_at=7)
    found = walk_back([str(i) for i in range(137)], fails_cold)
    assert found == ("6", "record 6", "outcome 6")
    assert len(asked) <= COLD_FALLBACK_TRIES and asked[0] == 136


def test_nothing_that_fails_cold_gives_none_within_the_tries():
    fails_cold, asked = _checker(breaks_at=0)
    assert walk_back([str(i) for i in range(500)], fails_cold) is None
    assert len(asked) == COLD_FALLBACK_TRIES
    assert walk_back([], fails_cold) is None
