"""A draft issue from a repro folder: title, the target form's fields, rendered markdown and
JSON, and the pre-filled ``issues/new`` URL.

Only evidence from the folder goes in: the signature and traceback of real runs, the reduced
script, reduction.json's figures, env.json, route.json and related.json. What is missing is
said so in the draft's notes (and System Info is left marked as missing), never made up.
Everything is scrubbed (bot/scrub.py) before it is returned, shown or written.
"""
from __future__ import annotations

import ast
import hashlib
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.env.lockfile import DEFAULT_INDEX, TORCH_INDEX
from bot.env.system_info import system_info
from bot.issue.hazards import HEADLINE, find_hazards, hazard_context, said_before_code
from bot.issue.markdown import code_span, fence, inline, top_level_html
from bot.issue.templating import environment, templates_dir
from bot.issue.forms import CONFIRM_MARK, MISSING_MARK, FieldValue, Form, Validation, field_values, get_form, validate
from bot.upstream.kind import classify_repro, kind_line
from bot.targets import get_target, ordered_dists, targets
from bot.scrub import Finding, scrub
from bot.run_recipe import RunRecipe
from bot.store import ReproDir, write_json_atomic, write_text_atomic
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.flaky import loop_command
from reducer.failure.normalize import _collapse_multiline_reprs, library_path
from reducer.failure.outcome import Frame, TracebackRecord
from reducer.failure.signature import PLUMBING, MatchOptions, Signature, find_match
from reducer.failure.tracebacks import parse_tracebacks

TEMPLATES_DIR = templates_dir()
MARKER_PREFIX = "<!-- reprobot:sig="
TITLE_MAX = 120          # GitHub allows 256; titles past ~120 are cut in every list view
URL_MAX = 8000           # beyond this, browsers and GitHub's front end start refusing URLs
LOCK_SHORT_PINS = 12     # a longer lock is a file to attach, not part of the body
INNER_FRAMES = 6         # innermost library frames always shown
# What may be written into a draft as a real reference or mention: only names of this shape.
REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
HANDLE = re.compile(r"^@[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9_.-]{1,100})?$")


