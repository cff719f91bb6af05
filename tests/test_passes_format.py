"""Final layout of repro.py: imports first (only past inert code), PEP 8 spacing, no noise."""
from __future__ import annotations

from reducer.format import format_source, tidy


def test_imports_hoisted_and_blank_lines_normalised() -> None:
    src = ("import os\n\n\n\nx = 1\ndef f():\n    pass\n    return 1\n\n\n\n\nimport sys\n"
           "class A:\n    def a(self): pass\n    def b(self): pass\nprint(f())\n")
    assert format_source(src) == (
        "import os\nimport sys\n\nx = 1\n\n\ndef f():\n    return 1\n\n\n"
        "class A:\n    def a(self): pass\n\n    def b(self): pass\n\n\nprint(f())\n")


def test_imports_never_hoisted_past_code_that_can_matter() -> None:
    src = 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = ""\nimport torch\ntorch.zeros(1)\n'
    assert format_source(src) == 'import os\n\nos.environ["CUDA_VISIBLE_DEVICES"] = ""\nimport torch\ntorch.zeros(1)\n'


def test_tidy_keeps_comments_and_code() -> None:
    src = "\n\n# why this matters\nx = 1\n\n\ny = 2\n\n"
    assert tidy(src) == "# why this matters\nx = 1\ny = 2\n"
