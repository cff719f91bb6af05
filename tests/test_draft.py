"""Drafts: rendered from a repro folder that a real `reprobot reduce` run made, read back into
sections and checked against each repository's own bug-report form."""
from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path

import pytest

from bot.cli import main
from bot.issue.draft import URL_MAX, build_draft, fence, load_draft, make_title, prefill_url, trim_traceback
from bot.issue.forms import NO_RESPONSE, REPO_KEYS, field_values, get_form, load_forms, parse_sections, validate
from bot.scrub import find_secrets
from reducer.errors import ExitCode
from reducer.failure.tracebacks import parse_tracebacks
from tests.draft_support import SHARED_FORMS, add_route_and_related, copy_repro

TRACEBACKS = Path(__file__).parent / "data" / "tracebacks"
NAMES = ("testhost-xyz",)


def upstream_form(key: str) -> list[dict]:
    """The input elements (no markdown blocks) of the upstream form, parsed with PyYAML."""
    yaml = pytest.importorskip("yaml")
    path = SHARED_FORMS / key / "bug-report.yml"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the upstream forms live in ../shared, outside this repository")
    return [el for el in yaml.safe_load(path.read_text(encoding="utf-8"))["body"] if el["type"] != "markdown"]


@pytest.fixture
def repro(tmp_path: Path) -> Path:
    return copy_repro(tmp_path)


@pytest.mark.parametrize("key", REPO_KEYS)
def test_forms_data_matches_upstream(key: str) -> None:
    elements = upstream_form(key)
    form = get_form(key)
    assert [f.id for f in form.fields] == [el["id"] for el in elements]
    for f, el in zip(form.fields, elements):
        assert f.type == el["type"]
        assert f.label == el["attributes"]["label"]
        assert f.required == bool((el.get("validations") or {}).get("required", False))
        assert list(f.options) == [o["label"] for o in el["attributes"].get("options", [])]
        assert f.render == el["attributes"].get("render")


@pytest.mark.parametrize("key", REPO_KEYS)
def test_rendered_draft_matches_upstream_form(repro: Path, key: str) -> None:
    elements = upstream_form(key)
    draft = build_draft(repro, key, names=NAMES)
    preamble, sections = parse_sections(draft.body)
    assert preamble.startswith("<!-- reprobot:notes") and preamble.endswith("-->")
    # Same labels, same order: what GitHub renders for a submitted form.
    assert [s.label for s in sections] == [el["attributes"]["label"] for el in elements]
    values = field_values(get_form(key), draft.body)
    assert list(values) == [el["id"] for el in elements]
    assert draft.fields == values
    for el, section in zip(elements, sections):
        required = (el.get("validations") or {}).get("required", False)
        if required:
            assert section.body.strip() and section.body.strip() != NO_RESPONSE, el["id"]
            assert values[el["id"]], el["id"]
        if el["type"] == "checkboxes":
            options = [o["label"] for o in el["attributes"]["options"]]
            lines = section.body.splitlines()
            assert [ln[6:] for ln in lines] == options  # every option, in order, "- [X] " / "- [ ] "
            assert all(ln[:6] in ("- [X] ", "- [ ] ") for ln in lines)
            assert values[el["id"]] == ["My own modified scripts"] or \
                values[el["id"]] == ["My own task or dataset (give details below)"]
        if el["attributes"].get("render"):
            assert section.body.startswith("```" + el["attributes"]["render"] + "\n")
    assert validate(get_form(key), draft.body).ok
    assert find_secrets(draft.body) == [] and find_secrets(draft.title) == []


def test_draft_content_is_the_evidence(repro: Path) -> None:
    sig = json.loads((repro / "signature.json").read_text())
    draft = build_draft(repro, "transformers", names=NAMES)
    values = draft.fields
    repro_py = (repro / "repro.py").read_text()
    reproduction = str(values["reproduction"])
    assert fence(repro_py, "python") in reproduction          # the minimal script, verbatim
    # how to run it: exactly what the final verification did (repro.py alone in an empty folder)
    if json.loads((repro / "reduction.json").read_text()).get("verified") == "alone, offline":
        assert "python repro.py" in reproduction and "in an empty folder" in reproduction
    else:
        assert "python cfgload.py" in reproduction
    assert "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes" in reproduction
    assert f"<!-- reprobot:sig={sig['signature']['id']} -->" in reproduction
    reduction = json.loads((repro / "reduction.json").read_text())
    if reduction.get("statements_before"):
        assert f"from {reduction['statements_before']} to {reduction['statements_after']} statements" in reproduction
    assert "`transformers` version" in str(values["system-info"])
    # Title: the library call, the exception, the message; short enough for GitHub.
    # (the reducer may rewrite `json.loads(...)` as `loads(...)`; either names the API)
    assert re.match(r"(json\.)?loads: json\.decoder\.JSONDecodeError: Expecting property name", draft.title)
    assert len(draft.title) <= 120
    assert "<!-- reprobot:confirm" in str(values["expected-behavior"])
    assert re.search(r"`(json\.)?loads\(\.\.\.\)` should complete\. Instead it raises "
                     r"`json\.decoder\.JSONDecodeError: Expecting property name enclosed in double quotes",
                     str(values["expected-behavior"]))
    assert validate(get_form("transformers"), draft.body).unconfirmed[-1] == "expected-behavior"


