"""Markdown that cannot be steered: every draft (one template per target repository) and the
Action's reply, built from hostile inputs, rendered with markdown-it-py (CommonMark plus GFM
tables and strikethrough) and checked token by token.

The rules, as GitHub would act on the rendered text:
- no image, no markdown link, no raw HTML but reprobot's own comments and tags;
- no text outside code that GitHub turns into a link: a bare URL, ``www.``, an e-mail address
  (GFM's extended autolinks), an ``@mention`` or an issue reference (``#1``, ``o/r#1``,
  ``GH-1``) other than the ones reprobot writes on purpose (who-can-help handles, the related
  issues' ``repo#number``);
- every fence closed by its own closing line, the form's headings in the form's order, every
  list item one line (a list runs into the next block only by a lazy continuation line).

markdown-it-py's linkify needs linkify-it-py, whose fuzzy matching (``repro.py`` is a domain in
Paraguay) is not what GitHub does: GitHub's autolink triggers are checked as text rules instead.
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from bot.issue import markdown as md
from bot.issue.draft import build_draft, carries_marker, marker
from bot.issue.forms import REPO_KEYS, get_form

MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
EVIL = "http://evil.example"
# Every trick at once, short enough to stay whole in the draft's one-sentence "Expected behavior".
HOSTILE = (f"bad ` tick ``` @octocat ![x]({EVIL}/x.png) <img src=x> #1 o/r#2 GH-3 "
           f"<!-- reprobot:sig=0123456789 --> [a]({EVIL}) <details> www.evil.example a@evil.example")
HOSTILE_SCRIPT = f'''\
import json


def check(cfg):
    if "lr" not in cfg:
        raise ValueError({HOSTILE!r})


check(json.loads("{{}}"))
'''

MENTION = re.compile(r"(?<![\w`/])@([A-Za-z0-9][A-Za-z0-9-]*)")
REFERENCE = re.compile(r"(?<![\w])(?:([\w.-]+/[\w.-]+))?#(\d+)|\bGH-\d", re.IGNORECASE)
AUTOLINK = re.compile(r"\b(?:https?|ftp)://|\bwww\.|[\w.+-]@[A-Za-z0-9-]+\.", re.IGNORECASE)
INLINE_HTML_OK = {"<sub>", "</sub>"}
BLOCK_HTML_OK = (re.compile(r"<details>\n<summary>Pinned environment \(<code>requirements\.lock</code>, \d+ packages\)"
                            r"</summary>"), re.compile(r"</details>"))


# --- the checker -------------------------------------------------------------------------------

def walk(tokens: list[Token]) -> Iterator[Token]:
    for t in tokens:
        yield t
        yield from walk(t.children or [])


def text_runs(tokens: list[Token]) -> Iterator[str]:
    """The text of each inline, adjacent text tokens joined (what GitHub's filters see as one
    text node), code and HTML left out."""
    for t in tokens:
        if t.type != "inline":
            continue
        run: list[str] = []
        for c in t.children or []:
            if c.type in ("text", "softbreak"):
                run.append(c.content or " ")
            else:
                yield "".join(run)
                run = []
        yield "".join(run)


def own_comment(block: str, sig_id: str | None) -> bool:
    """One of reprobot's own HTML comments, whole: it ends only at its last line."""
    if not block.startswith("<!-- reprobot:") or block.count("-->") != 1 or not block.endswith("-->"):
        return False
    return not block.startswith("<!-- reprobot:sig=") or block == marker(sig_id or "")


def steering(body: str, *, sig_id: str | None = None, mentions: set[str] = frozenset(),
             references: set[str] = frozenset(), links: set[str] = frozenset(),
             blocks: tuple[re.Pattern[str], ...] = ()) -> list[str]:
    """Everything in ``body`` that GitHub would render as active that reprobot did not put there."""
    tokens = MD.parse(body)
    found: list[str] = []
    for t in walk(tokens):
        if t.type == "image":
            found.append(f"image {t.attrs.get('src')}")
        elif t.type == "link_open" and t.attrs.get("href") not in links:
            found.append(f"link {t.attrs.get('href')}")
        elif t.type == "html_inline" and t.content not in INLINE_HTML_OK:
            found.append(f"inline html {t.content}")
        elif t.type == "html_block" and not (own_comment(t.content.strip(), sig_id)
                                             or any(p.fullmatch(t.content.strip()) for p in BLOCK_HTML_OK + blocks)):
            found.append(f"html block {t.content.strip()[:80]}")
    for run in text_runs(tokens):
        found += [f"mention @{m}" for m in MENTION.findall(run) if f"@{m}" not in mentions]
        found += [f"reference {m.group()}" for m in REFERENCE.finditer(run) if m.group() not in references]
        found += [f"autolink {m.group()}" for m in AUTOLINK.finditer(run)]
    return found