def body_digest(text: str) -> str:
    """Recorded with a draft so a later run can tell a draft a person edited."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def edited_by_hand(repro: ReproDir, key: str) -> bool:
    md, js = repro.draft_md(key), repro.draft_json(key)
    if not md.is_file() or not js.is_file():
        return False
    written = repro.read_json(js).get("body_sha256")
    return bool(written) and written != body_digest(md.read_text(encoding="utf-8"))


def marker(sig_id: str) -> str:
    """The hidden idempotency marker: lets filing (and dedup) find an issue already filed."""
    return f"{MARKER_PREFIX}{sig_id} -->"


def carries_marker(body: str | None, sig_id: str) -> bool:
    """The body holds the marker as its own hidden comment: a line that is exactly the marker,
    outside any code or quote. Quoted in a code block, it is someone showing the marker, not
    the marker; a plain substring test would let such a quote pass for an issue already filed."""
    return marker(sig_id) in top_level_html(body or "")


@dataclass
class Draft:
    repo_key: str
    repo: str
    title: str
    body: str
    fields: dict[str, FieldValue]
    signature_id: str
    notes: list[str] = field(default_factory=list)
    scrubbed: list[Finding] = field(default_factory=list)
    template: str = "bug-report.yml"
    kind: dict[str, Any] | None = None     # bug / usage / environment (bot/upstream/kind.py)

    @property
    def form(self) -> Form:
        return get_form(self.repo_key)

    def validate(self) -> Validation:
        return validate(self.form, self.body)

    def prefill_url(self) -> "PrefillURL":
        form = self.form
        ids = {f.id: f for f in form.fields}
        fillable = {k: v for k, v in self.fields.items() if k not in ids or ids[k].prefill}
        unfillable = any(v for k, v in self.fields.items() if k in ids and not ids[k].prefill)
        return prefill_url(self.repo, self.template, self.title, fillable, self.repo_key, paste=unfillable)

    def to_json(self) -> dict[str, Any]:
        url = self.prefill_url()
        return {"repo": self.repo, "repo_key": self.repo_key, "template": self.template, "title": self.title,
                "signature_id": self.signature_id, "fields": self.fields, "notes": self.notes,
                "scrubbed": [f.to_dict() for f in self.scrubbed], "kind": self.kind,
                "url": url.url, "url_complete": url.complete, "body_sha256": body_digest(self.body)}


# --- the pre-filled URL -----------------------------------------------------------------------

@dataclass(frozen=True)
class PrefillURL:
    url: str
    complete: bool      # False: only the title is pre-filled; the fields are to be pasted
    instruction: str


def prefill_url(repo: str, template: str, title: str, fields: dict[str, FieldValue], repo_key: str,
                limit: int = URL_MAX, *, paste: bool = False) -> PrefillURL:
    """``https://github.com/<repo>/issues/new?template=...&title=...&<field-id>=...``.

    Text fields only: GitHub pre-fills form fields by id from the query, but documents no
    syntax for checkboxes, so those are ticked by hand. Past ``limit`` characters the URL
    carries the title only and the instruction says to paste the sections of the draft; so it
    does with ``paste`` (a form whose fields declare no ids, which GitHub cannot pre-fill).
    """
    base = f"https://github.com/{repo}/issues/new?"
    head = [("template", template), ("title", title)]
    texts = [(k, v) for k, v in fields.items() if isinstance(v, str) and v.strip()]
    full = base + urllib.parse.urlencode(head + texts, quote_via=urllib.parse.quote)
    checkbox_note = ("tick the checkboxes as in the draft" if any(isinstance(v, list) and v for v in fields.values())
                     else "")
    if paste:
        short = base + urllib.parse.urlencode(head, quote_via=urllib.parse.quote)
        return PrefillURL(short, False, "the form's fields have no ids GitHub can pre-fill from a URL: open the URL "
                          f"and paste each section of draft-{repo_key}.md into the field of the same name")
    if len(full) <= limit:
        return PrefillURL(full, True, "open the URL, review, " + (checkbox_note + ", " if checkbox_note else "")
                          + "and submit")
    short = base + urllib.parse.urlencode(head, quote_via=urllib.parse.quote)
    return PrefillURL(short, False, f"the filled form is too long for a URL ({len(full)} characters): open the URL "
                      f"and paste each section of draft-{repo_key}.md into the field of the same name"
                      + (", then " + checkbox_note if checkbox_note else ""))


# --- reading the folder -----------------------------------------------------------------------

def _read_optional_json(repro: ReproDir, path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = repro.read_json(path)
    if not isinstance(data, dict):
        raise ReprobotError(f"{path}: expected a JSON object, found {type(data).__name__}", ExitCode.BAD_INPUT)
    return data


RELATED_SHOWN = 5


# dedup keeps matches down to its own floor for the terminal; a filed issue lists only those a
# maintainer would open: at least this score, and at least half the best match's.
RELATED_FLOOR = 0.2


def _worth_showing(r: dict[str, Any], best: float) -> bool:
    score = r.get("score")
    if r.get("likely_duplicate") or not isinstance(score, (int, float)):
        return True
    return score >= max(RELATED_FLOOR, best / 2)


def _related_items(related: dict[str, Any] | None) -> list[dict[str, Any]]:
    """dedup's best matches worth a maintainer's click, the fields the template shows, entries
    without a number dropped."""
    out: list[dict[str, Any]] = []
    results = [r for r in (related or {}).get("results") or [] if isinstance(r, dict)]
    best = max((float(r["score"]) for r in results if isinstance(r.get("score"), (int, float))), default=0.0)
    for r in results:
        if not _worth_showing(r, best):
            continue
        # ``repo#number`` is written as a real reference: only a well-formed one.
        if not isinstance(r, dict) or not REPO_NAME.match(str(r.get("repo") or "")) \
                or not isinstance(r.get("number"), int) or isinstance(r.get("number"), bool):
            continue
        out.append({"repo": str(r["repo"]), "number": r["number"], "title": str(r.get("title") or ""),
                    "state": str(r.get("state") or "unknown"), "is_pr": bool(r.get("is_pr")),
                    "likely_fixed_in": r.get("likely_fixed_in"), "reason": str(r.get("reason") or "")})
    return out[:RELATED_SHOWN]


def _pick_record(repro: ReproDir, sig: Signature, options: MatchOptions, stored: dict[str, Any] | None
                 ) -> TracebackRecord:
    """The repro's own failure (traceback.txt), the record matching the signature; else the
    original run's record from signature.json."""
    if repro.traceback_txt.is_file():
        records = parse_tracebacks(repro.traceback_txt.read_text(encoding="utf-8", errors="replace"))
        hit = find_match(records, sig, options)
        if hit is not None:
            return hit
    if stored:
        return TracebackRecord.from_dict(stored)
    raise ReprobotError(f"{repro.path}: no traceback matching signature {sig.id} in traceback.txt or signature.json",
                        ExitCode.BAD_INPUT)


def one_line_message(record: TracebackRecord) -> str:
    """The message on one line: multi-line module reprs collapsed to ``Name(...)``."""
    msg = _collapse_multiline_reprs(record.message.strip())
    return re.sub(r"\s+", " ", msg).strip()


def _script_frames(record: TracebackRecord, script: str) -> list[int]:
    return [i for i, f in enumerate(record.frames) if Path(f.path.replace("\\", "/")).name == script]


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    name = ".".join(reversed(parts))
    return ".".join(name.split(".")[-2:]) if name.startswith("self.") else name


