"""The bug-report forms of the target repositories (each target's ``fields``, one module per
target in bot/targets/), and the reading of a rendered issue body back into those forms' fields.

A submitted GitHub issue form renders as one ``### <label>`` section per field, in form
order; an empty optional field reads ``_No response_``; checkboxes read ``- [X] option`` /
``- [ ] option``; a textarea with ``render:`` is wrapped in a code fence of that language.
reprobot's drafts are written in exactly that shape, so one parser serves validation, the
JSON field values and the pre-filled URL.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union

# Field, Form and REPO_KEYS are re-exported: commands and tests read them from here.
from bot.targets import REPO_KEYS, Field, Form, get_target, targets  # noqa: F401

NO_RESPONSE = "_No response_"
# Put in a section by the templates when reprobot has nothing honest to say there
# (System Info without env.json): validation treats the field as empty.
MISSING_MARK = "<!-- reprobot:missing -->"
# Put before a sentence reprobot proposed and a person has to confirm (Expected behavior).
CONFIRM_MARK = "<!-- reprobot:confirm"

BODY_MAX = 65536  # GitHub's limit on an issue body, in characters
# A question only the reporter can answer (``transformers env`` asks about distributed set-ups).
FILL_IN = "<fill in>"

FieldValue = Union[str, list[str]]

def load_forms() -> dict[str, Form]:
    """key -> form of every registered target (read from the registry each time, so a target
    registered at run time has its form here too)."""
    return {t.key: t.form for t in targets()}


def get_form(key: str) -> Form:
    """The form for a repo key ("peft") or full name ("huggingface/peft")."""
    return get_target(key).form


# --- reading a rendered body ------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^### (.+?)\s*$")
_CHECKBOX = re.compile(r"^- \[([ xX])\] (.*)$")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass
class Section:
    label: str
    body: str


def parse_sections(markdown: str) -> tuple[str, list[Section]]:
    """(text before the first section, ``### <label>`` sections in order).

    Headings inside code fences (a ``### step 2`` comment in a script) are content, not sections.
    """
    preamble: list[str] = []
    parts: list[tuple[str, list[str]]] = []
    current = preamble
    fence: str | None = None
    for line in markdown.split("\n"):
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip()[len(marker):]:
                fence = None
        elif fence is None and (h := _HEADING.match(line)):
            current = []
            parts.append((h.group(1), current))
            continue
        current.append(line)
    sections = [Section(label, "\n".join(lines).strip("\n")) for label, lines in parts]
    return "\n".join(preamble).strip("\n"), sections


def _unfence(body: str, lang: str) -> str:
    m = re.fullmatch(rf"(`{{3,}}){re.escape(lang)}\n(.*)\n\1", body.strip(), re.DOTALL)
    return m.group(2) if m else body


def section_value(f: Field, body: str) -> FieldValue:
    """The value a form field holds, read from its rendered section."""
    if f.type == "checkboxes":
        return [m.group(2) for line in body.splitlines()
                if (m := _CHECKBOX.match(line.strip())) and m.group(1) in "xX"]
    text = body.strip()
    if text == NO_RESPONSE:
        return ""
    return _unfence(text, f.render) if f.render else text


def is_empty(value: FieldValue) -> bool:
    if isinstance(value, list):
        return not value
    return MISSING_MARK in value or not _COMMENT.sub("", value).strip()


def field_values(form: Form, markdown: str) -> dict[str, FieldValue]:
    """Field id -> value for every field of ``form`` found in ``markdown``."""
    _, sections = parse_sections(markdown)
    by_label = {s.label: s.body for s in sections}
    return {f.id: section_value(f, by_label[f.label]) for f in form.fields if f.label in by_label}


@dataclass(frozen=True)
class Problem:
    field: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass
class Validation:
    problems: list[Problem] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)  # field ids with a proposal to confirm

    @property
    def ok(self) -> bool:
        return not self.problems


def validate(form: Form, markdown: str) -> Validation:
    """Check a rendered body against the form: the same sections in the same order, every
    required field non-empty, only the form's checkbox options."""
    out = Validation()
    if len(markdown) > BODY_MAX:
        out.problems.append(Problem(None, f"the body has {len(markdown)} characters; GitHub takes at most {BODY_MAX}"))
    _, sections = parse_sections(markdown)
    labels = [s.label for s in sections]
    if labels != form.labels:
        out.problems.append(Problem(None, f"sections {labels} do not match the {form.repo} form {form.labels}"))
    by_label = {s.label: s.body for s in sections}
    for f in form.fields:
        if f.label not in by_label:
            continue
        body = by_label[f.label]
        value = section_value(f, body)
        if f.required and is_empty(value):
            out.problems.append(Problem(f.id, "required but empty"))
        if f.type == "checkboxes":
            for line in body.splitlines():
                m = _CHECKBOX.match(line.strip())
                if line.strip() and not m:
                    out.problems.append(Problem(f.id, f"not a checkbox line: {line.strip()[:60]!r}"))
                elif m and m.group(2) not in f.options:
                    out.problems.append(Problem(f.id, f"not an option of the form: {m.group(2)[:60]!r}"))
            if set(f.required_options) - set(value):
                out.unconfirmed.append(f.id)   # GitHub refuses the form until the reporter ticks them
        elif CONFIRM_MARK in body or FILL_IN in body:
            out.unconfirmed.append(f.id)
    return out