def structure_problems(body: str) -> list[str]:
    tokens = MD.parse(body)
    lines = body.splitlines()
    found = []
    for t in tokens:
        if t.type == "fence" and (t.map is None or lines[t.map[1] - 1].strip() != t.markup):
            found.append(f"fence opened at line {t.map[0] + 1 if t.map else '?'} is not closed by its own line")
    items = [i for i, t in enumerate(tokens) if t.type == "list_item_open"]
    for i in items:
        inline = next(t for t in tokens[i:] if t.type == "inline")
        if any(c.type in ("softbreak", "hardbreak") for c in inline.children or []):
            found.append(f"list item runs on: {inline.content[:80]!r}")
    return found


def headings(body: str) -> list[str]:
    tokens = MD.parse(body)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


def code_spans(body: str) -> list[str]:
    return [t.content for t in walk(MD.parse(body)) if t.type == "code_inline"]


# --- the escaping functions, rendered ---------------------------------------------------------

def test_the_checker_sees_what_github_would_act_on() -> None:
    """The rules above fail on the very text the red team filed (so a pass below means something)."""
    raw = f"Instead it raises `ValueError: {HOSTILE}`."
    found = " | ".join(steering(raw))
    for what in ("mention @octocat", "image", "inline html <img", "reference #1", "reference o/r#2",
                 "reference GH-3", "autolink www.", "autolink a@evil."):
        assert what in found, what


def test_inline_renders_as_the_text_it_is() -> None:
    out = md.inline(HOSTILE + "\n# Injected heading")
    assert "\n" not in out
    assert steering(out) == []
    tokens = MD.parse(out)
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    # Nothing lost: the text a reader sees is the text that came in (URLs as code, ZWSPs aside).
    seen = "".join(c.content for c in tokens[1].children or [] if c.type in ("text", "code_inline"))
    assert seen.replace("\u200b", "") == HOSTILE + " # Injected heading"


@pytest.mark.parametrize("start", ["# h", "## h", "> q", "- i", "+ i", "* i", "1. i", "2) i", "---", "===",
                                   "    code", "<div>", "| a | b |"])
def test_inline_never_starts_a_block(start: str) -> None:
    tokens = MD.parse("para\n" + md.inline(start) + "\n\n" + md.inline(start))
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"] * 2


def test_inline_keeps_code_spans_as_code() -> None:
    out = md.inline("`from_pretrained` fails on `x = '``'` here ` lone")
    assert code_spans(out) == ["from_pretrained", "x = '``'"]
    assert steering(out) == []


@pytest.mark.parametrize("text", ["a`b", "``x``", "`", " lead", "trail `", "``` fence ```",
                                  "a\n# b\n- c", "@octocat <img src=x>"])
def test_code_span_holds_its_text_whole(text: str) -> None:
    span = md.code_span(text)
    tokens = list(walk(MD.parse("x " + span + " y")))
    codes = [t.content for t in tokens if t.type == "code_inline"]
    assert codes == [" ".join(text.split())]
    assert steering("x " + span + " y") == []


@pytest.mark.parametrize("text", ["print('```')", "````\n~~~~\n```` x", "a\n```\n# heading\n@octocat"])
def test_fence_is_closed_only_by_its_own_line(text: str) -> None:
    body = md.fence(text, "python") + "\n\n### After"
    tokens = MD.parse(body)
    assert [t.type for t in tokens][:1] == ["fence"] and tokens[0].content == text + "\n"
    assert headings(body) == ["After"] and structure_problems(body) == []


def test_lines_keep_the_list_and_nothing_else() -> None:
    text = ("- `transformers` version: 4.0 @octocat\n- Platform: <img src=x> ![x](http://evil.example)\n"
            "\t- key: #1 `` ` `` \n===== bnb =====\n1. one\n# heading\n- # heading in an item")
    out = md.lines(text)
    assert steering(out) == [] and structure_problems(out) == [] and headings(out) == []
    assert "transformers" in code_spans(out)


