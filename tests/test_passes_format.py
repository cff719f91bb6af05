"""Final layout of repro.py: imports first (only past inert code), PEP 8 spacing, no noise."""
from __future__ import annotations

from reducer.analysis.format import format_source, tidy


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


def test_a_call_too_long_for_a_line_gets_one_argument_a_line() -> None:
    src = ('x = PeftModel.from_pretrained(Model.from_pretrained("", device_map={"model.vision_tower": "cpu"}, '
           'quantization_config=BitsAndBytesConfig(bnb_4bit_use_double_quant=True, llm_int8_enable_fp32_cpu_offload=True)), '
           '"", max_memory={0: 0})\n')
    assert tidy(src) == (
        'x = PeftModel.from_pretrained(\n'
        '    Model.from_pretrained(\n'
        '        "",\n'
        '        device_map={"model.vision_tower": "cpu"},\n'
        '        quantization_config=BitsAndBytesConfig(\n'
        '            bnb_4bit_use_double_quant=True,\n'
        '            llm_int8_enable_fp32_cpu_offload=True,\n'
        '        ),\n'
        '    ),\n'
        '    "",\n'
        '    max_memory={0: 0},\n'
        ')\n')


def test_an_inlined_value_keeps_no_stray_breaks_and_short_statements_join() -> None:
    src = ("def f():\n    g(\n    a, h(\n        b,\n        c), {'k': 1,})\n"
           "t = (1,\n     )\n")
    assert tidy(src) == "def f():\n    g(a, h(b, c), {'k': 1})\n\n\nt = (1,)\n"


def test_comments_strings_and_operator_chains_keep_their_breaks() -> None:
    src = ('y = {\n    "a": 1,  # why\n}\n'
           'z = ("a"\n     "b")\n'
           's = f("""\nline\n""")\n'
           'n = (aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n'
           '     + bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb)\n')
    assert tidy(src) == src


def test_laying_out_never_changes_what_a_program_means() -> None:
    """Every corpus script and example, laid out again: the same syntax tree (layout only)."""
    import ast
    from pathlib import Path

    from reducer.analysis.format import lay_out_statements
    root = Path(__file__).resolve().parents[1]
    scripts = sorted((root / "bench" / "corpus").glob("*.py")) + sorted((root / "examples").rglob("*.py"))
    assert len(scripts) > 20
    changed = 0
    for path in scripts:
        src = path.read_text()
        out = lay_out_statements(src)
        assert out is not None, path
        assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(src)), path
        changed += out != src
    assert changed > 0      # the corpus has long and multi-line statements: the check saw some