def _called_name(line: str, callee: str | None = None) -> str | None:
    """The dotted name of the call on a source line that enters the library: the one named like
    the library function the traceback shows next (``callee``), else the outermost call."""
    text = line.strip()
    calls: list[str] = []
    for candidate in (text, text.rstrip("(,[{\\") + ")" if text.endswith(("(", ",")) else None):
        if not candidate:
            continue
        try:
            tree = ast.parse(candidate)
        except SyntaxError:
            continue
        calls = [n for n in (_dotted(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)) if n]
        break
    if not calls:
        m = re.search(r"([A-Za-z_][\w.]*)\s*\(", text)
        return m.group(1) if m else None
    if callee:
        for name in calls:
            if name.rsplit(".", 1)[-1] == callee:
                return name
        if callee == "__init__":
            for name in calls:
                if name.rsplit(".", 1)[-1][:1].isupper():
                    return name
    return calls[0]


def entry_point(record: TracebackRecord, script: str, route: dict[str, Any] | None) -> str | None:
    """The library API the script called: route.json's word, else the call on the script's
    innermost line that leads into the next frame, else the first library function on the stack."""
    if route and route.get("entry_point"):
        return str(route["entry_point"])
    idx = _script_frames(record, script)
    start = idx[-1] + 1 if idx else 0
    if idx and start < len(record.frames) and _plumbing(record.frames[start]):
        # an object called (``model(x)``, ``DDP(...)(x)``): the library function it entered is the
        # method behind the call plumbing, never the script's variable or the constructor's alias
        real = next((f for f in record.frames[start:] if library_path(f.path) and not _plumbing(f)), None)
        if real is not None:
            return _qualified(real)
    if idx and record.frames[idx[-1]].line:
        nxt = record.frames[start].func if start < len(record.frames) else None
        name = _called_name(record.frames[idx[-1]].line, nxt)
        if name:
            return name
    for f in record.frames:
        if library_path(f.path) and not _plumbing(f):
            return _qualified(f)
    return None


def _plumbing(frame: Frame) -> bool:
    rel = library_path(frame.path)
    return rel is not None and f"{rel}:{frame.func}" in PLUMBING


def _qualified(frame: Frame) -> str:
    """``Class.method`` for a library frame whose source this interpreter has (the stack the repro
    ran in: ``DistributedDataParallel.forward``; a stored path reads ``<env>/torch/...``), else the
    function's own name."""
    from bot.upstream.route import enclosing_class
    rel = library_path(frame.path)
    if rel is None:
        return frame.func
    source = Path(frame.path)
    if not source.is_file():
        import importlib.util
        try:
            spec = importlib.util.find_spec(rel.split("/", 1)[0])
        except (ImportError, ValueError):
            spec = None
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        source = next((Path(r).parent / rel for r in roots if (Path(r).parent / rel).is_file()), source)
    owner = enclosing_class(str(source), frame.lineno)
    return f"{owner}.{frame.func}" if owner else frame.func


def make_title(entry: str | None, record: TracebackRecord, family: str | None = None) -> str:
    """``<API call> on <model family>: <exception>: <message>``, as a maintainer would scan it;
    the family is left out when the message already names it."""
    msg = one_line_message(record)
    squash = lambda t: re.sub(r"[\W_]", "", t).lower()  # noqa: E731
    on = f" on {family}" if family and entry and squash(family) not in squash(msg) else ""
    head = f"{entry}{on}: {record.exc_type}" if entry else record.exc_type
    title = f"{head}: {msg}" if msg else head
    if len(title) > TITLE_MAX and msg:
        # The first sentence is usually the part that names the bug.
        first = re.split(r"(?<=[^.])\.\s", msg, maxsplit=1)[0].rstrip(".")
        title = f"{head}: {first}"
    if len(title) > TITLE_MAX:
        title = title[:TITLE_MAX - 1].rsplit(" ", 1)[0] + "\u2026"
    return title


@dataclass
class TrimmedTraceback:
    text: str
    omitted: int
    causes: list[str]


def _frame_text(f: Frame, script: str) -> str:
    path = script if Path(f.path.replace("\\", "/")).name == script else f.path
    out = f'  File "{path}", line {f.lineno if f.lineno is not None else "?"}, in {f.func}'
    return out + (f"\n    {f.line.strip()}" if f.line.strip() else "")