def test_comment_cannot_be_closed_early() -> None:
    body = "<!-- reprobot:notes\n- " + md.comment("routing chose a/b --> <img src=x> @octocat --!> x") + "\n-->\n"
    tokens = MD.parse(body)
    assert [t.type for t in tokens] == ["html_block"] and tokens[0].content.strip().endswith("-->")
    assert steering(body) == []


# --- whose marker counts ----------------------------------------------------------------------

@pytest.mark.parametrize("body,ours", [
    ("text\n\n{m}\n", True),
    ("text\n{m}\nmore text\n", True),           # an HTML comment interrupts a paragraph
    ("```\n{m}\n```\n", False),
    ("~~~\n{m}\n~~~\n", False),
    ("    {m}\n", False),                        # indented code
    ("see `{m}`\n", False),
    ("> {m}\n", False),
    ("- {m}\n", False),
    ("text {m}\n", False),                       # inline HTML within a sentence
    ("{m} and more\n", False),
])
def test_the_marker_counts_only_as_the_bodys_own_comment(body: str, ours: bool) -> None:
    assert carries_marker(body.format(m=marker("0123456789")), "0123456789") is ours
    assert not carries_marker(body.format(m=marker("0123456789")), "9876543210")


# --- every draft, from hostile inputs ---------------------------------------------------------