def test_missing_inputs_are_said_not_invented(repro: Path) -> None:
    (repro / "env.json").unlink()
    draft = build_draft(repro, "peft", names=NAMES)
    assert any("env.json is missing" in n for n in draft.notes)
    assert any("route.json is missing" in n for n in draft.notes)
    assert any("related.json is missing" in n for n in draft.notes)
    assert draft.fields["who-can-help"] == ""
    assert "### Who can help?\n\n_No response_" in draft.body
    assert "Possibly related" not in draft.body and "Also involves" not in draft.body
    check = draft.validate()
    assert [(p.field, p.message) for p in check.problems] == [("system-info", "required but empty")]
    assert "System Info was not captured" in str(draft.fields["system-info"])


def test_route_and_related_fill_their_places(repro: Path) -> None:
    add_route_and_related(repro)
    t = build_draft(repro, "transformers", names=NAMES)
    assert t.fields["who-can-help"] == "@maintainer-one @maintainer-two"  # the form asks for fewer than 3
    assert t.title.startswith("read_config: json.decoder.JSONDecodeError")  # route.json's entry point
    rep = str(t.fields["reproduction"])
    assert "- huggingface/transformers#101: json.loads fails on trailing commas (closed, likely fixed in v9.9.9)" in rep
    assert "- huggingface/peft: peft is imported by the script" in rep
    assert not any("route.json" in n or "related.json" in n for n in t.notes)
    # Routing's handles are its target's maintainers: not offered on peft's form.
    assert build_draft(repro, "peft", names=NAMES).fields["who-can-help"] == ""
    # accelerate's form has no who-can-help: no handles anywhere; routing's target is cross-linked.
    a = build_draft(repro, "accelerate", names=NAMES)
    assert "@maintainer" not in a.body
    assert "- huggingface/transformers: the call that fails is json.loads" in str(a.fields["reproduction"])
    assert any("routing chose huggingface/transformers" in n for n in a.notes)


def test_secrets_and_personal_paths_in_the_folder_are_scrubbed(repro: Path) -> None:
    token = "hf" + "_" + "Q" * 10 + "x7" * 12
    src = (repro / "repro.py").read_text()
    (repro / "repro.py").write_text(f'TOKEN = "{token}"  # from /home/jdoe/secrets on testhost-xyz\n' + src)
    draft = build_draft(repro, "bitsandbytes", names=NAMES)
    assert token not in draft.body and token[3:20] not in draft.body
    assert "jdoe" not in draft.body and "testhost-xyz" not in draft.body
    assert {"hf_token", "home_dir", "local_name"} <= {f.kind for f in draft.scrubbed}
    assert find_secrets(draft.body) == []


def test_prefilled_url_carries_the_fields(repro: Path) -> None:
    draft = build_draft(repro, "peft", names=NAMES)
    url = draft.prefill_url()
    assert url.complete and len(url.url) <= URL_MAX
    parsed = urllib.parse.urlsplit(url.url)
    assert f"{parsed.scheme}://{parsed.netloc}{parsed.path}" == "https://github.com/huggingface/peft/issues/new"
    query = urllib.parse.parse_qs(parsed.query)
    assert query["template"] == ["bug-report.yml"] and query["title"] == [draft.title]
    for fid in ("system-info", "reproduction", "expected-behavior"):
        assert query[fid] == [draft.fields[fid]]
    assert "who-can-help" not in query  # empty fields are not sent


def test_prefilled_url_falls_back_when_too_long() -> None:
    fields = {"reproduction": "x = 1\n" * 3000, "information-tasks": ["My own task or dataset (give details below)"]}
    url = prefill_url("huggingface/accelerate", "bug-report.yml", "A title", fields, "accelerate")
    assert not url.complete
    assert url.url == "https://github.com/huggingface/accelerate/issues/new?template=bug-report.yml&title=A%20title"
    assert "paste each section of draft-accelerate.md" in url.instruction and "checkboxes" in url.instruction


