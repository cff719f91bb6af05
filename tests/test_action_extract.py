"""Script extraction from a discussion body (bot/action/extract.py) and event parsing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.action.event import load_event, parse_event
from bot.action.extract import extract
from reducer.errors import ExitCode, ReprobotError

EVENTS = Path(__file__).parent / "data" / "events"


def test_single_python_block_is_the_script() -> None:
    ex = extract("It fails:\n\n```python\nimport torch\nx = torch.zeros(2)\nx[5]\n```\n")
    assert ex.status == "ok"
    assert ex.script == "import torch\nx = torch.zeros(2)\nx[5]\n"
    assert (ex.block, ex.candidates, ex.marked) == (1, 1, False)


def test_largest_block_wins_and_a_marked_block_beats_it() -> None:
    small = "```py\nimport a\n```\n"
    large = "```python\nimport a\nimport b\nprint(a, b)\n```\n"
    ex = extract(small + "\n" + large)
    assert ex.status == "ok" and ex.block == 2 and "import b" in ex.script
    assert ex.why == "the largest of 2 Python code blocks"

    # GitHub does not show an info string: "reprobot" there chooses nothing, and is reported.
    marked_info = "```python reprobot\nimport a\n```\n"
    ex = extract(large + "\n" + marked_info)
    assert ex.block == 1 and not ex.marked and "import b" in ex.script and ex.info_marker == 2

    marked_comment = "```python\n# reprobot: main\nimport c\n```\n"
    ex = extract(large + "\n" + marked_comment)
    assert ex.block == 2 and ex.marked and "import c" in ex.script


def test_untagged_blocks_count_only_when_they_are_python_scripts() -> None:
    traceback = "```\nTraceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 1\n```\n"
    script = "```\nimport os\nos.listdir('.')[99]\n```\n"
    ex = extract(traceback + "\n" + script)
    assert ex.status == "ok" and ex.block == 2 and ex.script.startswith("import os")
    # A tagged block exists: untagged ones are not candidates at all.
    ex = extract(script + "\n```python\nimport sys\n```\n")
    assert ex.block == 2 and ex.candidates == 1


def test_tilde_fences_and_longer_backtick_fences() -> None:
    body = "~~~python\nimport a\n~~~\n\n````python\nprint('```')\nimport b\n````\n"
    ex = extract(body)
    assert ex.candidates == 2
    assert ex.script == "print('```')\nimport b\n"


def test_notebook_lines_become_comments_and_pip_hints() -> None:
    ex = extract("```python\n!pip install peft==0.19.0 'transformers>=5'\n%matplotlib inline\nimport peft\n```\n")
    assert ex.status == "ok"
    assert ex.script.splitlines()[:2] == ["# !pip install peft==0.19.0 'transformers>=5'", "# %matplotlib inline"]
    assert ex.requirements == ["peft==0.19.0", "transformers>=5"]


def test_requirement_hints_are_plain_requirements_only() -> None:
    body = ("Install: `pip install -U torch==2.4.0 accelerate -r reqs.txt --index-url https://x.invalid/simple`\n\n"
            "```requirements\npeft>=0.19\n-e git+https://x.invalid/repo.git\nfoo @ https://x.invalid/foo.whl\n```\n"
            "```python\nimport peft\n```\n")
    ex = extract(body)
    assert ex.requirements == ["peft>=0.19", "torch==2.4.0", "accelerate"]
    assert "-r" in ex.rejected and "--index-url" in ex.rejected
    assert any(r.startswith("foo @") for r in ex.rejected)
    assert any(r.startswith("-e") for r in ex.rejected)


def test_no_script_attachment_and_syntax_error() -> None:
    assert extract("It just fails, help").status == "no-script"
    assert extract("```bash\npython train.py\n```").status == "no-script"
    att = extract("See [train.py](https://github.com/user-attachments/files/1234/train.py)")
    assert att.status == "attachment-only" and att.attachments == 1
    bad = extract("```python\ndef f(:\n    pass\n```\n")
    assert bad.status == "syntax-error" and bad.syntax_error.startswith("line 1:")
    assert extract("```python\n\n```\n").status == "no-script"


def test_event_files_parse() -> None:
    files = sorted(EVENTS.glob("*.json"))
    assert len(files) >= 5
    for path in files:
        ev = load_event(path)
        assert ev.repository == "octo/widgets" and ev.node_id.startswith("D_")
    ev = load_event(EVENTS / "labeled_failing.json")
    assert (ev.action, ev.label, ev.number, ev.sender) == ("labeled", "needs-repro", 7, "maint")
    assert extract(ev.body).status == "ok"


def test_malformed_events_are_one_line_errors(tmp_path: Path) -> None:
    base = json.loads((EVENTS / "labeled_failing.json").read_text())
    with pytest.raises(ReprobotError) as e:
        parse_event({"action": "labeled"})
    assert e.value.exit_code == ExitCode.BAD_INPUT
    for mutate in (lambda d: d["discussion"].update(node_id="x y; rm -rf /"),
                   lambda d: d["repository"].update(full_name="../../etc"),
                   lambda d: d["sender"].update(login="a b"),
                   lambda d: d["discussion"].update(number="7")):
        d = json.loads(json.dumps(base))
        mutate(d)
        with pytest.raises(ReprobotError):
            parse_event(d)
    d = json.loads(json.dumps(base))
    d["discussion"]["body"] = None  # GitHub sends null for an empty body
    assert parse_event(d).body == ""
    bad = tmp_path / "ev.json"
    bad.write_text("{not json")
    with pytest.raises(ReprobotError) as e:
        load_event(bad)
    assert e.value.exit_code == ExitCode.BAD_INPUT
    with pytest.raises(ReprobotError) as e:
        load_event(tmp_path / "missing.json")
    assert e.value.exit_code == ExitCode.FILE_MISSING


@pytest.mark.parametrize("unit", ["[", "[\n", "```\n", "~~~\n", "[a](", "*a", "> ", "- ", "`", "<"])
def test_crafted_bodies_are_handled_quickly(unit: str) -> None:
    """Inputs that make markdown parsers slow: a 1 MB one is refused at once (GitHub stores at
    most 65,536 characters); one just under the limit is parsed in well under 2 s."""
    import time

    from bot.action.extract import MAX_BODY, extract
    from reducer.errors import ReprobotError
    t0 = time.monotonic()
    with pytest.raises(ReprobotError, match="GitHub allows 65,536"):
        extract(unit * (1_000_000 // len(unit)))
    body = unit * ((MAX_BODY - 200) // len(unit)) + "\n```python\nimport json\njson.loads('{')\n```\n"
    result = extract(body)
    elapsed = time.monotonic() - t0
    assert elapsed < 2.0, elapsed
    assert result.status in ("ok", "no-script", "syntax-error")