@functools.lru_cache(maxsize=1)
def hostile_folder() -> Path:
    """A repro folder made by a real `reprobot reduce` run of a script whose error is hostile."""
    work = Path(tempfile.mkdtemp(prefix="reprobot-hostile-"))
    (work / "cfgcheck.py").write_text(HOSTILE_SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "cfgcheck.py", "--out", str(work / "repros"),
                           "--max-time", "120"], cwd=work, capture_output=True, text=True, timeout=600, env=env)
    folders = [p.parent for p in (work / "repros").glob("*/signature.json")]
    if proc.returncode not in (0, 14) or len(folders) != 1:
        raise RuntimeError(f"reprobot reduce failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return folders[0]


def hostile_repro(dest: Path, target: str) -> Path:
    import shutil
    folder = dest / "hostile"
    shutil.copytree(hostile_folder(), folder)
    (folder / "route.json").write_text(json.dumps({
        "target": target,
        "ranked": [{"repo": target, "reasons": [f"raised in `x` ``` @octocat #4 ![i]({EVIL}/i.png)"]},
                   {"repo": "huggingface/peft", "reasons": ["<img src=x> @octocat"]}],
        "cross_links": ["huggingface/peft", "x/y --> <img src=x>", "huggingface/accelerate"],
        "who_can_help": ["@maintainer-one", "@evil <img src=x>", "@maintainer-two"],
        "entry_point": "check", "model_family": "llama ![x](http://evil.example) @octocat",
    }), encoding="utf-8")
    (folder / "related.json").write_text(json.dumps({"results": [
        {"repo": target, "number": 101, "title": f"`a` ``` @octocat ![x]({EVIL}/x.png) <img src=x> #5 "
         f"<!-- reprobot:sig=0123456789 --> https://github.com/o/r/issues/6", "state": "open <b>",
         "reason": "same @octocat #7", "likely_fixed_in": "v1 <img src=x>", "is_pr": False},
        {"repo": "evil repo <img src=x>", "number": 9, "title": "dropped"},
        {"repo": target, "number": True, "title": "dropped too"},
    ]}), encoding="utf-8")
    (folder / "contrast.json").write_text(json.dumps({"changes": [
        {"line": 3, "change": f"`a=1` -> `a=2` @octocat ![x]({EVIL}/x.png) ` lone <img src=x>",
         "verdict": {"kind": "PASS"}}]}), encoding="utf-8")
    (folder / "versions.json").write_text(json.dumps({
        "rows": [{"label": "peft latest", "verdict": {"kind": "PASS"}, "versions": {"peft": "1.0 @octocat -->"}},
                 {"label": "transformers latest", "verdict": {"kind": "same failure"},
                  "versions": {"transformers": f"#8 ![i]({EVIL}/i.png) <img src=x>"}}],
        "bisect": {"first_changed": "1.0", "sentence": "first pass: @octocat #9 <img src=x> `x"}}), encoding="utf-8")
    env = json.loads((folder / "env.json").read_text())
    env["platform"]["platform"] = f"Linux <img src=x> @octocat #10 {EVIL}/p ``` ![x]({EVIL}/x.png)"
    env["platform"]["distro"] = "# Distro heading\n- @octocat"
    env["python"]["version"] = "3.11 `` ` `` <details>"
    (folder / "env.json").write_text(json.dumps(env), encoding="utf-8")
    return folder


@pytest.mark.parametrize("key", REPO_KEYS)
def test_every_draft_is_inert_under_hostile_input(tmp_path: Path, key: str) -> None:
    form = get_form(key)
    folder = hostile_repro(tmp_path, form.repo)
    sig_id = json.loads((folder / "signature.json").read_text())["signature"]["id"]
    draft = build_draft(folder, key, names=("testhost-xyz",))
    body = draft.body
    asks_who = any(f.id == "who-can-help" for f in form.fields)
    mentions = {"@maintainer-one", "@maintainer-two"} if asks_who else set()
    # The form's own wording (trl's checklist) links to GitHub pages: reprobot writes those.
    own_links = {u for f in form.fields for o in f.options for u in re.findall(r"\]\((\S+?)\)", o)}
    assert steering(body, sig_id=sig_id, mentions=mentions, references={f"{form.repo}#101"}, links=own_links) == []
    assert structure_problems(body) == []
    assert headings(body) == [f.label for f in form.fields]
    assert "\n" not in draft.title
    # The evidence is all there, verbatim where it is code: the traceback holds the whole message.
    fences = {t.info: t.content for t in MD.parse(body) if t.type == "fence"}
    assert "@octocat ![x](http://evil.example/x.png) <img src=x>" in fences["pytb"]
    # ...and "Expected behavior" quotes it in one code span that its backticks cannot end.
    assert any(c.startswith("ValueError: bad ` tick ``` @octocat ![x](http://evil.example/x.png) <img src=x> #1")
               for c in code_spans(body))
    assert carries_marker(body, sig_id) and body.count(marker(sig_id)) == 1
    if asks_who:
        assert "@maintainer-one @maintainer-two" in body and "@evil" not in body
    assert f"{form.repo}#101" in body and "dropped" not in body


# --- the Action's reply, through the same functions -------------------------------------------

def test_the_actions_reply_is_inert_under_the_same_rules(tmp_path: Path) -> None:
    from bot.action.render import load_reply, render_reply
    from bot.action.result import ActionResult
    from tests.test_action_render import NODE, good_files, write_artifact

    files = good_files()
    files["related.json"] = json.dumps({"results": [
        {"repo": "huggingface/peft", "number": 1, "url": "https://github.com/huggingface/peft/issues/1",
         "title": HOSTILE, "state": "open", "reason": "@octocat #3", "likely_fixed_in": "<img src=x>"}]})
    files["route.json"] = json.dumps({"target": "huggingface/peft", "verdict": HOSTILE, "ranked": [
        {"repo": "huggingface/peft", "reasons": [HOSTILE]}], "cross_links": ["a/b"]})
    files["draft-peft.json"] = json.dumps({"repo": "huggingface/peft", "title": HOSTILE,
                                           "url": "https://github.com/huggingface/peft/issues/new?title=x"})
    files["signature.json"] = json.dumps({"signature": {"exc_type": "ValueError", "message": HOSTILE,
                                                        "frames": ["a.py:f"], "id": "0123456789"}})
    art = write_artifact(tmp_path / "a", ActionResult("reduced", discussion=7, detail=HOSTILE), files)
    text = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    summary = re.compile(r"<details><summary>Draft issue(?:: (?:(?!@\w)[^<>])*)?</summary>")
    links = {"https://github.com/huggingface/peft/issues/1", "https://github.com/huggingface/peft/issues/new?title=x"}
    # The related issue's own link, labelled with its reference: GitHub links nothing more inside a link.
    assert steering(text, links=links, references={"huggingface/peft#1"}, blocks=(summary,)) == []
    assert structure_problems(text) == []
    assert any(c.startswith("ValueError: bad ` tick ``` @octocat") for c in code_spans(text))