def test_trimmed_windows_seed_traceback() -> None:
    record = parse_tracebacks((TRACEBACKS / "seed_meta_tensor.txt").read_text(encoding="utf-8"))[-1]
    trimmed = trim_traceback(record, "inference_worker.py")
    text = trimmed.text
    assert text.startswith("Traceback (most recent call last):\n")
    assert text.splitlines()[-1].startswith(record.exc_type)
    assert 'File "inference_worker.py"' in text                   # the script's frames, by name only
    assert "frames omitted" in text and trimmed.omitted > 0        # the plumbing in between
    assert record.frames[-1].func in text                          # the innermost frame
    shown = sum(1 for ln in text.splitlines() if ln.startswith("  File "))
    assert shown + trimmed.omitted == len(record.frames)


def test_title_is_cut_at_a_sentence_and_bounded() -> None:
    record = parse_tracebacks((TRACEBACKS / "seed_meta_tensor.txt").read_text(encoding="utf-8"))[-1]
    title = make_title("PeftModel.from_pretrained", record)
    assert title.startswith(f"PeftModel.from_pretrained: {record.exc_type}: ")
    assert len(title) <= 120


def test_headings_inside_code_are_not_sections() -> None:
    body = "### Reproduction\n\n```python\n### step 1\nx = 1\n```\n\n### Expected behavior\n\nworks"
    _, sections = parse_sections(body)
    assert [s.label for s in sections] == ["Reproduction", "Expected behavior"]
    assert "### step 1" in sections[0].body


def test_validation_rejects_wrong_sections_and_options() -> None:
    form = load_forms()["accelerate"]
    bad = ("### System Info\n\n```Shell\nx\n```\n\n### Information\n\n- [X] Something else\n\n"
           "### Tasks\n\n- [ ] My own task or dataset (give details below)\n\n### Reproduction\n\n_No response_\n")
    problems = {(p.field, p.message.split(":")[0]) for p in validate(form, bad).problems}
    huge = validate(form, bad + "x" * 70000).problems
    assert any("GitHub takes at most 65536" in p.message for p in huge)
    assert (None, "sections ['System Info', 'Information', 'Tasks', 'Reproduction'] do not match the "
                  "huggingface/accelerate form ['System Info', 'Information', 'Tasks', 'Reproduction', "
                  "'Expected behavior']") in problems
    assert ("information-scripts-examples", "not an option of the form") in problems
    assert ("reproduction", "required but empty") in problems


def test_draft_command_writes_md_and_json(repro: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["draft", str(repro), "--all"]) == 0
    for key in REPO_KEYS:
        md = (repro / f"draft-{key}.md").read_text()
        data = json.loads((repro / f"draft-{key}.json").read_text())
        assert data["repo"] == get_form(key).repo and data["fields"] == field_values(get_form(key), md)
        assert data["url"].startswith(f"https://github.com/{get_form(key).repo}/issues/new?template=bug-report.yml")
        assert load_draft(repro, key).body == md
    out = capsys.readouterr().out
    assert "huggingface/transformers" in out and "valid" in out
    # A draft edited by hand is not overwritten unless asked.
    md = repro / "draft-peft.md"
    md.write_text(md.read_text().replace("should complete", "should load the config"))
    assert main(["draft", str(repro), "--repo", "peft"]) == ExitCode.USAGE
    assert "should load the config" in md.read_text()
    assert main(["draft", str(repro), "--repo", "peft", "--force"]) == 0
    assert "should load the config" not in md.read_text()


def test_file_dry_run_previews_validates_and_prints_the_url(repro: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["file", str(repro), "--dry-run", "--repo", "accelerate"]) == 0
    out = capsys.readouterr().out
    assert "huggingface/accelerate: issue preview" in out
    assert "valid against the huggingface/accelerate bug-report form" in out
    assert "to confirm: Expected behavior" in out
    assert "https://github.com/huggingface/accelerate/issues/new?template=bug-report.yml" in out
    assert "reprobot:notes" not in out  # the preview is the body as filed
    assert (repro / "draft-accelerate.md").is_file()
    # Without env.json the form's required System Info is empty: the preview says so and fails.
    (repro / "env.json").unlink()
    (repro / "draft-accelerate.md").unlink()
    assert main(["file", str(repro), "--dry-run", "--repo", "accelerate",
                 "--python", str(repro / "no-such-python")]) == ExitCode.BAD_INPUT
    assert "invalid: system-info: required but empty" in capsys.readouterr().out


