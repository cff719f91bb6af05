"""The publish side's reading of an (untrusted) artifact and the reply it renders."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from bot.action.render import MAX_REPLY, code_span, fence, load_reply, marker, md_text, render_reply
from bot.action.result import STATUSES, ActionResult
from reducer.errors import ReprobotError
from reducer.failure.signature import Signature

NODE = "D_kwDOfake0000001"
FAKE_TOKEN = "ghp_" + "Q" * 12 + "0123456789abcdefghijklmn"
ALLOWED_HTML = {"<details>", "</details>", "<summary>", "</summary>", "<sub>", "</sub>", marker(NODE)}


def html_in(markdown: str) -> list[str]:
    """Every raw HTML fragment GitHub's (CommonMark) renderer would see outside code."""
    out = []
    for tok in MarkdownIt("commonmark").parse(markdown):
        if tok.type == "html_block":
            out.extend(x for x in re.findall(r"<[^>]*>", tok.content))
        for child in tok.children or []:
            if child.type == "html_inline":
                out.append(child.content)
    return out


def links_and_text(markdown: str) -> tuple[list[str], str]:
    """The link targets GitHub would render, and the plain text outside code (where @x pings)."""
    hrefs, text = [], []
    for tok in MarkdownIt("commonmark").parse(markdown):
        for child in tok.children or []:
            if child.type == "link_open":
                hrefs.append(str(child.attrs.get("href")))
            elif child.type == "text":
                text.append(child.content)
    return hrefs, "\n".join(text)