def trim_traceback(record: TracebackRecord, script: str, inner: int = INNER_FRAMES) -> TrimmedTraceback:
    """The frames that matter: the script's own, the library call each makes, and the innermost
    ``inner`` frames; launcher frames above the script and plumbing in between are left out."""
    frames = list(record.frames)
    idx = _script_frames(record, script)
    start = idx[0] if idx else 0
    keep: set[int] = set(range(max(start, len(frames) - inner), len(frames)))
    for i in idx:
        keep.update({i, i + 1})
    lines = ["Traceback (most recent call last):"]
    omitted = gap = 0
    for i in range(start, len(frames)):
        f = frames[i]
        rel = library_path(f.path)
        if i in keep and not (rel and f"{rel}:{f.func}" in PLUMBING and i < len(frames) - 2):
            if gap:
                lines.append(f"  [... {gap} frame{'s' if gap > 1 else ''} omitted ...]")
                gap = 0
            lines.append(_frame_text(f, script))
        else:
            gap += 1
            omitted += 1
    if gap:
        lines.append(f"  [... {gap} frame{'s' if gap > 1 else ''} omitted ...]")
    msg_lines = record.message.rstrip().splitlines()
    if len(msg_lines) > 40:
        msg_lines = msg_lines[:20] + [f"[... {len(msg_lines) - 30} lines omitted ...]"] + msg_lines[-10:]
    message = "\n".join(msg_lines)
    lines.append(f"{record.exc_type}: {message}" if message else record.exc_type)
    return TrimmedTraceback("\n".join(lines), omitted, [c.headline for c in record.chain])


@dataclass(frozen=True)
class LockSection:
    """How the pinned environment appears in the body: short locks in full (collapsed), long ones
    as a file to attach plus one `pip install` line of the pins that matter."""
    text: str | None          # the lock, in full, when it is short
    install: str | None       # `pip install torch==... transformers==...`
    pins: int
    private: list[str] = field(default_factory=list)   # "name version" installed from a private source


def _lock_pins(text: str) -> list[tuple[str, str]]:
    pins = []
    for ln in text.splitlines():
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;\\#]+)", ln)
        if m:
            pins.append((m.group(1), m.group(2)))
    return pins


def _index_flags(lock: str, pins: list[tuple[str, str]]) -> str:
    """The index a local build's pin needs (``torch==2.13.0+cpu`` resolves only from PyTorch's
    ``/whl/cpu``), as the lock names it, so that the install line resolves as written. Only
    PyTorch's public index: any other index line (a mirror the user passed) may be private."""
    if not any("+" in v for _, v in pins):
        return ""
    urls = re.findall(r"^\s*--(?:extra-)?index-url[ =](\S+)", lock, flags=re.M)
    return "".join(f" --extra-index-url {u}" for u in dict.fromkeys(urls) if u.startswith(TORCH_INDEX))


# A lock line that installs from where the reporter chose: ``name @ URL``, a VCS or archive URL, a
# path, an editable install, or an index or link page other than PyPI's or PyTorch's.
_DIRECT = re.compile(r"^\s*(?:[A-Za-z0-9][\w.-]*(?:\[[^\]]*\])?\s*@\s*\S|-e\b|--editable\b|[\w+.-]+://|\.{0,2}/|~)")
_INDEX_OPTION = re.compile(r"^\s*(?:--(?:extra-)?index-url|-i|--find-links|-f)[\s=]+(\S+)")
_PRIVATE_PIN = re.compile(r"^#\s*([A-Za-z0-9][\w.-]*)==(\S+)\s+\(installed from a private source")


def _private_sources(text: str) -> list[str]:
    """``name version`` of each distribution the lock names as installed from a private source; an
    older lock's ``name @ URL`` line is named too (without its version, which it does not say)."""
    out = []
    for ln in text.splitlines():
        if m := _PRIVATE_PIN.match(ln.strip()):
            out.append(f"{m.group(1)} {m.group(2)}")
        elif _DIRECT.match(ln) and (name := re.match(r"\s*([A-Za-z0-9][\w.-]*)\s*(?:\[[^\]]*\])?\s*@", ln)):
            out.append(name.group(1))
    return list(dict.fromkeys(out))


def _installable(line: str) -> bool:
    """A lock line a maintainer may be shown to install from: an index pin or a public index."""
    if m := _INDEX_OPTION.match(line):
        return m.group(1).rstrip("/").startswith((DEFAULT_INDEX, TORCH_INDEX.rstrip("/")))
    return not _DIRECT.match(line)


def _lockfile(repro: ReproDir) -> LockSection | None:
    """requirements.lock for the body; None when there is none or it pins nothing. A distribution
    from a private source is named (name and version), never written as a line to install."""
    if not repro.requirements_lock.is_file():
        return None
    text = repro.requirements_lock.read_text(encoding="utf-8", errors="replace").strip()
    pins = _lock_pins(text)
    private = _private_sources(text)
    if not pins and not private:
        return None  # pins nothing (a script using the standard library only)
    # The targets' packages, the foundation's first: what a maintainer installs to try it. A
    # release of a package the reporter built privately would not be what failed: left out.
    order = {name: i for i, name in enumerate(ordered_dists())}
    built = {p.split(" ")[0].lower().replace("_", "-") for p in private}
    key = sorted(((n, v) for n, v in pins if n.lower().replace("_", "-") in order
                  and n.lower().replace("_", "-") not in built), key=lambda p: order[p[0].lower()])
    install = "pip install " + " ".join(f"{n}=={v}" for n, v in key) + _index_flags(text, key) if key else None
    if pins and len(pins) <= LOCK_SHORT_PINS:
        kept = [ln.split(" \\")[0].rstrip() for ln in text.splitlines()
                if ln.strip() and not ln.lstrip().startswith(("#", "--hash")) and _installable(ln)]
        return LockSection("\n".join(kept) or None, install, len(pins), private)
    return LockSection(None, install, len(pins), private)