def test_file_dry_run_shows_what_was_scrubbed(repro: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["draft", str(repro), "--repo", "peft"]) == 0
    md = repro / "draft-peft.md"
    md.write_text(md.read_text().replace("Save it as", "Run on alice@example.com's box; save it as"))
    capsys.readouterr()
    assert main(["file", str(repro), "--dry-run", "--repo", "peft"]) == 0
    out = capsys.readouterr().out
    assert "Scrubbed now" in out and "email" in out and "alice@example.com" not in out


def test_file_needs_a_repo_when_routing_is_absent(repro: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["file", str(repro), "--dry-run"]) == ExitCode.NOTHING_TO_FILE
    add_route_and_related(repro, target="huggingface/peft")
    assert main(["file", str(repro), "--dry-run"]) == 0
    assert "huggingface/peft: issue preview" in capsys.readouterr().out


def test_file_defaults_to_the_latest_repro_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["file", "--dry-run", "--repo", "bitsandbytes"]) == ExitCode.FILE_MISSING
    assert "no repro folder under repros/" in capsys.readouterr().err
    (tmp_path / "repros").mkdir()
    folder = copy_repro(tmp_path / "repros")
    assert main(["file", "--dry-run", "--repo", "bitsandbytes"]) == 0
    assert "bitsandbytes-foundation/bitsandbytes: issue preview" in capsys.readouterr().out
    assert (folder / "draft-bitsandbytes.md").is_file()


def test_malformed_inputs_are_one_line_errors(repro: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repro / "route.json").write_text("[1, 2]")
    assert main(["draft", str(repro), "--repo", "peft"]) == ExitCode.BAD_INPUT
    assert "route.json: expected a JSON object" in capsys.readouterr().err
    (repro / "route.json").write_text("{not json")
    assert main(["draft", str(repro), "--repo", "peft"]) == ExitCode.BAD_INPUT
    assert "route.json: not valid JSON" in capsys.readouterr().err
    (repro / "route.json").unlink()
    (repro / "signature.json").write_text("{}")
    assert main(["draft", str(repro), "--repo", "peft"]) == ExitCode.BAD_INPUT
    assert "not a reprobot signature file" in capsys.readouterr().err
    assert main(["draft", str(repro.parent / "nowhere")]) == ExitCode.FILE_MISSING  # no such folder


def test_fence_outlasts_backticks_and_drops_leading_blank_lines() -> None:
    assert fence("\n\n  x = 1\n", "python") == "```python\n  x = 1\n```"
    assert fence('s = """```"""', "python") == '````python\ns = """```"""\n````'


def test_file_dry_run_flags_random_looking_strings_for_a_person(repro: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import random
    import string
    assert main(["draft", str(repro), "--repo", "peft"]) == 0
    rng = random.Random(7)
    md = repro / "draft-peft.md"
    original = md.read_text()
    # A bare 40-hex could be a commit or a key: kept, and flagged for the person (issue #28).
    sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
    md.write_text(original.replace("Save it as", f'(client_cert="{sha}") Save it as'))
    capsys.readouterr()
    assert main(["file", str(repro), "--dry-run", "--repo", "peft"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "check: the body line" in out and "may be a credential or an id" in out
    assert sha not in out.split("URL")[0].split("check:")[1]  # the flag never prints the value
    # A clearly random one is a secret: the preview says --submit would refuse, and never shows it.
    blob = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(64))
    md.write_text(original.replace("Save it as", f'(client_cert="{blob}") Save it as'))
    assert main(["file", str(repro), "--dry-run", "--repo", "peft"]) == ExitCode.UNSAFE
    out = " ".join(capsys.readouterr().out.split())
    assert "--submit would refuse" in out and blob not in out


def test_possibly_related_lists_only_matches_worth_opening() -> None:
    from bot.issue.draft import _related_items
    results = [{"repo": "huggingface/peft", "number": n, "title": "t", "score": s}
               for n, s in ((1, 0.5), (2, 0.3), (3, 0.19), (4, 0.13))]
    results.append({"repo": "huggingface/peft", "number": 5, "title": "t", "score": 0.12, "likely_duplicate": True})
    assert [r["number"] for r in _related_items({"results": results})] == [1, 2, 5]
    # a weak best match alone is not worth listing either
    assert _related_items({"results": [{"repo": "a/b", "number": 9, "title": "t", "score": 0.15}]}) == []


def test_counts_agree_with_their_nouns() -> None:
    from bot.issue.templating import plural
    assert plural(1, "frame") == "1 frame" and plural(3, "frame") == "3 frames" and plural(0, "run") == "0 runs"