def write_artifact(root: Path, result: ActionResult, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    result.write(root)
    repro = root / "repro"
    repro.mkdir(exist_ok=True)
    for name, text in files.items():
        (repro / name).write_text(text)
    return root


def good_files() -> dict[str, str]:
    sig = Signature("KeyError", "<int>", ("peft/peft_model.py:from_pretrained",))
    return {
        "original.py": "import peft\nx = {}\nprint(1)\nx[22]\n",
        "repro.py": "x = {}\nx[22]\n",
        "signature.json": json.dumps({"signature": sig.to_dict(), "runs": [{"wall_time": 1.0}, {"wall_time": 1.0}]}),
        "reduction.json": json.dumps({"status": "done", "runs": 17}),
        "route.json": json.dumps({"target": "huggingface/peft", "cross_links": ["huggingface/transformers"],
                                  "ranked": [{"repo": "huggingface/peft", "score": 3.0,
                                              "reasons": ["raised in peft/peft_model.py"]}]}),
        "related.json": json.dumps({"results": [
            {"repo": "huggingface/peft", "number": 123, "title": "KeyError 22 on load", "state": "open",
             "url": "https://github.com/huggingface/peft/issues/123", "score": 0.9, "reason": "same frames",
             "likely_fixed_in": None, "is_pr": False}]}),
        "draft-peft.md": "### System Info\n\npeft 0.19\n\n### Who can help?\n\n@BenjaminBossan\n",
        "draft-peft.json": json.dumps({"repo": "huggingface/peft", "title": "KeyError in PeftModel.from_pretrained",
                                       "url": "https://github.com/huggingface/peft/issues/new?template=bug-report.yml"
                                              "&title=KeyError", "url_complete": False}),
    }


def test_reply_has_every_section(tmp_path: Path) -> None:
    art = write_artifact(tmp_path / "a", ActionResult("reduced", discussion=7, candidates=1, block=1,
                                                      requirements=["peft==0.19.0"]), good_files())
    text = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    assert text.splitlines()[0] == marker(NODE)
    assert "minimal repro" in text
    assert "`KeyError: <int> @ peft/peft_model.py:from_pretrained`" in text
    assert "```python\nx = {}\nx[22]\n```" in text
    assert "4 → 2 lines" in text and "in 19 runs" in text  # 17 reduction runs + 2 first runs
    assert "**huggingface/peft** (cross-link huggingface/transformers)\n\n- raised in peft/peft_model.py\n" in text
    assert "[huggingface/peft#123](https://github.com/huggingface/peft/issues/123)" in text
    assert "https://github.com/huggingface/peft/issues/new?template=bug-report.yml&title=KeyError" in text
    assert "<details><summary>Draft issue" in text and "````markdown" not in text  # no inner ``` so 3 ticks
    # The draft's @-mention is quoted in a code block: it cannot ping from the discussion.
    draft_block = text.split("<details>")[1]
    assert "```markdown\n### System Info" in draft_block and "@BenjaminBossan" in draft_block
    assert "`peft==0.19.0`" in text and "not installed" in text
    assert set(html_in(text)) <= ALLOWED_HTML


def test_hostile_artifact_is_inert(tmp_path: Path) -> None:
    files = good_files()
    files["repro.py"] = (f"TOKEN = '{FAKE_TOKEN}'\n# ```\n# </details> @octocat <img src=x onerror=alert(1)>\n"
                         f"# {marker(NODE)}\nraise KeyError(22)\n")
    files["related.json"] = json.dumps({"results": [
        {"repo": "huggingface/peft", "number": 1, "url": "https://github.com/huggingface/peft/issues/1",
         "title": "@everyone </details><img src=x> [click](javascript:alert(1)) <!-- x -->", "state": "open"},
        {"repo": "huggingface/peft", "number": 2, "url": "https://evil.example/phish", "title": "phish"},
        {"repo": "evil/repo", "number": 3, "url": "https://github.com/huggingface/peft/issues/3", "title": "mismatch"},
        "not an object", {"repo": 5}]})
    files["route.json"] = json.dumps({"target": "huggingface/peft", "ranked": [
        {"repo": "huggingface/peft", "reasons": ["<script>alert(1)</script>", 42, f"token {FAKE_TOKEN}"]}],
        "cross_links": ["a/b", "not a repo!"]})
    files["draft-peft.md"] = "### Reproduction\n\n```python\nx\n```\n</details>\n@maintainers\n"
    files["draft-peft.json"] = json.dumps({"repo": "huggingface/peft", "title": "</summary><b>x</b> @team",
                                           "url": "https://evil.example/new?x=1", "url_complete": True})
    files["signature.json"] = json.dumps({"signature": {"exc_type": "KeyError", "message": f"`{FAKE_TOKEN}` ``` @x",
                                                        "frames": ["a.py:f", 7], "id": "zz not an id"}})
    art = write_artifact(tmp_path / "a", ActionResult("reduced", discussion=7), files)
    text = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    assert FAKE_TOKEN not in text and "<redacted" in text
    assert set(html_in(text)) <= ALLOWED_HTML, html_in(text)
    assert text.count(marker(NODE)) == 1
    hrefs, plain = links_and_text(text)
    assert hrefs and all(h.startswith("https://github.com/huggingface/peft/issues/") for h in hrefs), hrefs
    assert not re.search(r"@\w", plain), plain  # no mention outside code: nobody is pinged
    assert "evil.example" not in text
    assert "peft#3" not in text and "issues/2" not in text
    assert "not a repo!" not in text
    # The repro's own backticks cannot close its fence: the fence is longer than any run inside.
    assert "````python" in text
    # The draft code block is the only place @maintainers appears, and there it cannot ping.
    assert text.count("@maintainers") == 1 and text.index("@maintainers") > text.index("````markdown")


def test_symlinks_and_oversize_files_are_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "runner-secret.txt"
    secret.write_text("SECRET-CONTENT-FROM-THE-RUNNER\n")
    art = write_artifact(tmp_path / "a", ActionResult("reproduced", discussion=7), {})
    (art / "repro" / "original.py").symlink_to(secret)
    (art / "repro" / "repro.py").write_text("x = 1\n" * 500_000)  # 3 MB: over the per-file cap
    text = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    assert "SECRET-CONTENT" not in text and "x = 1" not in text
    (art / "result.json").unlink()
    (art / "result.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ReprobotError):
        ActionResult.read_untrusted(art)


@pytest.mark.parametrize("data", [
    [], {"schema": 2, "status": "reduced"}, {"schema": 1, "status": "pwned"},
    {"schema": 1, "status": "reduced", "candidates": "3"}, {"schema": 1, "status": "reduced", "marked": 1},
    {"schema": 1, "status": "reduced", "detail": "x" * 5000}, {"schema": 1, "status": "reduced", "steps": [1]},
    {"schema": 1, "status": "reduced", "requirements": ["a"] * 500}, {"schema": 1, "status": "timeout",
                                                                      "max_time": -1},
])
def test_result_schema_refuses_tampering(data: object) -> None:
    with pytest.raises(ReprobotError):
        ActionResult.from_untrusted(data)


def test_result_round_trip_and_size_cap(tmp_path: Path) -> None:
    r = ActionResult("timeout", discussion=3, timeout=5.0, max_time=30.0, steps={"route": 0, "dedup": None})
    r.write(tmp_path)
    assert ActionResult.read_untrusted(tmp_path) == r
    (tmp_path / "result.json").write_text(json.dumps({**r.to_dict(), "detail": ""}) + " " * 70_000)
    with pytest.raises(ReprobotError):
        ActionResult.read_untrusted(tmp_path)


@pytest.mark.parametrize("status", [s for s in STATUSES if s not in ("ignored", "not-allowed", "reduced",
                                                                      "reproduced")])
def test_short_polite_replies(tmp_path: Path, status: str) -> None:
    result = ActionResult(status, discussion=7, timeout=5, max_time=30, body_bytes=10_000_000, max_body=1_000_000,
                          syntax_error="line 1: invalid syntax" if status == "syntax-error" else None,
                          detail="ran to completion (exit 0) @someone")
    art = write_artifact(tmp_path / status, result, {})
    text = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    assert text.startswith(marker(NODE))
    assert len(text) < 700 and "```python\n" not in text
    assert "@someone" not in text
    expected = {"no-failure": "without an error", "timeout": "5 s per run", "flaky": "not again",
                "syntax-error": "line 1: invalid syntax", "no-script": "no Python code block",
                "attachment-only": "runs an attached notebook", "too-large": "10000000 bytes",
                "attachment-error": "did not run the attached file: ran to completion",
                "error": "could not finish", "not-isolated": "cannot isolate code posted by the public",
                "edited": "edited after the label was added"}[status]
    assert expected in text


def test_silent_statuses_render_nothing(tmp_path: Path) -> None:
    for status in ("ignored", "not-allowed"):
        art = write_artifact(tmp_path / status, ActionResult(status), {})
        with pytest.raises(ValueError):
            render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))