def _system_info(env: dict[str, Any] | None, repo_key: str, notes: list[str]) -> str | None:
    if env is None:
        notes.append("env.json is missing: System Info is not filled (run `reprobot env` on this folder)")
        return None
    return system_info(env, repo_key).strip() or None


def _evidence(repro: ReproDir, sig_data: dict[str, Any], reduction: dict[str, Any] | None,
              reduced: bool, sig: Signature, notes: list[str], command: str = "python repro.py") -> list[str]:
    """Sentences about how the repro was obtained, each backed by a figure in the folder;
    ``command`` runs the repro (the run recipe's line: a flaky one is run in a loop of it)."""
    out: list[str] = []
    runs = sig_data.get("runs") or []
    if reduced and reduction:
        before, after = reduction.get("size_before") or {}, reduction.get("size_after") or {}
        s_before, s_after = reduction.get("statements_before"), reduction.get("statements_after")
        if isinstance(s_before, int) and isinstance(s_after, int) and s_after > 0:
            size = f" from {reduction['statements_before']} to {reduction['statements_after']} statements"
        elif isinstance(before.get("lines"), int) and isinstance(after.get("lines"), int):
            size = f" from {before['lines']} to {after['lines']} lines"
        else:
            size = ""
        runs_n = f" in {reduction['runs']} runs" if isinstance(reduction.get("runs"), int) else ""
        status = reduction.get("status")
        out.append(f"Reduced automatically{size}{runs_n}; every kept step was re-run and failed the same way"
                   + ("." if status == "done" else
                      f" (the reduction stopped before the end: {inline(str(status), 80)}; "
                      "this is the smallest script so far)."))
        if status != "done" and not reduction.get("verified"):
            # a stop whose grace ran out: say so, here and in the notes, and how to verify it
            notes.append("repro.py was not verified after the reduction stopped: `reprobot reduce "
                         "<script> --resume` verifies it before filing")
            out.append("It was not re-run on its own after the reduction stopped (unverified).")
            if not reduction.get("repro_record"):
                # traceback.txt is still the original's: said, never shown as the repro's own
                out.append("The traceback below is the original script's (`original.py`), not this repro's.")
    elif not reduced:
        notes.append("repro.py is missing: the original script is shown, not reduced (run `reprobot reduce`)")
        out.append("The script below is the original, not reduced.")
    target = sig_data.get("signature") if isinstance(sig_data.get("signature"), dict) else {}
    if target.get("exc_type") == "Hang":
        # a hang has no exception to quote: say what it does instead, and where it waits
        out.append(f"It hangs: {target.get('message') or 'no progress'}.")
    rate = sig_data.get("rate") if isinstance(sig_data.get("rate"), dict) else None
    flaky = (reduction or {}).get("flaky") if isinstance((reduction or {}).get("flaky"), dict) else None
    # the runs later steps made on the locked versions (bot/rerun/rate.py): a pass among them
    # made a failure taken to fail every time flaky
    later = sig_data.get("later_runs") if isinstance(sig_data.get("later_runs"), dict) else {}
    passed_later = (later.get("runs") or 0) > (later.get("failed") or 0)
    if rate and rate.get("runs") and rate.get("failed") != rate.get("runs"):
        # A failure that shows only sometimes must say so: a maintainer who runs it once and
        # sees it pass would otherwise close the issue.
        if sig_data.get("seed") is not None and not passed_later:
            out.append(f"The original failed this way in {rate['failed']} of {rate['runs']} runs; with a fixed "
                       f"random seed (the repro's first line) it fails every time.")
        else:
            after = (flaky or {}).get("repro") or rate
            original = (flaky or {}).get("original") or sig_data.get("rate_confirmed") or rate
            steps = ", ".join(code_span(str(k)) for k in (later.get("steps") or {}))
            out.append(f"It is flaky: the repro fails in {after['failed']} of {after['runs']} runs (the original "
                       f"in {original['failed']} of {original['runs']})"
                       + (f"; it was taken to fail every time until a later run on the locked versions passed "
                          f"({steps})" if passed_later and sig_data.get("rate_confirmed") else "")
                       + f". Run it in a loop: {code_span(loop_command(command, int(after['runs'])))}.")
    elif runs:
        out.append(f"The original script failed this way in {len(runs)} of {len(runs)} runs before reduction.")
    needs = _needs_gpus(sig_data, reduction)
    if needs:
        one = (sig_data.get("gpus") or {}).get("one_gpu") if isinstance(sig_data.get("gpus"), dict) else None
        out.append(f"It needs {needs} GPUs: run it with {needs} GPUs visible"
                   + (f" (on one GPU the original {inline(str(one), 120)} instead)." if one else "."))
    from bot.issue.notebook_note import draft_sentence
    if sentence := draft_sentence(repro):       # reduced from a notebook: which cell failed (issue #43)
        out.append(sentence)
    from bot.issue.pytest_note import draft_sentence as test_sentence
    if sentence := test_sentence(repro):        # reduced from a pytest test: which one (issue #43)
        out.append(sentence)
    frames = " < ".join(code_span(f) for f in sig.frames)
    out.append(f"Failure signature {code_span(sig.id)}: {code_span(sig.exc_type)}"
               + (f" raised at {frames}" if frames else "") + ".")
    return out


