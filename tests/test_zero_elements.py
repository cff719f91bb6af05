"""Never to zero elements (issue #38): the value passes shrink sizes, shapes and data a library
builds with, but no candidate they offer has a zero-element layer or tensor the original did not
have (``nn.Linear(8, 0)``, ``torch.randn(0)``, ``torch.tensor([])`` take other code paths than the
user's, and a maintainer cannot trust them). A property test: whatever the sizes, with an oracle
that accepts every candidate that still runs (a zero-size layer runs too: nothing but the passes'
own rule stands in the way), every candidate is run in-process with real torch and holds no
zero-element value. Without the rule the same test finds them (checked when it was written).""" 
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reducer_support import reduce_with

torch = pytest.importorskip("torch")

SCRIPT = """import torch
layer = torch.nn.Linear({a}, {b})
x = torch.randn({c}, {a})
y = layer(x)
mask = torch.ones(({c}, {b}), dtype=torch.bool)
ids = torch.tensor([[{a}, {b}, {c}]])
table = torch.nn.Embedding(num_embeddings={b}, embedding_dim={c})
out = torch.zeros(size=[{c}, {b}])
cfg = {{"in_features": {b}, "out_features": {c}}}
head = torch.nn.Linear(**cfg)
"""


def _ints(source: str) -> int:
    return sum(int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.])", source))


def _run(source: str) -> dict | None:
    space: dict = {}
    try:
        exec(compile(source, "<candidate>", "exec"), space)
    except Exception:
        return None
    return space


def _zero_elements(source: str) -> list[str]:
    """Run ``source`` in-process; the names of its tensors and layers with zero elements."""
    space = _run(source)
    if space is None:
        return []       # a candidate that fails has built nothing to look at
    found = []
    for name, value in space.items():
        if isinstance(value, torch.Tensor) and value.numel() == 0:
            found.append(name)
        elif isinstance(value, torch.nn.Module) and any(p.numel() == 0 for p in value.parameters()):
            found.append(name)
    return found


@settings(max_examples=15, deadline=None)
@given(a=st.integers(1, 64), b=st.integers(1, 64), c=st.integers(1, 9))
def test_no_candidate_of_the_value_passes_has_a_zero_element_layer_or_tensor(a, b, c):
    source = SCRIPT.format(a=a, b=b, c=c)
    assert _zero_elements(source) == []
    offered: list[str] = []

    def still_runs(candidate: str) -> bool:
        # the worst case for sizes: any candidate that still runs is accepted (a zero-size layer
        # runs too), so only the passes' own rule keeps zero-element values out
        offered.append(candidate)
        return _run(candidate) is not None
    reduce_with(source, still_runs, "shrink_literals", "shrink_containers")
    assert offered, "the passes offered nothing: the property would hold vacuously"
    if max(a, b, c) > 1:    # something could shrink, and did: the rule is not holding everything still
        assert any(_ints(candidate) < _ints(source) for candidate in offered)
    for candidate in offered:
        assert _zero_elements(candidate) == [], candidate


def test_the_rule_leaves_other_integers_free():
    """An exception's argument or a plain index is not a size: it may still become 0."""
    source = "d = {0: 1}\nraise KeyError(7)\n"
    out = reduce_with(source, lambda s: "KeyError(" in s, "shrink_literals")
    assert "KeyError(0)" in out


def test_a_collective_keeps_one_tensor_in_its_list_under_the_usual_alias():
    """``import torch.distributed as dist``: ``dist.all_gather([...], t)`` is torch's as much as
    ``torch.distributed.all_gather`` is; its output list emptied (heldout5's gather reduced to
    ``dist.all_gather([], t)``) is not a call a maintainer can read as the user's."""
    source = ("import torch\nimport torch.distributed as dist\n"
              "dist.all_gather([torch.zeros(2), torch.zeros(2)], torch.zeros(3))\n")
    out = reduce_with(source, lambda s: "dist.all_gather(" in s, "shrink_containers")
    assert "dist.all_gather([]" not in out and "torch.zeros(" in out.split("all_gather(", 1)[1], out
