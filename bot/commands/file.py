"""`reprobot file [REPRO_DIR] --dry-run | --submit`: preview a draft exactly as it would be
filed, validated against the target form; or file it, when a person says so."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.rule import Rule

from bot.commands._options import add_api_url, add_db, add_no_search, add_python, add_repo
from bot.issue.draft import Draft
from bot.issue.filing import (Preflight, Problem, confirm_filed, draft_for_filing, filed_entry, preflight, submit)
from bot.issue.forms import REPO_KEYS, get_form
from bot.output import ask, console
from bot.prepare import FolderSteps, duplicate_line, likely_duplicate, run_missing_steps, search_related
from bot.rerun.recheck import check_verified, rerun
from bot.scrub import Finding, high_entropy, strip_controls
from bot.store import ReproDir, latest_repro, rerun_notes, shown_path
from bot.verified import verification
from reducer.errors import ExitCode, ReprobotError


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
    add_repo(p, "which repository's draft (default: routing's target, or the only draft)")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation before filing")
    p.add_argument("--not-a-duplicate", action="store_true",
                   help="file even when dedup's best match looks like the same failure (with --yes)")
    p.add_argument("--not-a-secret", action="store_true",
                   help="file even when the draft holds a random-looking string the scrubber could not "
                        "tell from a credential, such as a bare 40-hex id (with --yes)")
    p.add_argument("--anyway", action="store_true",
                   help="file even when reprobot reads the failure as a usage error or an environment problem "
                        "rather than a bug, or when the repro holds code a maintainer should not run blind (a "
                        "shell command, network access, a write outside its folder, exec/eval of data, an "
                        "unpickled file, trust_remote_code=True; the issue opens with a warning naming those "
                        "lines; without --anyway --submit exits 12). Needed with or without --yes")
    p.add_argument("--unverified", action="store_true",
                   help="file a repro.py that is not the one `reduce` verified (edited since, or a folder from an "
                        "earlier reprobot, whose reduction.json has no repro_sha256); without it --submit refuses "
                        "such a folder (exit 9). It is still re-run before filing and must fail as recorded")
    add_python(p, "interpreter the repro failed in: --submit runs repro.py once more in it before filing (and "
                  "refuses, exit 5, when it no longer fails with the recorded signature); its environment is "
                  "captured if env.json is missing")
    add_db(p)
    add_no_search(p)
    add_api_url(p)
    p.set_defaults(func=run)


def _here_or_latest() -> Path:
    """Inside a repro folder, that one; else the newest under ./repros."""
    here = Path.cwd()
    return here if (here / "signature.json").is_file() else latest_repro()


def pick_repo(repro: ReproDir, requested: str | None, steps: FolderSteps) -> str:
    if requested:
        return requested
    if steps.target:
        return get_form(steps.target).key
    drafted = [k for k in REPO_KEYS if repro.draft_md(k).is_file()]
    if len(drafted) == 1:
        return drafted[0]
    verdict = (steps.route or {}).get("verdict") or "no routing target"
    raise ReprobotError(f"nothing to file upstream: {verdict}"
                        + (f" (drafts exist for {', '.join(drafted)})" if drafted else "")
                        + "; pass --repo KEY to file there anyway", ExitCode.NOTHING_TO_FILE)


def _show_findings(title: str, findings: list[Finding]) -> None:
    if not findings:
        return
    console.print(f"[bold]{title}[/]")
    for f in findings:
        mark = "[red]secret[/]" if f.secret else "private"
        console.print(f"  {mark} {escape(str(f))}")


def _step(text: str) -> None:
    console.print(f"[dim]{_safe(text)}[/]", soft_wrap=True)


_said: set[str] = set()


def _step_once(text: str) -> None:
    """A step line said once per command (filing re-reads filed.json and would repeat itself)."""
    if text not in _said:
        _said.add(text)
        _step(text)


def _safe(text: str) -> str:
    """Text for the terminal: no escape sequence or bidi override of a draft, an issue title from
    GitHub or a note can restyle the terminal or reorder what the person reads."""
    return escape(strip_controls(text))


def _confirm_uncertain(uncertain: list[Problem]) -> bool:
    for p in uncertain:  # "the body line 3 holds a string that may be a credential (ab12…)"
        console.print(f"[yellow]{_safe(p.refusal.removeprefix('not filed: ').split(';')[0])}[/]")
    return ask("[yellow]Is each of them an id (a commit, a hash), not a credential?[/] File it publicly?")


def run(args: argparse.Namespace) -> int:
    repro = ReproDir.open(args.repro_dir if args.repro_dir is not None else _here_or_latest())
    if not args.submit:
        return _run(args, repro)
    # Two --submit on one folder: the second stops before it writes anything (a draft half
    # rewritten under the first one's feet reads as an invalid draft).
    from bot.issue.filing import FilingLock
    with FilingLock(repro):
        return _run(args, repro)


# How --dry-run colours each preflight rule (red: --submit refuses; yellow: it asks first).
_STYLE = {"secret": "red", "placeholder": "red", "invalid": "red", "uncertain": "yellow"}


def _run(args: argparse.Namespace, repro: ReproDir) -> int:
    _said.clear()
    # --submit sends nothing, not even a search, before the draft has passed its safety checks;
    # and it runs nothing (environment pinning runs the repro) before repro.py is known to be the
    # one the reduction verified.
    if args.submit:
        check_verified(repro, args.unverified, notify=_step)
    steps = run_missing_steps(repro, python=args.python, db=args.db, api_url=args.api_url,
                              search=args.dry_run and not args.no_search, notify=lambda line: _step(str(line)))
    key = pick_repo(repro, args.repo, steps)
    form = get_form(key)
    if args.submit:
        entry, why = filed_entry(repro, form.repo)
        if entry is not None:
            # Believed only once GitHub shows that issue: GETs, nothing is sent.
            from bot.issue.github import github_client
            entry, why = confirm_filed(entry, github_client(write=True), repro.signature().id)
            if entry is not None:
                console.print(f"already filed: {escape(entry.url)}")
                return 0
        if why is not None:
            _step_once(f"filed.json ignored: {why}")
    draft, now, secrets = draft_for_filing(repro, key, notify=_step)
    checked = preflight(repro, draft, key, secrets)
    problems = checked.problems
    fixed = rerun_notes(repro).headline()
    if args.dry_run:
        unverified = verification(repro)
        if not unverified.ok and unverified.state != "missing":
            console.print("[yellow]check:[/] repro.py is not the one the reduction verified"
                          + (" (it changed after `reduce` wrote it)" if unverified.state == "changed" else
                             " (reduction.json records none)")
                          + ": --submit refuses it unless --unverified is given; `reprobot reduce --resume` verifies it")
        _preview(repro, key, draft, now, checked, steps, fixed)
        rules = {p.rule for p in problems}
        return ExitCode.UNSAFE if "secret" in rules else (ExitCode.BAD_INPUT if "invalid" in rules else 0)

    waived = {flag for flag, on in (("--anyway", args.anyway), ("--not-a-secret", args.not_a_secret)) if on}
    for problem in problems:
        if problem.blocks(waived, yes=args.yes):
            raise ReprobotError(problem.refusal, problem.exit_code)
    # The repro once more, as the folder records running it: it must still fail as recorded.
    rerun(repro, args.python, notify=_step)
    from bot.issue.github import github_client

    client = github_client(write=True)  # one-line NO_TOKEN error without GITHUB_TOKEN
    if not args.no_search:
        line = search_related(repro, steps, db=args.db, api_url=args.api_url)
        if line is not None:
            _step(str(line))
    dup = likely_duplicate(steps.related, draft.signature_id)
    if dup and args.yes and not args.not_a_duplicate:
        raise ReprobotError(f"not filed: {duplicate_line(dup)} (pass --not-a-duplicate to file a new issue)",
                            ExitCode.USAGE)
    if not args.yes:
        if not sys.stdin.isatty():
            raise ReprobotError("--submit files a public issue: confirm interactively, or pass --yes", ExitCode.USAGE)
        for fid in draft.validate().unconfirmed:
            console.print(f"[yellow]{escape(form.field(fid).label)} is reprobot's proposal:[/] "
                          + escape(str(draft.fields.get(fid, ""))[-300:]))
        uncertain = [p for p in problems if p.asks and "--not-a-secret" not in waived]
        if dup and not args.not_a_duplicate and not ask(
                f"[yellow]{escape(duplicate_line(dup))}[/] File a new issue anyway?"):
            console.print("not filed")
            return 0
        if uncertain and not _confirm_uncertain(uncertain):
            console.print("not filed")
            return 0
        if fixed and not ask(f"[yellow]{escape(fixed)}[/] File anyway?"):
            console.print("not filed")
            return 0
        if not ask(f"File [bold]{escape(draft.title)}[/] on {escape(form.repo)}?"):
            console.print("not filed")
            return 0
    result = submit(repro, draft, client, notify=_step_once)
    console.print(result.message)
    return 0


def _preview(repro: ReproDir, key: str, draft: Draft, now: list[Finding], checked: Preflight,
             steps: FolderSteps, fixed: str | None) -> None:
    """What --dry-run shows: what would stop --submit, the draft as it would be filed (the body
    and the form's verdict preflight checked), the URL."""
    form = get_form(key)
    problems = checked.problems
    for p in problems:
        if p.rule == "hazard":  # said first: what a maintainer must not run blind, line by line
            first, _, rest = p.preview.partition("\n")
            console.print(f"[bold red]{_safe(first)}[/]")
            console.print(f"[red]{_safe(rest)}[/]", soft_wrap=True)
    for p in problems:
        if p.rule == "not-a-bug":  # said first: a maintainer would close it as such
            first, _, rest = p.preview.partition("\n")
            console.print(f"[bold yellow]{_safe(first)}[/]")
            console.print(f"[yellow]{_safe(rest)}[/]")
    dup = likely_duplicate(steps.related, draft.signature_id)
    if dup:
        console.print(f"[bold yellow]likely duplicate:[/] {_safe(duplicate_line(dup))}")
    if fixed:
        console.print(f"[bold yellow]{escape(fixed)}[/]")
    console.print(Rule(f"{form.repo}: issue preview"))
    console.print(Panel(_safe(draft.title), title="title", expand=False))
    console.print(Markdown(strip_controls(checked.body)))
    console.print(Rule())
    _show_findings("Scrubbed when drafted:", draft.scrubbed)
    _show_findings("Scrubbed now (the draft was edited):", now)
    for p in problems:
        if p.rule in _STYLE:
            for line in p.preview.splitlines():
                head, sep, tail = line.partition(": ")
                console.print(f"[{_STYLE[p.rule]}]{_safe(head)}{sep}[/]{_safe(tail)}")
    for flag in high_entropy(checked.body):
        console.print(f"[yellow]check:[/] body line {flag.line} holds a random-looking string "
                      f"({escape(flag.preview)}): if it is a credential, remove it from "
                      f"{escape(repro.draft_md(key).name)}")
    not_a_bug = any(p.rule == "not-a-bug" for p in problems)
    for note in draft.notes:
        if not_a_bug and note.startswith("This looks like "):
            continue  # said first, above
        console.print(f"[yellow]note:[/] {_safe(note)}")
    check = checked.check
    for fid in check.unconfirmed:
        console.print(f"[yellow]to confirm:[/] {escape(form.field(fid).label)} is reprobot's proposal; "
                      f"edit {escape(shown_path(repro.draft_md(key)))}")
    if check.ok:
        console.print(f"[green]valid[/] against the {escape(form.repo)} bug-report form")
    url = draft.prefill_url()
    console.print(f"[bold]URL[/] ({escape(url.instruction)}):")
    console.print(strip_controls(url.url), markup=False)
    console.print(f"files: {escape(shown_path(repro.path))}/ (repro.py, draft-{key}.md, draft-{key}.json"
                  + (", requirements.lock" if repro.requirements_lock.is_file() else "") + ")")