def _needs_gpus(sig_data: dict[str, Any], reduction: dict[str, Any] | None) -> int | None:
    """How many GPUs the failure needs (reduce found that one GPU does not show it), else None."""
    for data in (reduction or {}, sig_data):
        n = data.get("needs_gpus")
        if isinstance(n, int) and not isinstance(n, bool) and n > 1:
            return n
    return None


_NEED_KIND = {"model": "a model folder", "config": "a model config folder", "tokenizer": "a tokenizer folder",
              "adapter": "a PEFT adapter folder", "data": "a data file"}


def _needs_lines(reduction: dict[str, Any] | None) -> list[str]:
    """One markdown line per local file the repro still reads (reduction.json's ``needs``)."""
    out = []
    for need in (reduction or {}).get("needs") or []:
        if not isinstance(need, dict) or not need.get("path"):
            continue
        kind = _NEED_KIND.get(str(need.get("kind")), "a local file")
        if need.get("folder") == "yes" and kind == "a data file":
            kind = "a local folder"
        line = f"{code_span(str(need['path']))}: {kind}, read by {code_span(str(need.get('call', '')) + '(...)')}"
        if need.get("hint"):
            line += f"; {inline(str(need['hint']), 200)}"
        out.append(line)
    return out


def _expected(entry: str | None, record: TracebackRecord, family: str | None = None, kind: str | None = None) -> str:
    """What should have happened, and what happened instead, in the failure's own words: markdown,
    each piece of the failure's text a code span or escaped prose. For a usage error (the library
    rejected the call on purpose) it never claims the call should succeed."""
    call = code_span(f"{entry}(...)") if entry else "The script"
    on = f" on this {inline(family, 80)} model" if family else ""
    first = re.split(r"(?<=[^.])\.\s", one_line_message(record), maxsplit=1)[0].rstrip(".")
    if len(first) > 200:
        first = first[:199].rsplit(" ", 1)[0] + "\u2026"
    instead = code_span(f"{record.exc_type}: {first}" if first else record.exc_type)
    if kind == "usage":
        return (f"{call} rejects this input on purpose{on}: it raises {instead}. Expected: a clearer error "
                "message, or documented behaviour for this combination of arguments.")
    return f"{call} should complete{on}. Instead it raises {instead}."


class _Renderer:
    def __init__(self, directory: Path = TEMPLATES_DIR) -> None:
        if not directory.is_dir():
            raise ReprobotError(f"templates folder not found at {directory}", ExitCode.FILE_MISSING)
        # templates/ first (the partials every form shares), then the folders of targets that
        # keep their template elsewhere (registered by a plugin or a test).
        extra = [str(d) for d in dict.fromkeys(t.template_dir for t in targets() if t.template_dir)]
        self.env = environment([directory, *extra])

    def render(self, repo_key: str, context: dict[str, Any]) -> str:
        text = self.env.get_template(get_target(repo_key).template_name).render(**context)
        # Templates stay readable with blank lines around blocks; the output gets one at most.
        return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _reruns(repro: ReproDir, notes: list[str]):
    """What `versions` and `contrast` found by running, for the draft's sections."""
    from bot.store import rerun_notes
    found = rerun_notes(repro)
    if found.likely_fixed:
        notes.append(found.headline())
    return found


