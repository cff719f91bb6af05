"""`reprobot file [REPRO_DIR] --dry-run | --submit`: preview a draft exactly as it would be
filed, validated against the target form; or file it, when a person says so."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Confirm
from rich.rule import Rule

from bot.commands._options import add_api_url, add_db, add_no_search, add_python
from bot.issue.draft import (Draft, build_draft, edited_by_hand, load_draft, newer_inputs, script_placeholders,
                             write_draft)
from bot.issue.filing import already_filed, check_safe, submission_body, submit
from bot.issue.forms import REPO_KEYS, field_values, get_form
from bot.prepare import Prepared, duplicate_line, likely_duplicate, prepare, search_related
from bot.scrub import Finding, high_entropy, scrub, strip_controls, uncertain_strings
from bot.store import DEFAULT_ROOT, ReproDir, shown_path
from reducer.errors import ExitCode, ReprobotError

console = Console(highlight=False)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("file", help="preview (--dry-run) or file (--submit) the drafted issue",
                       description="Show the draft as it would be filed, validated against the target "
                                   "repository's form, with the pre-filled URL (--dry-run); or create the "
                                   "issue on GitHub (--submit, needs GITHUB_TOKEN and your confirmation).")
    p.add_argument("repro_dir", type=Path, nargs="?", default=None,
                   help="a repro folder (default: the current folder when it is one, else the most recent "
                        "one under ./repros)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", action="store_true",
                      help="preview only; nothing is filed (with GITHUB_TOKEN, GitHub search is read for "
                           "related issues)")
    mode.add_argument("--submit", action="store_true", help="create the issue on GitHub")
    p.add_argument("--repo", choices=REPO_KEYS, metavar="KEY",
                   help="which repository's draft (default: routing's target, or the only draft)")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation before filing")
    p.add_argument("--not-a-duplicate", action="store_true",
                   help="file even when dedup's best match looks like the same failure (with --yes)")
    p.add_argument("--not-a-secret", action="store_true",
                   help="file even when the draft holds a random-looking string the scrubber could not "
                        "tell from a credential, such as a bare 40-hex id (with --yes)")
    p.add_argument("--anyway", action="store_true",
                   help="file even when reprobot reads the failure as a usage error or an environment problem "
                        "rather than a bug (needed with or without --yes)")
    add_python(p, "interpreter whose environment is captured if env.json is missing")
    add_db(p)
    add_no_search(p)
    add_api_url(p)
    p.set_defaults(func=run)


def latest_repro(root: Path = DEFAULT_ROOT) -> Path:
    folders = [p.parent for p in root.glob("*/signature.json")] if root.is_dir() else []
    if not folders:
        raise ReprobotError(f"no repro folder under {root}/; pass one, or run `reprobot reduce` first",
                            ExitCode.FILE_MISSING)
    return max(folders, key=lambda p: (p / "signature.json").stat().st_mtime)


def _here_or_latest() -> Path:
    """Inside a repro folder, that one; else the newest under ./repros."""
    here = Path.cwd()
    return here if (here / "signature.json").is_file() else latest_repro()


def pick_repo(repro: ReproDir, requested: str | None, prep: Prepared) -> str:
    if requested:
        return requested
    if prep.target:
        return get_form(prep.target).key
    drafted = [k for k in REPO_KEYS if repro.draft_md(k).is_file()]
    if len(drafted) == 1:
        return drafted[0]
    verdict = (prep.route or {}).get("verdict") or "no routing target"
    raise ReprobotError(f"nothing to file upstream: {verdict}"
                        + (f" (drafts exist for {', '.join(drafted)})" if drafted else "")
                        + "; pass --repo KEY to file there anyway", ExitCode.USAGE)


def prepared(repro: ReproDir, key: str) -> tuple[Draft, list[Finding], list[Finding]]:
    """The draft to show or file: the stored one (a person may have edited it) or a fresh one.
    Returns (draft with private details scrubbed again, scrubbed now, secrets in the stored text)."""
    stored = repro.draft_md(key).is_file() and repro.draft_json(key).is_file()
    newer = newer_inputs(repro, key) if stored else []
    if stored and (not newer or edited_by_hand(repro, key)):
        draft = load_draft(repro.path, key)
        if newer:
            _step(f"draft: {repro.draft_md(key).name} (kept: edited by hand; newer than it: {', '.join(newer)} — "
                  f"`reprobot draft --force` rebuilds it, then carry your edits over)")
        else:
            _step(f"draft: {repro.draft_md(key).name} (kept; `reprobot draft --force` writes it again)")
    else:
        draft = build_draft(repro.path, key)
        md, _ = write_draft(repro.path, draft)
        _step(f"draft: {md.name} " + (f"rebuilt (newer: {', '.join(newer)})" if newer else "written"))
    again = scrub(draft.body)
    title = scrub(draft.title)
    secrets = title.secrets + again.secrets
    fresh = replace(draft, body=again.text, title=title.text, fields=field_values(get_form(key), again.text))
    return fresh, title.findings + again.findings, secrets


def _show_findings(title: str, findings: list[Finding]) -> None:
    if not findings:
        return
    console.print(f"[bold]{title}[/]")
    for f in findings:
        mark = "[red]secret[/]" if f.secret else "private"
        console.print(f"  {mark} {escape(str(f))}")


def _step(text: str) -> None:
    console.print(f"[dim]{_safe(text)}[/]", soft_wrap=True)


def _safe(text: str) -> str:
    """Text for the terminal: no escape sequence or bidi override of a draft, an issue title from
    GitHub or a note can restyle the terminal or reorder what the person reads."""
    return escape(strip_controls(text))


def _uncertain(title: str, body: str) -> list[tuple[str, Finding]]:
    """(where, finding) for each bare random-looking string in what would be filed."""
    found = uncertain_strings(title + "\n" + body)
    return [("title" if f.line == 1 else f"body line {f.line - 1}", f) for f in found]


def _confirm_uncertain(uncertain: list[tuple[str, Finding]]) -> bool:
    for where, f in uncertain:
        console.print(f"[yellow]the {where} holds a random-looking string[/] ({_safe(f.preview)})")
    return Confirm.ask("[yellow]Is each of them an id (a commit, a hash), not a credential?[/] File it publicly?",
                       default=False)


def run(args: argparse.Namespace) -> int:
    repro = ReproDir.open(args.repro_dir if args.repro_dir is not None else _here_or_latest())
    if not args.submit:
        return _run(args, repro)
    # Two --submit on one folder: the second stops before it writes anything (a draft half
    # rewritten under the first one's feet reads as an invalid draft).
    from bot.issue.filing import FilingLock
    with FilingLock(repro):
        return _run(args, repro)


def _run(args: argparse.Namespace, repro: ReproDir) -> int:
    # --submit sends nothing, not even a search, before the draft has passed its safety checks.
    prep = prepare(repro, python=args.python, db=args.db, api_url=args.api_url,
                   search=args.dry_run and not args.no_search, notify=lambda line: _step(str(line)))
    key = pick_repo(repro, args.repo, prep)
    form = get_form(key)
    if args.submit:
        prior = already_filed(repro, form.repo)
        if prior is not None:
            console.print(f"already filed: {prior.url}")
            return 0
    draft, now, secrets = prepared(repro, key)
    check = draft.validate()

    from bot.rerun.report import notes_for
    from bot.upstream.kind import classify_repro, kind_line
    reruns = notes_for(repro)
    fixed = reruns.headline()
    kind = classify_repro(repro)
    not_a_bug = kind is not None and kind.kind != "bug"
    if args.dry_run:
        if not_a_bug:  # said first: a maintainer would close it as such
            console.print(f"[bold yellow]{_safe(kind_line(kind, reruns.works_with))}[/]", soft_wrap=True)
            console.print(f"[yellow]--submit refuses unless --anyway is given[/]")
        dup = likely_duplicate(prep.related, draft.signature_id)
        if dup:
            console.print(f"[bold yellow]likely duplicate:[/] {_safe(duplicate_line(dup))}", soft_wrap=True)
        if fixed:
            console.print(f"[bold yellow]{escape(fixed)}[/]")
        console.print(Rule(f"{form.repo}: issue preview"))
        console.print(Panel(_safe(draft.title), title="title", expand=False))
        console.print(Markdown(strip_controls(submission_body(draft))))
        console.print(Rule())
        _show_findings("Scrubbed when drafted:", draft.scrubbed)
        _show_findings("Scrubbed now (the draft was edited):", now)
        if secrets:
            console.print(f"[red]--submit would refuse: {len(secrets)} secret pattern(s) in the stored draft[/]")
        for line, placeholder in script_placeholders(draft.body):
            console.print(f"[red]needs you:[/] line {line} of the script in the draft holds {escape(placeholder)} where "
                          "a private value was removed; put a stand-in value there that still fails the same way "
                          f"(edit {escape(repro.draft_md(key).name)}); --submit refuses until then")
        for flag in high_entropy(submission_body(draft)):
            console.print(f"[yellow]check:[/] body line {flag.line} holds a random-looking string "
                          f"({escape(flag.preview)}): if it is a credential, remove it from "
                          f"{escape(repro.draft_md(key).name)}")
        for where, flag in _uncertain(draft.title, submission_body(draft)):
            console.print(f"[yellow]check:[/] the {where} holds a string that may be a credential or an id "
                          f"({_safe(flag.preview)}): --submit asks before filing it (with --yes, refuses without "
                          "--not-a-secret)")
        for note in draft.notes:
            if not_a_bug and note.startswith("This looks like "):
                continue  # said first, above
            console.print(f"[yellow]note:[/] {_safe(note)}")
        for fid in check.unconfirmed:
            console.print(f"[yellow]to confirm:[/] {escape(form.field(fid).label)} is reprobot's proposal; "
                          f"edit {escape(shown_path(repro.draft_md(key)))}")
        if check.ok:
            console.print(f"[green]valid[/] against the {escape(form.repo)} bug-report form")
        else:
            for p in check.problems:
                console.print(f"[red]invalid:[/] {_safe(str(p))}")
        url = draft.prefill_url()
        console.print(f"[bold]URL[/] ({escape(url.instruction)}):")
        console.print(strip_controls(url.url), soft_wrap=True, markup=False)
        console.print(f"files: {escape(shown_path(repro.path))}/ (repro.py, draft-{key}.md, draft-{key}.json"
                      + (", requirements.lock" if repro.requirements_lock.is_file() else "") + ")")
        return 0 if check.ok and not secrets else (ExitCode.UNSAFE if secrets else ExitCode.BAD_INPUT)

    # --submit
    if secrets:
        first = secrets[0]
        raise ReprobotError(f"refusing to file: {first.kind} {first.preview} at line {first.line} of "
                            f"draft-{key}.md; remove it, or re-run `reprobot draft`", ExitCode.UNSAFE)
    holes = script_placeholders(draft.body)
    if holes:
        raise ReprobotError(f"refusing to file: line {holes[0][0]} of the script in draft-{key}.md holds "
                            f"{holes[0][1]} where a private value was removed; put a stand-in value there that "
                            "still fails the same way", ExitCode.UNSAFE)
    if not check.ok:
        raise ReprobotError(f"draft-{key}.md does not fill the {form.repo} form: "
                            + "; ".join(map(str, check.problems)), ExitCode.BAD_INPUT)
    check_safe(draft.title, submission_body(draft))
    if not_a_bug and not args.anyway:
        raise ReprobotError(f"not filed: {strip_controls(kind_line(kind, reruns.works_with))} "
                            "Pass --anyway to file it as a bug report all the same", ExitCode.USAGE)
    uncertain = _uncertain(draft.title, submission_body(draft))
    if uncertain and args.yes and not args.not_a_secret:
        where, first = uncertain[0]
        raise ReprobotError(f"not filed: the {where} holds a string that may be a credential ({first.preview}); "
                            "remove it from the draft, or pass --not-a-secret if it is an id", ExitCode.UNSAFE)
    from bot.issue.github import github_client

    client = github_client(write=True)  # one-line NO_TOKEN error without GITHUB_TOKEN
    if not args.no_search:
        line = search_related(repro, prep, db=args.db, api_url=args.api_url)
        if line is not None:
            _step(str(line))
    dup = likely_duplicate(prep.related, draft.signature_id)
    if dup and args.yes and not args.not_a_duplicate:
        raise ReprobotError(f"not filed: {duplicate_line(dup)} (pass --not-a-duplicate to file a new issue)",
                            ExitCode.USAGE)
    if not args.yes:
        if not sys.stdin.isatty():
            raise ReprobotError("--submit files a public issue: confirm interactively, or pass --yes", ExitCode.USAGE)
        for fid in check.unconfirmed:
            console.print(f"[yellow]{escape(form.field(fid).label)} is reprobot's proposal:[/] "
                          + escape(str(draft.fields.get(fid, ""))[-300:]))
        if dup and not args.not_a_duplicate and not Confirm.ask(
                f"[yellow]{escape(duplicate_line(dup))}[/] File a new issue anyway?", default=False):
            console.print("not filed")
            return 0
        if uncertain and not args.not_a_secret and not _confirm_uncertain(uncertain):
            console.print("not filed")
            return 0
        if fixed and not Confirm.ask(f"[yellow]{escape(fixed)}[/] File anyway?", default=False):
            console.print("not filed")
            return 0
        if not Confirm.ask(f"File [bold]{escape(draft.title)}[/] on {escape(form.repo)}?", default=False):
            console.print("not filed")
            return 0
    result = submit(repro, draft, client)
    console.print(result.message)
    return 0