def test_reply_stays_under_githubs_limit(tmp_path: Path) -> None:
    files = good_files()
    files["repro.py"] = "x = 1\n" * 20_000
    files["draft-peft.md"] = "### Reproduction\n\n" + "y = 2\n" * 20_000
    art = write_artifact(tmp_path / "a", ActionResult("reduced"), files)
    text = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    assert len(text) <= MAX_REPLY
    assert "cut: too long" in text


def test_inert_text_helpers() -> None:
    # The same escaping as the drafts (bot/issue/markdown.py): an intraword ``_`` stays as it is.
    assert md_text("@alice <b>*x*</b>\n[a](b) peft_model") == \
        "@&#8203;alice &lt;b&gt;\\*x\\*&lt;/b&gt; \\[a\\](b) peft_model"
    assert code_span("a ``b`` c") == "``` a ``b`` c ```"
    assert fence("print('```')").startswith("````\n")
    assert FAKE_TOKEN not in fence(FAKE_TOKEN) and FAKE_TOKEN not in md_text(FAKE_TOKEN)


def test_reproduced_but_not_reduced_shows_the_original(tmp_path: Path) -> None:
    files = good_files()
    del files["repro.py"], files["reduction.json"]
    art = write_artifact(tmp_path / "a", ActionResult("reproduced", detail="stopped at the 960s limit"), files)
    text = render_reply(load_reply(art, NODE, ActionResult.read_untrusted(art)))
    assert "the failure, reproduced" in text
    assert "```python\nimport peft\nx = {}\nprint(1)\nx[22]\n```" in text
    assert "it was not reduced (stopped at the 960s limit)" in text and "2 runs" in text