def build_draft(folder: str | Path, repo_key: str, *, names: tuple[str, ...] | None = None) -> Draft:
    """The draft for ``repo_key`` from the repro folder, scrubbed. ``names``: host/user names to
    scrub (default: this machine's)."""
    repro = ReproDir.open(folder)
    form = get_form(repo_key)
    sig_data = repro.read_json(repro.signature_json)
    try:
        sig = Signature.from_dict(sig_data["signature"])
        options = MatchOptions.from_dict(sig_data.get("options") or {})
    except (KeyError, TypeError, AttributeError, ValueError):
        raise ReprobotError(f"{repro.signature_json}: not a reprobot signature file", ExitCode.BAD_INPUT) from None
    record = _pick_record(repro, sig, options, sig_data.get("record"))
    script = str(sig_data.get("script") or "repro.py")
    notes: list[str] = list(get_target(repo_key).draft_notes)

    reduced = repro.repro.is_file()
    source_path = repro.repro if reduced else repro.original
    if not source_path.is_file():
        raise ReprobotError(f"{repro.path}: neither repro.py nor original.py is there", ExitCode.BAD_INPUT)
    # Blank lines at the top go as the fence would drop them, so the warning's line numbers
    # are the shown script's.
    source = re.sub(r"\A(?:[ \t]*\n)+", "", source_path.read_text(encoding="utf-8", errors="replace"))
    reduction = _read_optional_json(repro, repro.reduction_json)
    route = _read_optional_json(repro, repro.route_json)
    related = _read_optional_json(repro, repro.related_json)
    env = _read_optional_json(repro, repro.env_json)

    if route is None:
        notes.append("route.json is missing: no who-can-help handles or cross-links (run `reprobot route`)")
    elif route.get("target") and str(route["target"]).lower() != form.repo.lower():
        notes.append(f"routing chose {route['target']} as the place to file first, not {form.repo}")
    if related is None:
        notes.append("related.json is missing: related upstream issues were not searched (run `reprobot dedup`)")
    lock = _lockfile(repro)
    if lock is not None and lock.text is None and lock.pins > LOCK_SHORT_PINS:
        notes.append(f"attach requirements.lock from {repro.path.name}/ when filing ({lock.pins} packages: "
                     "too long for the body, which names it)")
    if lock is None and repro.requirements_lock.is_file():
        notes.append("requirements.lock pins no packages (the repro uses the standard library only): not shown")
    elif lock is None:
        notes.append("requirements.lock is missing: the environment is not pinned (run `reprobot env`)")

    entry = entry_point(record, script, route)
    # verified alone and offline: the steps are exactly that run's (reducer/reduction/cold_verdict.py self_contained)
    alone = reduced and (reduction or {}).get("verified") == "alone, offline"
    run_as = "repro.py" if alone else script
    kind = classify_repro(repro)
    if kind is not None and kind.kind != "bug":
        from bot.store import rerun_notes
        notes.append(kind_line(kind, rerun_notes(repro).works_with))
    cross = []
    if route:
        reasons = {str(r.get("repo", "")).lower(): list(r.get("reasons") or []) for r in route.get("ranked") or []}
        cross = [{"repo": c, "reasons": reasons.get(str(c).lower(), [])}
                 for c in route.get("cross_links") or []
                 if REPO_NAME.match(str(c)) and str(c).lower() != form.repo.lower()]
        if REPO_NAME.match(str(route.get("target") or "")) and str(route["target"]).lower() != form.repo.lower():
            t = str(route["target"])
            cross.insert(0, {"repo": t, "reasons": reasons.get(t.lower(), [])})
    # The form asks to tag fewer than 3 people; only handles routing named for this repo's form.
    # They are the draft's only intended mentions: handles of a well-formed shape, nothing else.
    who = [h for h in (route or {}).get("who_can_help") or [] if HANDLE.match(str(h))][:2]
    # Routing names maintainers of its target: they are no help on another repository's form.
    target = str((route or {}).get("target") or "").lower()
    if not any(f.id == "who-can-help" for f in form.fields) or target != form.repo.lower():
        who = []

    context = {
        "form": form,
        "notes": notes,
        "repro_name": repro.path.name,
        "system_info": _system_info(env, repo_key, notes),
        "missing_mark": MISSING_MARK,
        "who_can_help": who,
        "evidence": _evidence(repro, sig_data, reduction, reduced, sig, notes, _command(sig_data, run_as)),
        "script": source,
        "hazards": hazard_context(find_hazards(source), bool(reduced and (reduction or {}).get("status") == "done")),
        "reduced": reduced,
        "script_name": run_as,
        "command": _command(sig_data, run_as),
        "alone": alone,
        "needs": _needs_lines(reduction if reduced else None),
        "lock": lock,
        "traceback": trim_traceback(record, script),
        "related": _related_items(related),
        "cross_links": cross,
        "marker": marker(sig.id),
        "confirm_mark": CONFIRM_MARK,
        "expected": _expected(entry, record, (route or {}).get("model_family"), kind.kind if kind else None),
        "reruns": _reruns(repro, notes),
    }
    body_raw = with_warning(_Renderer().render(repo_key, context), context["hazards"])
    title_raw = make_title(entry, record, (route or {}).get("model_family"))
    body = scrub(body_raw, names=names)
    title = scrub(title_raw, names=names)
    return Draft(repo_key=repo_key, repo=form.repo, title=title.text, body=body.text,
                 fields=field_values(form, body.text), signature_id=sig.id, notes=notes,
                 scrubbed=title.findings + body.findings, template=form.template,
                 kind=kind.to_dict() if kind else None)


_SCRIPT_FENCE = re.compile(r"^(`{3,})python[ \t]*\n(.*?)^\1[ \t]*$", re.DOTALL | re.MULTILINE)
_NOTES = re.compile(r"\A<!-- reprobot:notes\b.*?-->[ \t]*\n", re.DOTALL)


