"""Bug, usage error or environment: what kind of failure this is, before a maintainer has to say.

A maintainer closes three kinds of report without a fix: a usage error (the library rejected the
call on purpose and said what to change), an environment problem (the install: a library that did
not load, a GPU the binary was not built for, a checkpoint or script written for another release),
and a real bug. The evidence, in the order it is read:

- what the releases say, first: a keyword the caller's call passes, or a method its own line asks
  for (``'Accelerator' object has no attribute 'save_model'``), read against every catalogued
  release (bot/data/signatures.json.gz): present only in releases later than the installed one is
  the environment (upgrade), only in earlier ones a usage error (code written for an older release);
- environment: an import that failed, or a message about the install (CUDA setup, no kernel
  image, a missing package, a version requirement), or a config saved by another release;
- usage: the raising frame is a deliberate check of the caller's input — a ``raise`` whose message
  says what to change ("please pass", "make sure", "you need to"), or a raise inside a validation
  function (``validate``, ``_validate_*``, ``check*``, ``__post_init__``) whose message names the
  rule ("must", "not supported", "got 3"), or Python rejecting the user's own call's keywords —
  and nothing says the library made that call on the user's behalf; ``contrast`` finding that
  dropping a keyword the user passed makes it pass confirms it and names the fix; or ``contrast``
  finding that the failing call passes with one of its own options set, one the call had left at its
  default (``load_state_dict(..., assign=True)``): the library has a setting for this case, and the
  answer is to use it (an option that only turns a check off, ``strict=False``, is not such an answer);
  or ``contrast``'s traced run seeing the raising library frame, on the line that raised, read a value
  a function of the repro had returned to the library (reducer/analysis/handback.py): a callback —
  an overridden ``evaluate``, a Dataset's ``__getitem__`` — broke the contract of what it returns;
  or a library's own ``raise ValueError("...")`` (the raising line is that statement) that
  ``contrast`` found the call avoids without a keyword the caller passed, though the message names
  neither (weaker: 0.7); or pickle refusing a function the script itself defined inside another
  function or as a lambda of ``__main__`` (pickle stores functions by importable name; a library's
  own local function refused is that library's bug); or the caller's line passing ``name=<literal>``
  that the raising library line uses, under that name, as another type (``device_map=''`` and
  ``device_map.keys()``);
- bug: everything else, and always when unsure: a real bug called a usage error is the costly
  mistake, so a deliberate-looking raise alone (a "not supported" inside library internals) is not
  enough.

What ``versions`` ran overrules the reading of the error in three cases (never a verdict read from
the releases' record of the caller's own call: a later release passing is what "upgrade" predicts):

- a usage verdict gives way to bug when the same repro passes on an *earlier* release than the
  installed one (a regression: the library's behaviour changed under an unchanged call);
- an environment verdict gives way to bug when the same repro passes on a *later* release of the
  package that raised it or that routing picked (route.json), with nothing else the failure
  touches changed: a fix shipped in that package, so the failure was its bug (a release that
  imported a name its dependency had removed, then stopped). The run counts only when the other
  releases it had — the other swapped packages, and the requirements its environment installed to
  meet the swapped release's (versions.json's ``also``) — leave alone every package the failure
  touches: one with frames in it, or named by it (``from 'pkg'``, ``module 'pkg'``, ``No module
  named 'pkg'``); otherwise the pass may be theirs. (A versions.json written before ``also`` was
  recorded lists nothing there; its runs count as changing nothing else: when unsure, bug.) The
  reason names the earliest such release, where the fix shipped;
- a usage verdict gives way to bug on the same run: the library changed under the same call, and a
  real bug called a usage error is the costly mistake (on the fresh held-out parts the two fixed bugs
  read as usage, a validator that was itself the bug and a column the trainer dropped, both passed on
  their fixing release), while a usage error whose check was relaxed later, read as a bug fixed
  there, costs a maintainer one look.

A run "passes" when the repro passed, or when the repro failed otherwise and the user's script,
which `versions` then runs in the same environment (versions.json's ``original``, on latest rows
and a bisect's boundaries), passed: the reduced repro can fail on the fixing release in a way the
user's script does not (bot/rerun/versions.py). Such a pass counts as the repro's would, under the
same rules, and the reason says it was the user's script. A run where the repro passed but the
user's script, run there too, failed the recorded way is no pass (a reduced repro can pass on a
release that did not fix what the user hit); one where the user's script failed another way (often
its own drift: a later release needs other imports) is unconfirmed, and counts only against a
verdict no run confirmed: a usage verdict whose contrast change passed, or whose traced run saw the
callback's value, on the installed release outweighs it.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from packaging.utils import canonicalize_name

from bot.store import VERDICT_PASS, PassingRun
from bot.targets import owner_packages, package_targets
from bot.upstream.raise_sites import raisers, release_key
from bot.upstream.signatures import Catalogue, catalogue, keyword_in_releases, parse_signature_error

BUG, USAGE, ENVIRONMENT = "bug", "usage", "environment"


@dataclass(frozen=True)
class Kind:
    kind: str                 # "bug" | "usage" | "environment"
    reason: str               # one sentence, plain text (may quote the failure: escape it in markdown)
    fix: str | None = None    # what makes it pass, when known ("without `num_return_sequences=3`")
    confidence: float = 0.5
    # read from the releases' own record of the caller's call (a method or keyword the installed
    # release lacks but another has): what `versions` runs on other releases is then what the record
    # predicts, and does not overrule it
    settled: bool = field(default=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason, "fix": self.fix, "confidence": self.confidence}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Kind | None":
        if not isinstance(d, dict) or d.get("kind") not in (BUG, USAGE, ENVIRONMENT):
            return None
        return cls(str(d["kind"]), str(d.get("reason") or ""), d.get("fix") if isinstance(d.get("fix"), str) else None,
                   float(d.get("confidence") or 0.5))


@dataclass(frozen=True)
class LibFrame:
    package: str | None       # None: the user's code
    rel: str | None           # "transformers/generation/utils.py"
    func: str
    line: str = ""

    @property
    def key(self) -> str:
        return f"{self.rel}:{self.func}"


@dataclass
class Evidence:
    """What the classifier reads: the error line, the frames (outermost first), the user's call
    line that led into the libraries, and what ``contrast`` found makes it pass."""
    exc_type: str
    message: str
    frames: list[LibFrame] = field(default_factory=list)
    user_line: str | None = None
    passes_with: list[str] = field(default_factory=list)   # contrast descriptions that pass
    whole: bool = False       # a traceback reprobot ran itself (not a paste cut anywhere)
    installed: dict[str, str] = field(default_factory=dict)   # package -> version the run had (env.json)
    passed: list[tuple[str, str]] = field(default_factory=list)   # (package, release) `versions` runs that passed
    passing: list[PassingRun] = field(default_factory=list)   # the same runs, with everything they changed
    # of `passed`, the runs where the repro failed otherwise and the user's script passed (canonical names)
    script_passed: set[tuple[str, str]] = field(default_factory=set)
    # `versions` runs where the repro passed and the user's script, run there too, failed another way
    unconfirmed: list[PassingRun] = field(default_factory=list)
    routed: tuple[str, ...] = ()      # the distributions of the repository routing picked (route.json)
    # contrast's traced run: what a function of the repro returned to the library frame that then
    # failed reading it ({"func", "returned", "path", "frame", "local", "line", "how"})
    handed_back: list[dict] = field(default_factory=list)
    # the functions and classes the repro itself defines (any depth): a local object of one of them
    # is the script's own
    script_names: frozenset[str] = frozenset()

    @property
    def exc(self) -> str:
        return (self.exc_type or "").rsplit(".", 1)[-1]

    @property
    def lib(self) -> list[LibFrame]:
        return [f for f in self.frames if f.package]

    @property
    def raiser(self) -> LibFrame | None:
        """The innermost frame, when it is library code (a user frame raising is the user's own)."""
        return self.frames[-1] if self.frames and self.frames[-1].package else None


# --- what the releases say ------------------------------------------------------------------------

_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


def _older(a: str, b: str) -> bool:
    return release_key(a) < release_key(b)


def _keyword_kind(ev: Evidence) -> Kind | None:
    """A keyword a stack callable rejects, read against every catalogued release's signature: in
    none of them (and no **kwargs) it is the caller's typo; in others only, a version mismatch."""
    sig = parse_signature_error(ev.message) if ev.exc == "TypeError" else None
    if sig is None or sig.shape == "missing" or not sig.callable or not sig.keywords:
        return None
    kw = sig.keywords[0]
    ans = keyword_in_releases(sig.callable, kw)
    by_library = ev.raiser is not None or bool(ev.user_line and not _user_calls(ev, ans.callable))
    if ans.verdict == "in_no_release" and not (ans.takes_kwargs or ans.unresolved_bases or by_library):
        near = catalogue().close_keywords(sig.callable, kw)
        return Kind(USAGE, f"no release of {ans.package} from {ans.callable_first} to {ans.newest} lets "
                           f"{ans.callable} take `{kw}`",
                    f"did you mean `{near[0]}`?" if near else f"drop `{kw}` (see {ans.callable}'s signature)", 0.85)
    if ans.verdict != "in_some_release":
        return None
    span = f"{ans.package} {ans.first}" + (f"–{ans.last}" if ans.last != ans.first else "")
    if by_library:
        callers = _caller_packages(ev)
        if not callers or ans.package in callers:
            return None          # a package's call into itself that no longer fits is its own bug
        return Kind(ENVIRONMENT, f"{sorted(callers)[0]} passes `{kw}` to {ans.callable}, which only {span} "
                                 "takes: the installed releases were not made to work together",
                    "install releases of the two packages that go together (their version requirements)", 0.7)
    have = ev.installed.get(ans.package)
    if have and _older(have, ans.first):
        return Kind(ENVIRONMENT, f"{ans.callable} takes `{kw}` from {ans.package} {ans.first} on; {have} is "
                                 "installed", f"upgrade {ans.package} to {ans.first} or later", 0.8, settled=True)
    if have and _older(ans.last, have):
        return Kind(USAGE, f"{ans.callable} took `{kw}` up to {ans.package} {ans.last}, not in the installed "
                           f"{have}: the code was written for an older release",
                    f"use {ans.callable}'s current arguments (its docs for {have})", 0.7, settled=True)
    if not have and ans.in_newest and ans.first != min(catalogue().versions.get(ans.package, [ans.first]),
                                                        key=release_key):
        return Kind(ENVIRONMENT, f"{ans.callable} takes `{kw}` from {ans.package} {ans.first} on: the installed "
                                 "release is probably older", f"upgrade {ans.package}", 0.6)
    return None


# an instance's or a class's missing attribute, the class named (an ``AttributeError`` of Python's own)
_OBJECT_ATTR = re.compile(r"^(?:type object )?'(\w+)'(?: object)? has no attribute '(\w+)'")


def _attribute_kind(ev: Evidence) -> Kind | None:
    """``'Accelerator' object has no attribute 'save_model'`` where the caller's own line asks for it
    and the releases' catalogue has ``Accelerator.save_model`` in some releases, not the installed
    one: the code was written for a later release (environment: upgrade) or an earlier one (usage:
    the method is gone). A library frame asking for it is two releases that do not go together, left
    to the rules below."""
    m = _OBJECT_ATTR.search(ev.message or "") if ev.exc == "AttributeError" else None
    if not m or ev.raiser is not None or not ev.user_line or not re.search(rf"\.{m.group(2)}\b", ev.user_line):
        return None
    cls, attr = m.group(1), m.group(2)
    found = catalogue().present_in(f"{cls}.{attr}")
    if not found:
        return None
    pkg, present = found
    versions = catalogue().versions[pkg]
    if not present or len(present) == len(versions):
        return None
    first, last = min(present, key=release_key), max(present, key=release_key)
    have = ev.installed.get(pkg)
    name = f"{cls}.{attr}"
    if have and _older(have, first):
        return Kind(ENVIRONMENT, f"{name} is in {pkg} from {first} on (among the releases catalogued); {have} is "
                                 "installed: the code was written for a later release",
                    f"upgrade {pkg} to {first} or later", 0.8, settled=True)
    if have and _older(last, have):
        return Kind(USAGE, f"{name} was in {pkg} up to {last}, not in the installed {have}: the code was written "
                           "for an older release", f"use what replaced {name} (the docs for {pkg} {have})", 0.7,
                    settled=True)
    if not have and last == max(versions, key=release_key):
        return Kind(ENVIRONMENT, f"{name} is in {pkg} from {first} on: the installed release is probably older",
                    f"upgrade {pkg}", 0.6, settled=True)
    return None


def _called(ev: Evidence) -> list[str]:
    """The dotted names the caller's own line calls (``trl.PPOTrainer``, ``model.generate``); a bare
    name at the end stands for a call (the labelled rows' ``entry_call``)."""
    return re.findall(r"([A-Za-z_][\w.]*)\s*(?:\(|$)", ev.user_line or "")


def _caller_packages(ev: Evidence) -> set[str]:
    """The package whose code made the rejected call: the innermost frame's, or (an error line
    alone) the package defining what the caller's own line calls."""
    if ev.raiser is not None:
        return {ev.raiser.package} if ev.raiser.package else set()
    return {pkg for n in _called(ev) for key in [Catalogue.key(n)] if key for pkg in catalogue().defined_in(key)}


def _import_kind(ev: Evidence) -> Kind | None:
    """``cannot import name X from pkg`` where no release of pkg ever had X but another package of
    the stack does: the import names the wrong package."""
    m = _CANNOT_IMPORT.search(ev.message or "") if ev.exc in _IMPORT_EXC else None
    if not m:
        return None
    name, pkg = m.group(1), m.group(2).split(".")[0]
    where = catalogue().defined_in(name)
    if pkg not in catalogue().versions or pkg in where or not where:
        return None
    return Kind(USAGE, f"no release of {pkg} has `{name}`; {where[0]} does", f"import {name} from {where[0]}", 0.75)


# --- environment ---------------------------------------------------------------------------------

_IMPORT_EXC = {"ImportError", "ModuleNotFoundError", "PackageNotFoundError"}
_ENV_MESSAGE = [
    (re.compile(r"no kernel image is available", re.I), "the installed binary was not built for this GPU"),
    (re.compile(r"CUDA Setup failed|CUDA SETUP|libcudart|CUDA binary not found|compiled without GPU support|"
                r"not compiled with CUDA|Torch not compiled with CUDA|CUDA driver|NVIDIA driver|"
                r"Found no NVIDIA|CUDA_HOME", re.I), "CUDA is not set up the way the installed build expects"),
    (re.compile(r"Could not find module .*\.dll|DLL load failed|cannot open shared object|undefined symbol|"
                r"GLIBC\w*_\d", re.I), "a compiled library could not be loaded"),
    (re.compile(r"Failed to import [\w.]+ because of the following error", re.I),
     "a module of the stack failed to import (the error above it says which dependency)"),
    (re.compile(r"requires the [\w .-]+ library but it was not found|was not found in your environment|"
                r"\bpip install\b|\brequires [\w.-]+ ?(?:>=|==|>)\s?\d|\bversion [\d.]+ (?:or higher|is required)|"
                r"(?:upgrade|update) (?:your )?(?:installation of )?[\w-]+|install [\w-]+ from source", re.I),
     "the message names a package or version to install"),
    (re.compile(r"\b(?:Tokenizer|Processor|Feature extractor|Image processor|Model) class \w+ does not exist or is "
                r"not currently imported", re.I),
     "the checkpoint names a class the installed transformers does not have (another release, or a missing "
     "optional dependency)"),
    (re.compile(r"name 'str2optimizer\w*' is not defined|'NoneType' object has no attribute 'c(?:adam|quantize|"
                r"dequantize|get_|igemm|optimizer)\w*'", re.I),
     "bitsandbytes' compiled library did not load (the CPU-only fallback was used)"),
]
_CONFIG_KWARG = re.compile(r"\b(\w*Config)\.__init__\(\) got an unexpected keyword argument '(\w+)'")
# An attribute missing on a *module* of the stack (not on an instance): the installed release has no
# such name, the same evidence as an ImportError of it.
_MODULE_ATTR = re.compile(r"^module '([\w.]+)' has no attribute '(\w+)'")


def _builds_itself(ev: Evidence, cls: str) -> bool:
    """The caller's own line constructs ``cls`` and nothing loaded it from a saved file: a keyword the
    class rejects is then the caller's, not a config written by another release."""
    if not ev.user_line or not re.search(rf"\b{re.escape(cls)}\b", ev.user_line):
        return False
    return not any(f.func == "from_pretrained" for f in ev.lib) and "from_pretrained" not in ev.user_line


def _environment(ev: Evidence) -> Kind | None:
    if ev.exc in _IMPORT_EXC:
        return Kind(ENVIRONMENT, f"{ev.exc}: a package or a name in it is not importable in this environment "
                                 "(not installed, or another release than the code expects)",
                    "check the installed versions (pip list) and install the release the code was written for",
                    0.85)
    for pattern, why in _ENV_MESSAGE:
        if pattern.search(ev.message or ""):
            return Kind(ENVIRONMENT, why, "check the versions, the CUDA setup and reinstall the package the "
                                          "message names", 0.8)
    m = _MODULE_ATTR.search(ev.message or "")
    if m and ev.exc == "AttributeError" and m.group(1).split(".")[0] in owner_packages():
        return Kind(ENVIRONMENT, f"the installed {m.group(1)} has no `{m.group(2)}`: another release than the code "
                                 "expects, or an old or broken install of it",
                    f"check the installed {m.group(1).split('.')[0]} version and reinstall it", 0.7)
    m = _CONFIG_KWARG.search(ev.message or "")
    if m and ev.exc == "TypeError" and not _builds_itself(ev, m.group(1)):
        return Kind(ENVIRONMENT, f"{m.group(1)} does not know `{m.group(2)}`: a saved config written by another "
                                 "release than the installed one",
                    "load it with the release that saved it, or upgrade the installed one", 0.6)
    if ev.exc == "KeyError" and any((f.rel or "").endswith("models/auto/configuration_auto.py") for f in ev.lib):
        return Kind(ENVIRONMENT, "the installed transformers does not know this model type",
                    "upgrade transformers", 0.6)
    return None


# --- usage ---------------------------------------------------------------------------------------

# A message that tells the caller what to change.
_REMEDY = re.compile(r"\bplease (?:select|pass|set|use|rerun|re-run|specify|provide|make|check|add|remove|call|"
                     r"choose|change|pick|define|ensure)\b|\bmake sure\b|\byou (?:need|have|should|must|can) (?:to )?"
                     r"\w+|\bpass(?:ing)? `|\bset `|\binstead\b|\bdid you mean\b|\bconsider (?:using|passing|setting)\b"
                     r"|\(note: typos\b", re.I)
# A message that states the rule the input broke (read only together with a validation function).
_RULE = re.compile(r"\bmust\b|\bshould\b|\bnot supported\b|\bdo(?:es)? not support\b|\bonly\b.*\bsupport|"
                   r"\(got [^)]*\)|\bgot\b|\bexpected\b|\bplease\b|\byou need\b|\brequires?\b|\binvalid\b|"
                   r"\bnot (?:allowed|valid|used)\b|\bhas to be\b|\bcan only\b", re.I)
# A constraint the caller's input broke, stated so plainly that the raise needs no validator name
# around it to read as a deliberate check (a divisibility rule, a list of allowed values, two options
# that exclude each other).
_CONSTRAINT = re.compile(r"\bmust be (?:evenly )?divisible by\b|\b(?:should|must) be one of\b|\bvalid values\b|"
                         r"\b(?:is|are) not compatible with\b|\bincompatible with\b|"
                         r"\b(?:should|must) be a (?:strictly )?positive\b|\byou passed\b", re.I)
# An OSError of a loader that names the caller's path or repo id as lacking the files it needs.
_MISSING_FILES = re.compile(r"does not appear to have a file named|is not a valid model identifier|"
                            r"is not a local folder", re.I)
_ATTRIBUTE = re.compile(r"has no attribute '?(\w+)'?")
# The failing call sits in the library's own example script: an example that no longer runs is the
# library's to fix, whatever the raise says.
_LIBRARY_EXAMPLE = re.compile(r"(?:^|[\s/])examples?/[\w./-]+\.py\b")
_VALIDATOR = re.compile(r"^(?:_*validate\w*|_*check\w*|_*verify\w*|__post_init__|_*sanity\w*)$")
_PREPARE = re.compile(r"^_*prepare\w*$")
_DELIBERATE = {"ValueError", "TypeError", "NotImplementedError"}
# Raised on purpose too, but for many reasons (a file missing on disk as much as a wrong repo id):
# only a message that says what to change makes one of these a usage error.
_DELIBERATE_WITH_REMEDY = {"OSError", "EnvironmentError", "FileNotFoundError", "RuntimeError"}
_SIGNATURE = re.compile(r"(?P<func>[\w.]+)\(\) (?:got an unexpected keyword argument '(?P<kw>\w+)'|"
                        r"got multiple values for argument '(?P<kw2>\w+)'|missing \d+ required (?:positional |keyword-only )?"
                        r"arguments?: (?P<miss>.+)|takes \d+ positional arguments? but \d+ (?:were|was) given)")
_KEYWORD = re.compile(r"^without `(?P<kw>\w+)=(?P<value>.*)` \(the default\)$")
# contrast's change that sets an option of the failing call the call did not set (bot/rerun/options.py)
_OPTION = re.compile(r"^with `(?P<kw>\w+)=(?P<value>True|False)` \(an option of (?P<func>[\w.]+)\(\) the call did "
                     r"not set\)$")
# an option that only switches a check off answers nothing: the failure is silenced, not avoided
_CHECK_OFF = re.compile(r"^(?:strict|check\w*|validate\w*|verify\w*|raise\w*|safe\w*)$")
_QUOTED = re.compile(r"`([^`]{1,80})`|'([A-Za-z_][\w.]{1,60})'|\"([A-Za-z_][\w.]{1,60})\"")


def _identifiers(text: str) -> set[str]:
    out = set()
    for m in _QUOTED.finditer(text or ""):
        for w in re.findall(r"[A-Za-z_]\w{2,}", next(g for g in m.groups() if g)):
            out.add(w)
    return out


def _first_sentence(text: str, pattern: re.Pattern[str]) -> str | None:
    for sentence in re.split(r"(?<=[.!?])\s+|\n", text or ""):
        if pattern.search(sentence):
            return sentence.strip()[:200]
    return None


def _on_behalf(ev: Evidence) -> str | None:
    """The library made the rejected call, not the script: the raising frame is a public method
    (``to``, ``cuda``) that another package of the stack called between the user's call and it."""
    raiser = ev.raiser
    if raiser is None or raiser.func.startswith("_") or _VALIDATOR.match(raiser.func) or _PREPARE.match(raiser.func):
        return None
    if ev.user_line and re.search(rf"\b{re.escape(raiser.func)}\s*\(", ev.user_line):
        return None
    lib = ev.lib
    between = [f for f in lib[:-1] if f.package != raiser.package]
    if between:
        b = between[-1]
        return f"{b.package}'s {b.func} called {raiser.package}'s {raiser.func}, which raised: the library made the call"
    return None


def _names(message: str, keyword: str) -> bool:
    """The message names the keyword, as prose spells it too (``inplace`` in "an in-place operation",
    ``use_cache`` in "use cache")."""
    if keyword in _identifiers(message) or keyword in message:
        return True
    words = [w.replace("-", "").replace("_", "").lower() for w in re.findall(r"[A-Za-z][\w\-]*", message)]
    spelled = set(words) | {a + b for a, b in zip(words, words[1:])}
    return keyword.replace("_", "").lower() in spelled


def _contrast_fix(ev: Evidence) -> tuple[str, str] | None:
    """(keyword, description) of a contrast change that drops a keyword the user passed and passes;
    of several, one whose value is written out before one whose value a call builds: dropping
    ``args=TrainingArguments(...)`` drops every setting in it, ``evaluation_strategy="epoch"`` names one."""
    found = [(m.group("kw"), desc.strip(), "(" in m.group("value"))
             for desc in ev.passes_with for m in [_KEYWORD.match(desc.strip())] if m]
    found.sort(key=lambda f: f[2])     # stable: contrast's order otherwise
    return (found[0][0], found[0][1]) if found else None


def _option_pass(ev: Evidence) -> Kind | None:
    """contrast ran the failing call with one of its own options set the other way, and it passed."""
    for desc in ev.passes_with:
        m = _OPTION.match(desc.strip())
        if m and not (m.group("value") == "False" and _CHECK_OFF.match(m.group("kw"))):
            option = f"`{m.group('kw')}={m.group('value')}`"
            return Kind(USAGE, f"the failing call passes with {option}, an option of {m.group('func')}() that the "
                               "call left at its default: the library has a setting for this case", desc.strip(), 0.7)
    return None


_HANDBACK = "the library calls the script's own "


def _handback(ev: Evidence) -> Kind | None:
    """contrast's traced run saw the raising library frame read, on the line that raised, a value
    a function of the repro had returned to the library: a callback (an overridden method, a
    Dataset's ``__getitem__``, a ``formatting_func``) broke the contract of what it must return."""
    for found in ev.handed_back:
        func, returned = str(found.get("func") or ""), str(found.get("returned") or "")
        where = f"{found.get('path')}:{found.get('frame')}"
        if not func or not found.get("local"):
            continue
        what = "returned" if found.get("how") == "returned" else "is built from what"
        short = func.rsplit(".", 1)[-1]
        return Kind(USAGE, f"{_HANDBACK}{func}() and failed on what it returned ({returned}): "
                           f"`{found['local']}` in {where}, which {what} {short}() returned, is read by the line "
                           "that raised",
                    f"make {func}() return what {found.get('frame')}() expects", 0.7)
    return None


# Python's pickle refusing a function it cannot find by name: one defined inside another function
# (``outer.<locals>.<lambda>``), or a lambda of ``__main__``. Where that function is the script's own
# (a lambda hook, a nested collate_fn handed to worker processes), the answer is always to define it
# at module level; where it is a library's (``Flask.__init__.<locals>.<lambda>``), it is that
# library's bug, so only the script's own counts.
_LOCAL_OBJECT = re.compile(r"Can't (?:pickle|get) local object '?(?:<\w+ )?([A-Za-z_]\w*)[\w.<>]*?\.<locals>")
_MAIN_LOOKUP = re.compile(r"Can't pickle <function ([\w<>]+) at [^>]*>: (?:attribute lookup [\w<>.]+ on __main__ "
                          r"failed|it's not the same object as __main__\.)")


def _script_pickle(ev: Evidence) -> Kind | None:
    """Pickle (torch.save, a DataLoader's worker processes, a deep copy) refused a function the
    script defined inside another function or as a lambda of its own module."""
    message = ev.message or ""
    local = _LOCAL_OBJECT.search(message)
    main = _MAIN_LOOKUP.search(message)
    if local and local.group(1) in ev.script_names:
        what = f"a function defined inside the script's own {local.group(1)}()"
    elif main:
        what = f"the script's own {main.group(1)}"
    else:
        return None
    return Kind(USAGE, f"pickle cannot store {what}: Python pickles a function by its importable name, which a "
                       "lambda or a nested function does not have",
                "define it at module level with `def` (not a lambda or a function inside another)", 0.8)


def _user_calls(ev: Evidence, func: str) -> bool:
    """The caller's own line calls the function the signature error names (``model.generate`` for
    ``PeftModelForSeq2SeqLM.generate()``): the arguments rejected are the caller's."""
    name = func.rsplit(".", 1)[-1]
    return bool(ev.user_line and name and not name.startswith("_") and re.search(rf"\b{re.escape(name)}\b", ev.user_line))


def _own_attribute(ev: Evidence) -> Kind | None:
    """The caller's own line asks for an attribute the object does not have, and the library frames
    only pass the lookup along (``__getattr__``)."""
    m = _ATTRIBUTE.search(ev.message or "")
    if ev.exc != "AttributeError" or not m or not ev.user_line:
        return None
    attr = m.group(1)
    if not re.search(rf"\.{re.escape(attr)}\b", ev.user_line) or any(f.func != "__getattr__" for f in ev.lib):
        return None
    return Kind(USAGE, f"the caller's own code asks for `.{attr}`, which this object does not have",
                f"check which class provides `{attr}` (its docs) and call it on that", 0.6)


# Python refusing an operation on a value of the wrong type: ``'str' object has no attribute 'keys'``,
# ``'int' object is not iterable``.
_WRONG_TYPE = re.compile(r"^'(\w+)' object (?:has no attribute '(\w+)'|is not (?:iterable|subscriptable|callable))")
# the type of a literal as the caller's line writes it, by its first characters
_LITERAL_TYPES = [(re.compile(r"[rbfu]{0,2}['\"]", re.I), {"str", "bytes"}), (re.compile(r"None\b"), {"NoneType"}),
                  (re.compile(r"(?:True|False)\b"), {"bool"}), (re.compile(r"-?\d"), {"int", "float"}),
                  (re.compile(r"\["), {"list"}), (re.compile(r"\{"), {"dict", "set"})]


def _wrong_type_argument(ev: Evidence) -> Kind | None:
    """The caller's own line passes ``name=<literal>``, and the library line that raised uses that
    same ``name`` as another type than the literal's (``device_map=''`` and ``device_map.keys()``):
    the argument's value is not of a type the function takes."""
    m = _WRONG_TYPE.match(ev.message or "")
    raiser = ev.raiser
    if ev.exc not in ("AttributeError", "TypeError") or not m or raiser is None or not ev.user_line:
        return None
    for kw in re.finditer(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*", ev.user_line):
        name, rest = kw.group(1), ev.user_line[kw.end():]
        literal = next((types for pattern, types in _LITERAL_TYPES if pattern.match(rest)), set())
        # the raising line reads the name (``name.keys()``, ``name[0]``, ``name(...)``, ``in name``)
        reads = rf"(?<![\w.]){re.escape(name)}\s*[.\[(]|\bin\s+{re.escape(name)}\b"
        if m.group(1) in literal and re.search(reads, raiser.line):
            return Kind(USAGE, f"the call passes `{name}` as a {m.group(1)}, and {raiser.key} uses `{name}` as "
                               f"another type ({ev.message.strip()[:80]})",
                        f"pass `{name}` as the type {raiser.func}() takes (its docs)", 0.6)
    return None


# torch's own checks of the caller's graph, data or DDP setup. They are raised from C++ (no Python
# raise for the catalogue to find, often no frames at all) and their wording is stable across
# releases; each names what the caller's training step got wrong, not an internal failure.
_TORCH_CHECKS = [
    (re.compile(r"does not require grad and does not have a grad_fn", re.I),
     "the loss does not depend on anything that requires grad (a frozen model, a no_grad block, or gradient "
     "checkpointing on a frozen base)",
     "make sure some parameters require grad; with gradient checkpointing on a frozen base, call "
     "model.enable_input_require_grads()"),
    (re.compile(r"modified by an inplace operation", re.I),
     "the caller's graph changes in place a tensor that backward still needs",
     "replace the in-place operation (`x += ...`, `x[...] = ...`, `relu_`) with an out-of-place one"),
    (re.compile(r"backward through the graph a second time", re.I),
     "backward ran twice through one graph", "call backward once per forward, or pass retain_graph=True"),
    (re.compile(r"Expected to mark a variable ready only once|Expected to have finished reduction in the prior "
                r"iteration", re.I),
     "DDP saw parameters used twice or not at all in one step (gradient checkpointing or unused parameters "
     "under DistributedDataParallel)",
     "set find_unused_parameters or static_graph as the message says, or use gradient checkpointing with "
     "use_reentrant=False"),
    (re.compile(r"Attempting to unscale FP16 gradients", re.I),
     "the trainable parameters are float16 while fp16 mixed precision expects float32 master weights",
     "keep the trainable parameters (the adapter) in float32"),
    (re.compile(r"received an invalid combination of arguments - got \(|expected (?:Tensor|Variable) as element \d+ in argument "
                r"\d+, but got", re.I),
     "torch's argument parser rejected the types of the call's arguments",
     "pass the arguments in one of the forms the message lists"),
    (re.compile(r"\bTarget -?\d+ is out of bounds", re.I),
     "a label is outside the range of classes the loss was given (the caller's labels or num_labels)",
     "check the labels against the model's number of classes"),
    (re.compile(r"^index out of range in self$|out of table with \d+ rows", re.I),
     "an embedding lookup got an id beyond its table: token ids beyond the vocabulary, or a sequence longer "
     "than the model's positions",
     "truncate the inputs to the model's maximum length, or resize the embeddings after adding tokens"),
    (re.compile(r"Expected \d+-dimensional input for \d+-dimensional weight", re.I),
     "the input's number of dimensions does not fit the layer", "check the shape of the input the caller feeds"),
    (re.compile(r"Expected input batch_size \(\d+\) to match target batch_size \(\d+\)", re.I),
     "the labels' batch does not match the model's output (the caller's data or collator)",
     "check the labels the data collator builds against the model's task"),
    # CUDA kernels' own index checks fire asynchronously, so the line that reports them is arbitrary;
    # what trips them is almost always an index in the caller's data.
    (re.compile(r"device-side assert triggered", re.I),
     "a CUDA kernel's index check fired: most often a label beyond the number of classes or a token id beyond "
     "the vocabulary in the caller's data",
     "check the labels and token ids against num_labels and the vocabulary; rerun with CUDA_LAUNCH_BLOCKING=1 "
     "(or on CPU) to see the failing operation"),
    (re.compile(r"not implemented for '(?:Half|BFloat16)'", re.I),
     "torch has no kernel for this half-precision operation on this device (float16 or bfloat16 on the CPU)",
     "load the model in float32 on the CPU, or run it on the GPU"),
    (re.compile(r"Expected more than 1 value per channel when training", re.I),
     "a batch-norm layer in training mode got one value per channel (a batch of one)",
     "use a batch larger than one in training, or call model.eval() for single samples"),
    (re.compile(r"view size is not compatible with input tensor's size and stride", re.I),
     "`.view` on a tensor whose memory is not contiguous (after a transpose, permute or slice)",
     "use .reshape(...) or call .contiguous() before .view(...)"),
    (re.compile(r"""(?:unexpected|missing) key\(?s?\)? (?:in state_dict: )?"?'?module\.""", re.I),
     "the state dict's keys carry DataParallel's `module.` prefix (saved from a wrapped model, loaded into a "
     "bare one, or the other way round)",
     "strip the `module.` prefix (or save model.module.state_dict())"),
]


_NO_LOSS = ("the model returned no loss: it was given no labels, or its class has no head that computes one",
            "pass labels (or a collator that builds them), or use the model's ...For<Task> class")
# A library's own wording for "the caller gave the wrong class or arguments", stable across releases.
_WRONG_INPUT = [
    (re.compile(r"Unrecognized configuration class .* for this kind of AutoModel", re.I),
     "this model type has no class for the Auto class the caller used",
     "use an Auto class this model type supports (the message lists them), or the model's own class"),
    (re.compile(r"Some specified arguments are not used by the HfArgumentParser", re.I),
     "HfArgumentParser was given arguments none of its dataclasses declares",
     "remove the arguments it lists, or add them to a dataclass given to the parser"),
    (re.compile(r"The model did not return a loss from the inputs", re.I), *_NO_LOSS),
]


# The names of a batch's and a model output's standard fields: a KeyError for one of them says the
# caller's dataset, collator or model class does not provide it, not that the library lost it.
_FIELDS = {"input_ids", "attention_mask", "token_type_ids", "labels", "label", "pixel_values", "input_features",
           "decoder_input_ids", "inputs_embeds", "text", "prompt", "chosen", "rejected", "completion",
           "messages", "loss"}
_KEY = re.compile(r"""^['"]?(\w+)['"]?$""")
_DATA_CODE = re.compile(r"collat|trainer|dataset|data_|/data/|tokeniz|arrow_dataset", re.I)
_FORWARD_KW = re.compile(r"(?:^|[\s.])(?:(?P<cls>\w+)\.)?forward\(\) got an unexpected keyword argument '(?P<kw>\w+)'")
# the library's own training or generation loop drives the step (then a device mismatch is its job)
_LIBRARY_LOOP = re.compile(r"\.(?:train|generate|evaluate|predict)\b|Trainer\b")
_MISPLACED = re.compile(r"Expected all tensors to be on the same device|is on CPU, but expected it to be on GPU|"
                        r"expected scalar type \w+ but found \w+|Expected object of (?:scalar |device )?type \S+ but found type", re.I)


def _data_fit(ev: Evidence) -> Kind | None:
    """The caller's data or model class does not fit what it is fed to: a batch without a standard
    field, a base model given labels, an encoder-decoder field for a decoder-only model, or inputs
    the caller placed on another device or dtype than its own model's."""
    message = (ev.message or "").strip()
    for pattern, why, fix in _WRONG_INPUT:
        if pattern.search(message):
            return Kind(USAGE, why, fix, 0.6)
    key = _KEY.match(message) if ev.exc == "KeyError" else None
    raiser = ev.raiser
    # where the caller's data is read (a collator, a trainer's step, a dataset map), or an error line
    # alone; a model's own generation code missing a field it builds itself stays the library's
    reads_data = raiser is None or bool(_DATA_CODE.search(raiser.rel))
    if key and key.group(1) in _FIELDS and reads_data:
        name = key.group(1)
        if name == "loss":
            return Kind(USAGE, *_NO_LOSS, 0.6)
        return Kind(USAGE, f"the batch has no `{name}`: the dataset's columns or the collator do not give what the "
                           "model or trainer reads", f"check that the dataset or collator provides `{name}` "
                                                    "(Trainer drops columns the model's forward does not name: "
                                                    "remove_unused_columns)", 0.6)
    fwd = _FORWARD_KW.search(message) if ev.exc == "TypeError" else None
    if fwd and fwd.group("kw") == "labels" and (fwd.group("cls") or "Model").endswith("Model"):
        return Kind(USAGE, "the model's forward takes no labels: a base model has no head to compute a loss",
                    "use the model's ...For<Task> class (e.g. AutoModelForCausalLM), or drop the labels", 0.6)
    if fwd and fwd.group("kw") == "decoder_input_ids":
        return Kind(USAGE, "a decoder-only model was called as an encoder-decoder one (decoder_input_ids)",
                    "use the causal-LM task type (PEFT task_type=CAUSAL_LM) and a causal-LM collator", 0.6)
    if (_MISPLACED.search(message) and (raiser is None or raiser.package == "torch")
            and not (ev.user_line and _LIBRARY_LOOP.search(ev.user_line))):
        return Kind(USAGE, "the caller's inputs and model are on different devices or dtypes",
                    "move the inputs to the model's device and dtype (model.device, model.dtype) before the call", 0.55)
    return None


def _torch_check(ev: Evidence) -> Kind | None:
    raiser = ev.raiser
    if raiser is not None and raiser.package != "torch":
        return None
    for pattern, why, fix in _TORCH_CHECKS:
        if pattern.search(ev.message or ""):
            return Kind(USAGE, f"torch rejected the caller's training step: {why}", fix, 0.6)
    return None


def _constructs(ev: Evidence, site: str) -> bool:
    """The raising ``__init__`` is that of the class the caller's own line builds: its module is
    named after the class (``trl/trainer/ppo_trainer.py`` and ``PPOTrainer(...)``), so the check is
    of the constructor's arguments, as a ``validate`` helper's would be."""
    stem = site.rsplit(":", 1)[0].rsplit("/", 1)[-1].removesuffix(".py").replace("_", "").lower()
    built = [name.rsplit(".", 1)[-1] for name in _called(ev)]
    return bool(stem) and any(name[:1].isupper() and name.lower() == stem for name in built)


def _usage(ev: Evidence) -> Kind | None:
    message = ev.message or ""
    raiser = ev.raiser
    pickled = _script_pickle(ev)     # whoever called pickle, the function it refused is the script's
    if pickled:
        return pickled
    behalf = _on_behalf(ev)
    if behalf or (ev.user_line and _LIBRARY_EXAMPLE.search(ev.user_line)):
        return None
    own = (_own_attribute(ev) or _torch_check(ev) or _data_fit(ev) or _option_pass(ev) or _handback(ev)
           or _wrong_type_argument(ev))
    if own:
        return own
    sites = raisers(ev.exc_type, message) if raiser is None else {}
    deliberate_site = next((s for s in sites.values()
                            if s.exc in _DELIBERATE | _DELIBERATE_WITH_REMEDY and s.same_exc), None)
    func = raiser.func if raiser is not None else (deliberate_site.site.rsplit(":", 1)[-1] if deliberate_site else None)
    where = raiser.key if raiser is not None else (deliberate_site.site if deliberate_site else None)
    names_user = sorted(w for w in _identifiers(message) if ev.user_line and re.search(rf"\b{re.escape(w)}\b", ev.user_line))
    fixed = _contrast_fix(ev)
    library_raise = raiser is not None or deliberate_site is not None

    # Python rejected the call's own keywords: the innermost frame is the user's line (a paste
    # without frames: a constructor), never a library frame passing keywords on.
    # A frameless paste counts for a constructor only when the message names its class (Python 3.10+):
    # a bare `__init__()` names no callable whose releases could be read, and in the labelled set
    # it was as often a release mismatch or the library's own example as the caller's typo.
    sig = _SIGNATURE.search(message)
    if ev.exc == "TypeError" and sig and raiser is None and (ev.frames or sig.group("func").endswith(".__init__")
                                                              or _user_calls(ev, sig.group("func"))):
        kw = sig.group("kw") or sig.group("kw2")
        fix = fixed[1] if fixed else (f"drop or rename `{kw}`" if kw else "check the call's arguments against its signature")
        return Kind(USAGE, f"the call's own arguments do not match the signature of {sig.group('func')}()", fix,
                    0.85 if fixed else 0.7)
    constraint = _first_sentence(message, _CONSTRAINT)
    if ev.exc == "ValueError" and not library_raise and not ev.frames and constraint:
        # an error line alone (no frames, no catalogued raise): only a plainly stated constraint counts
        fix = fixed[1] if fixed else None
        return Kind(USAGE, f"a deliberate check rejected the input: {constraint}", fix, 0.85 if fixed else 0.6)
    if ev.exc not in _DELIBERATE | _DELIBERATE_WITH_REMEDY or not library_raise:
        return None
    remedy = _first_sentence(message, _REMEDY)
    if ev.exc in _DELIBERATE_WITH_REMEDY:
        if not remedy and fixed and _names(message, fixed[0]):
            # no remedy in words, but the message names the option the caller set, and contrast ran
            # the call without it: it passed (torch's "in-place operation" and `inplace=True`)
            return Kind(USAGE, f"{ev.exc} raised on purpose{' in ' + where if where else ''}, naming `{fixed[0]}`, "
                               "which the call set: without it the call passes", fixed[1], 0.8)
        if not remedy and ev.exc in {"OSError", "EnvironmentError"}:
            missing = _first_sentence(message, _MISSING_FILES)
            if missing:
                return Kind(USAGE, f"{ev.exc} raised on purpose{' in ' + where if where else ''}: the path or repo id "
                                   f"passed does not hold what is loaded ({missing})",
                            "check the path or repo id passed (and that it holds the files of this library)", 0.6)
        return Kind(USAGE, f"{ev.exc} raised on purpose{' in ' + where if where else ''}, and the message says "
                           "what to change", remedy, 0.65) if remedy else None

    validator = bool(func and _VALIDATOR.match(func)) or bool(func == "__init__" and where and _constructs(ev, where))
    rule = _first_sentence(message, _RULE)
    at = f" in {where}" if where else ""
    if validator and rule:
        reason = f"a deliberate check{at} rejected the input: {rule}"
        fix = remedy or (f"change {', '.join('`%s`' % n for n in names_user)}" if names_user else None)
        confidence = 0.75
    elif remedy:
        reason, fix, confidence = f"{ev.exc} raised on purpose{at}, and the message says what to change", remedy, 0.7
    elif constraint:
        reason, fix, confidence = f"a deliberate check{at} rejected the input: {constraint}", None, 0.65
    elif fixed and _names(message, fixed[0]):
        reason, fix, confidence = f"{ev.exc} raised on purpose{at}, naming `{fixed[0]}`", None, 0.7
    elif fixed and _raise_statement(ev):
        # the library's own `raise` refused the call, and contrast ran the call without a keyword the
        # caller passed: it passed. Weaker than a message that says what to change (a check that is
        # itself the bug reads the same), so it stays below the confirmed verdicts; a later release
        # that passes (versions) still turns it into a bug
        return Kind(USAGE, f"{ev.exc} raised on purpose{at} by the library's own check, and the call passes "
                           f"without `{fixed[0]}`", fixed[1], 0.7)
    else:
        return None
    if fixed:   # contrast ran it: dropping a keyword the user passed makes it pass
        fix, confidence = fixed[1], 0.9
    return Kind(USAGE, reason, fix, confidence)


def _raise_statement(ev: Evidence) -> bool:
    """The innermost library frame's line is a ``raise`` of this exception with its message written
    there: a check the library made on purpose, not a builtin failing under it (``max()`` of an
    empty sequence, a failed unpacking)."""
    line = ev.raiser.line if ev.raiser is not None else ""
    return bool(re.match(rf"raise\s+(?:[\w.]+\.)?{re.escape(ev.exc)}\s*\(\s*(?:f|rf|fr)?[\"']", line))


# --- bug -----------------------------------------------------------------------------------------

_INTERNAL_EXC = {"AttributeError", "KeyError", "IndexError", "NameError", "UnboundLocalError", "AssertionError",
                 "RecursionError", "ZeroDivisionError"}
_INTERNAL_MESSAGE = re.compile(r"meta tensor|illegal memory access|device-side assert|CUBLAS_STATUS|"
                               r"shape .* is invalid|size of tensor|must match the size|shapes cannot be multiplied|"
                               r"Expected all tensors to be on the same device|segmentation fault", re.I)


def _bug(ev: Evidence) -> Kind:
    where = f" in {ev.raiser.key}" if ev.raiser else ""
    if ev.exc in _INTERNAL_EXC:
        return Kind(BUG, f"{ev.exc}{where}: library internals failed, not a check of the caller's input", None, 0.8)
    if _INTERNAL_MESSAGE.search(ev.message or ""):
        return Kind(BUG, f"{ev.exc}{where}: a tensor/device failure inside library code", None, 0.75)
    behalf = _on_behalf(ev)
    if behalf:
        return Kind(BUG, behalf, None, 0.65)
    if ev.user_line and _LIBRARY_EXAMPLE.search(ev.user_line):
        return Kind(BUG, f"{ev.exc}{where}: the failing call is in the library's own example script", None, 0.6)
    return Kind(BUG, f"{ev.exc}{where}: nothing shows a deliberate check of the caller's input, so it is "
                     "treated as a bug", None, 0.5)


def passes_with(kind: Kind, works_with: Iterable[str]) -> str | None:
    """The contrast change behind a usage verdict's fix, when contrast found it."""
    return kind.fix if kind.fix and kind.fix in set(works_with) else None


def kind_line(kind: Kind, works_with: Iterable[str] = ()) -> str:
    """The one line a person reads first (plain text: escape it for a terminal or markdown)."""
    reason = kind.reason.rstrip(".")
    if kind.kind == USAGE:
        # a change contrast ran (its fixes read "without `kw=...`" or "with `option=...`") confirms the
        # verdict; the error alone does not: on issues it had not seen, 7 of 25 such verdicts were
        # wrong (bot/data/kind/README.md), so say how to confirm it
        ran = kind.fix if kind.fix and kind.fix.startswith(("without `", "with `")) else None
        change = passes_with(kind, works_with) or ran
        if change:
            return f"This looks like a usage error: {reason}. It passes with: {change.removeprefix('with ')}."
        if kind.reason.startswith(_HANDBACK):
            # contrast's traced run saw it: the run is the evidence, not the error's wording
            return f"This looks like a usage error: {reason}; a traced run of the repro showed it. Fix: {kind.fix}."
        return (f"This looks like a usage error: {reason}. No run has confirmed it: `reprobot contrast` tries the "
                "repro without each argument the caller passed, and with each option of the failing call it left "
                "at its default.")
    if kind.kind == ENVIRONMENT:
        return (f"This looks like an environment problem: {reason}. Check the installed versions "
                "(`reprobot env --check`), the CUDA setup (driver, torch.version.cuda) and reinstall the package "
                "it names before filing.")
    return f"This looks like a bug: {reason}."


def _regression(ev: Evidence) -> Kind | None:
    """`versions` ran the same repro on an earlier release than the installed one and it passed: the
    library's behaviour changed under an unchanged call, which is the labelled set's own definition
    of a bug (a regression), however deliberate the raise looks."""
    for package, release in ev.passed:
        have = ev.installed.get(package)
        if have and _older(release, have):
            return Kind(BUG, f"{_what_passed(ev, package, release)} passes on {package} {release}, an earlier "
                             f"release than the installed {have}: a regression, not a usage error", None, 0.85)
    return None


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def _dists(package: str) -> set[str]:
    """An import name's distributions (canonical), for matching versions.json's pip names."""
    target = package_targets().get(package)
    return {canonicalize_name(package)} | ({canonicalize_name(d) for d in target.dists} if target else set())


def _touched(ev: Evidence) -> set[str]:
    """The distributions the failure touches: those with frames in it, and those its message names."""
    named = [m.group(2) for m in [_CANNOT_IMPORT.search(ev.message or "")] if m]
    named += [m.group(1) for pattern in (_MODULE_ATTR, _NO_MODULE) for m in [pattern.search(ev.message or "")] if m]
    return {d for pkg in {f.package for f in ev.lib} | {n.split(".")[0] for n in named} for d in _dists(pkg)}


def _installed(ev: Evidence, dist: str) -> str | None:
    for name, version in ev.installed.items():
        if canonicalize_name(name) == dist:
            return version
    return None


def _fix_shipped(ev: Evidence, unconfirmed: bool = True) -> Kind | None:
    """`versions` ran the same repro on a later release of the raising or routed package and it
    passed, nothing else the failure touches changed: that package shipped a fix (see the module's
    docstring). ``unconfirmed``: count the passes the user's script did not confirm too."""
    owners = (_dists(ev.raiser.package) if ev.raiser is not None and ev.raiser.package else set())
    owners |= {canonicalize_name(d) for d in ev.routed}
    touched = _touched(ev)
    clean = []
    for run in ev.passing + (ev.unconfirmed if unconfirmed else []):
        changed = {canonicalize_name(k): v for k, v in run.changed.items()}
        others = {canonicalize_name(k) for k in run.also} | set(changed)
        for dist, release in changed.items():
            have = _installed(ev, dist)
            if dist in owners and have and _older(have, release) and not (others - {dist}) & touched:
                clean.append((release_key(release), dist, release, have))
    if not clean:
        return None
    # the earliest such release: where the fix shipped (a bisect's first passing one)
    _, dist, release, have = min(clean)
    return Kind(BUG, f"{_what_passed(ev, dist, release)} passes on {dist} {release}, a later release than the "
                     f"installed {have}, with nothing else it touches changed: a fix shipped in {dist}", None, 0.85)


def _what_passed(ev: Evidence, package: str, release: str) -> str:
    return "the user's script" if (canonicalize_name(package), release) in ev.script_passed else "the same repro"


def classify(ev: Evidence) -> Kind:
    """What the releases' signatures say, then environment, then usage, else bug (the default when
    unsure). A usage verdict gives way to a regression `versions` found, an environment verdict
    to a fix it found in the package that raised it or that routing picked."""
    kind = _keyword_kind(ev) or _import_kind(ev) or _attribute_kind(ev) or _environment(ev) or _usage(ev) or _bug(ev)
    if kind.kind in (USAGE, ENVIRONMENT) and not kind.settled:
        # a usage verdict a run on the installed release confirmed (contrast's change passed, or its
        # traced run saw the callback's value) outweighs a later pass the user's script did not
        # confirm; a verdict read from the error alone gives way to it (bug when unsure)
        return (_regression(ev) if kind.kind == USAGE else None) \
            or _fix_shipped(ev, unconfirmed=not _ran(kind, ev)) or kind
    return kind


def _ran(kind: Kind, ev: Evidence) -> bool:
    """The verdict rests on a run of the repro on the installed release."""
    return bool(kind.fix and kind.fix in ev.passes_with) or kind.reason.startswith(_HANDBACK)


# --- evidence from what reprobot has -------------------------------------------------------------

def frames_from_strings(frames: Iterable[str]) -> list[LibFrame]:
    """``"peft/tuners/lora/model.py:_create_new_module"`` -> LibFrame (the labelled sets' form)."""
    out = []
    for s in frames:
        rel, _, func = s.rpartition(":")
        pkg = rel.split("/", 1)[0] if rel and "/" in rel else None
        out.append(LibFrame(pkg, rel or None, func))
    return out


def evidence_from_record(record: Any, *, repro_source: str | None = None, passes_with: Iterable[str] = (),
                         whole: bool = True) -> Evidence:
    """Evidence from a TracebackRecord (a repro's signature.json or a paste)."""
    from bot.upstream.failure import path_frames

    frames = []
    for pf in path_frames(record):
        line = pf.frame.line or ""
        if not line and repro_source and pf.package is None and pf.frame.lineno and \
                re.split(r"[\\/]", pf.frame.path)[-1] == "repro.py":
            rows = repro_source.splitlines()
            line = rows[pf.frame.lineno - 1] if 0 < pf.frame.lineno <= len(rows) else ""
        frames.append(LibFrame(pf.package, pf.rel, pf.frame.func, line.strip()))
    first_lib = next((i for i, f in enumerate(frames) if f.package), len(frames))
    user_line = frames[first_lib - 1].line if 0 < first_lib <= len(frames) else None
    if first_lib == len(frames) and frames:
        user_line = frames[-1].line
    return Evidence(record.exc_type, record.message or "", frames, user_line or None, list(passes_with), whole,
                    script_names=_defined(repro_source))


def _defined(source: str | None) -> frozenset[str]:
    """The names of the functions and classes a script defines, at any depth."""
    try:
        tree = ast.parse(source or "")
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset(n.name for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def classify_repro(repro: Any) -> Kind | None:
    """The kind of a repro folder's failure (signature.json, repro.py, contrast.json)."""
    from bot.store import rerun_notes
    from bot.upstream.failure import failure_from_repro

    try:
        failure = failure_from_repro(repro.path)
    except Exception:
        return None
    notes = rerun_notes(repro)
    ev = evidence_from_record(failure.record, repro_source=failure.repro_source, passes_with=notes.works_with)
    ev.installed = failure.versions          # env.json, as failure_from_repro read it
    ev.passed = notes.passed
    ev.passing = notes.passing
    for run in script_passes(repro):
        ev.passed += list(run.changed.items())
        ev.passing.append(run)
        ev.script_passed |= {(canonicalize_name(p), v) for p, v in run.changed.items()}
    ev.unconfirmed = notes.unconfirmed_passing
    ev.routed = _routed(repro)
    ev.handed_back = notes.handed_back
    return classify(ev)


def script_passes(repro: Any) -> list[PassingRun]:
    """versions.json's runs where the repro failed otherwise and the user's script passed in the
    same environment (``original``): latest rows and the bisect's tried releases."""
    path = repro.path / "versions.json"
    data = repro.read_json(path) if path.is_file() else None
    if not isinstance(data, dict):
        return []

    def by_user(run: Any) -> bool:
        original = run.get("original") if isinstance(run, dict) else None
        return (isinstance(original, dict) and original.get("kind") == VERDICT_PASS
                and (run.get("verdict") or {}).get("kind") != VERDICT_PASS)

    def strs(d: Any) -> dict[str, str]:
        return {str(k): str(v) for k, v in d.items()} if isinstance(d, dict) else {}

    out = [PassingRun(strs(row.get("changed")), strs(row.get("also")))
           for row in data.get("rows") or [] if by_user(row) and row.get("label") != "locked"]
    bisect = data.get("bisect") if isinstance(data.get("bisect"), dict) else {}
    if bisect.get("package"):
        out += [PassingRun({str(bisect["package"]): str(t.get("version"))}, strs(t.get("also")))
                for t in bisect.get("tried") or [] if by_user(t)]
        # where the repro outlived the fix, the user's script's own bisection (no repro run there)
        out += [PassingRun({str(bisect["package"]): str(t.get("version"))})
                for t in bisect.get("script_tried") or []
                if isinstance(t, dict) and (t.get("original") or {}).get("kind") == VERDICT_PASS]
    return out


def _routed(repro: Any) -> tuple[str, ...]:
    """The distributions of the repository route.json picked (none when it picked none)."""
    from bot.targets import target_for_repo

    path = repro.path / "route.json"
    data = repro.read_json(path) if path.is_file() else None
    target = target_for_repo(data.get("target") if isinstance(data, dict) and isinstance(data.get("target"), str)
                             else None)
    return tuple(target.dists) if target else ()


__all__ = ["Kind", "Evidence", "LibFrame", "classify", "classify_repro", "evidence_from_record", "kind_line",
           "passes_with",
           "frames_from_strings", "BUG", "USAGE", "ENVIRONMENT"]