def body_script(body: str) -> str | None:
    """The repro's code as a body shows it: its first ``python`` fence."""
    m = _SCRIPT_FENCE.search(body)
    return m.group(2) if m else None


def with_warning(body: str, hazards: dict[str, Any] | None) -> str:
    """``body`` opening with the hazard headline, right after reprobot's own notes comment (which
    is not filed); the full warning instead when the body has none (a template without the
    reproduction partial, or a person's edit removed it). Unchanged without findings."""
    if not hazards:
        return body
    macros = _Renderer().env.get_template("partials/hazards.md.j2").module
    if said_before_code(body) and said_before_code(body, HEADLINE):
        return body
    top = str(macros.warning(hazards) if not said_before_code(body)  # type: ignore[attr-defined]
              else macros.headline(hazards)).strip() + "\n\n"  # type: ignore[attr-defined]
    notes = _NOTES.match(body)
    cut = notes.end() if notes else 0
    return body[:cut] + top + body[cut:].lstrip("\n")
# What the scrubber writes where a private value was (bot/scrub.py, bot/scrub_places.py); in the
# repro's own code each one changes what a maintainer would run.
_PLACEHOLDERS = re.compile(r"<redacted:[^<>\n]*>|<(?:ip|email|host|path|user-or-host|bucket|entity|project|workspace"
                           r"|tenant|service-account|private-org)>|<env>/")


def script_placeholders(body: str) -> list[tuple[int, str]]:
    """(line of the script, placeholder) where scrubbing replaced a value inside the repro's own
    code: that script may no longer fail the same way for a maintainer, so filing waits until a
    person puts a stand-in value there."""
    script = body_script(body)
    if script is None:
        return []
    return [(n, hit.group()) for n, line in enumerate(script.splitlines(), 1)
            for hit in _PLACEHOLDERS.finditer(line)]


# What a draft is built from: when one of these changes after the draft was written (versions
# or contrast ran, the reduction went on, routing or dedup ran again), the draft is stale.
DRAFT_INPUTS = ("repro.py", "traceback.txt", "reduction.json", "route.json", "related.json", "versions.json",
                "contrast.json", "env.json", "requirements.lock", "signature.json")


def built_from(repro: ReproDir) -> dict[str, str]:
    """A digest of each input present now (contents, not times: a copy keeps its verdict)."""
    out = {}
    for name in DRAFT_INPUTS:
        path = repro.path / name
        if path.is_file():
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return out


def newer_inputs(repro: ReproDir, key: str) -> list[str]:
    """The inputs that changed or appeared since the stored draft was written; a draft written
    before drafts recorded their inputs counts every input present as newer."""
    meta = repro.read_json(repro.draft_json(key)) if repro.draft_json(key).is_file() else {}
    then = meta.get("built_from") if isinstance(meta, dict) else None
    then = then if isinstance(then, dict) else {}
    return [name for name, digest in built_from(repro).items() if then.get(name) != digest]


def write_draft(folder: str | Path, draft: Draft) -> tuple[Path, Path]:
    repro = ReproDir.open(folder)
    md, js = repro.draft_md(draft.repo_key), repro.draft_json(draft.repo_key)
    write_text_atomic(md, draft.body)
    write_json_atomic(js, {**draft.to_json(), "built_from": built_from(repro)})
    return md, js


def load_draft(folder: str | Path, repo_key: str) -> Draft:
    """A draft as stored (the person may have edited the .md): body from draft-<repo>.md,
    title and bookkeeping from draft-<repo>.json; fields re-read from the edited body."""
    repro = ReproDir.open(folder)
    md, js = repro.draft_md(repo_key), repro.draft_json(repo_key)
    if not md.is_file() or not js.is_file():
        raise ReprobotError(f"{repro.path}: no draft for {repo_key}; "
                            f"run `reprobot draft {repro.path} --repo {repo_key}`", ExitCode.FILE_MISSING)
    meta = repro.read_json(js)
    body = md.read_text(encoding="utf-8")
    form = get_form(repo_key)
    return Draft(repo_key=repo_key, repo=form.repo, title=str(meta.get("title", "")), body=body,
                 fields=field_values(form, body), signature_id=str(meta.get("signature_id", "")),
                 notes=list(meta.get("notes", [])),
                 scrubbed=[Finding.from_dict(f) for f in meta.get("scrubbed", [])], template=form.template,
                 kind=meta.get("kind") if isinstance(meta.get("kind"), dict) else None)


__all__ = ["Draft", "PrefillURL", "build_draft", "write_draft", "load_draft", "prefill_url", "marker", "carries_marker",
           "make_title", "entry_point", "trim_traceback", "fence"]


def _command(sig_data: dict, script: str) -> str:
    """How to run the repro: the folder's run recipe (bot/run_recipe.py) with the script under
    the name the draft shows it by."""
    return RunRecipe.from_signature(sig_data).command(script)
