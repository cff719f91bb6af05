"""Routing: which upstream repository should hear about this failure, and why.

Evidence is read from the failing traceback (and, for a repro folder, from repro.py):

* which package RAISED (the innermost library frame; when torch raised, the package of
  ours whose code made the failing torch call; when a package outside the stack refused, by its
  own check or lookup, what a package of ours handed it, that package of ours);
* which package's API the user CALLED (the entry point: the outermost library frame);
* a call that CROSSED a package boundary with arguments the callee rejects
  (``TypeError: X() got an unexpected keyword argument``): the caller owns the bug, unless the
  callee is another package's or the user's OVERRIDE of the method the caller called on its own
  object (trl's ``DPOTrainer.log`` under transformers' ``self.log(...)``): then the override's
  owner does (override.py);
* which MODEL FAMILY is on the path (``transformers/models/<family>/``: the target that owns model
  families says how its paths and class names show one, ``Target.family_path``/``family_class``);
* an INTEGRATION failure crossing three of the stack's packages on a transformers model is
  filed where the integration is wired (``Target.integration_home``: transformers), with the
  others cross-linked.

Each piece of evidence adds points to a candidate, with a reason a human can check. Failures
that are torch's own, huggingface_hub's, or the user's code get "not one of ours": a wrong
repository wastes more maintainer time than no routing at all.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from bot import targets as registry
from bot.targets import TARGETS  # noqa: F401  (re-exported: tests read it from here)
from bot.targets.base import MAINTAINERS_FILE, Target
from bot.upstream.failure import FailureReport, PathFrame, enclosing_class, path_frames
from bot.upstream.override import Override, find_override
from bot.upstream.raise_sites import RaiseSite, raisers
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.outcome import TracebackRecord

_REJECTED_CALL = re.compile(
    r"(?P<callee>[A-Za-z_][\w.]*)\(\) (?:got an unexpected keyword argument '(?P<kw>\w+)'"
    r"|got multiple values for (?:keyword )?argument '(?P<multi>\w+)'"
    r"|missing \d+ required (?:positional|keyword-only) arguments?: (?P<missing>.+)"
    r"|takes (?P<takes>(?:from )?\d+ (?:to \d+ )?)positional arguments? but (?P<given>\d+) (?:were|was) given)")
# Exceptions huggingface_hub raises for a wrong repo id, a missing token or no network:
# the user's setup, not a bug in the stack.
_HUB_ERRORS = re.compile(r"(RepositoryNotFound|GatedRepo|RevisionNotFound|EntryNotFound|LocalEntryNotFound|"
                         r"HfHubHTTP|OfflineMode)Error$")
# torch subsystems whose internal errors are torch's own (compiler, distributed runtime).
_TORCH_OWN = re.compile(r"^torch/(_dynamo|_inductor|_export|fx|distributed/elastic|_subclasses/fake_tensor)")
_TORCH_OWN_EXC = re.compile(r"(torch\._dynamo\.exc\.|InductorError|BackendCompilerFailed|TorchRuntimeError)")
_OOM = re.compile(r"(OutOfMemoryError|MemoryError)$")
_OOM_MESSAGE = re.compile(r"^(CUDA|XPU|MPS|HIP) out of memory|^\[enforce fail.*\] .*out of memory", re.IGNORECASE)
MULTIMODAL_HINTS = ("vl", "vision", "llava", "idefics", "paligemma", "mllama", "smolvlm", "gemma3", "gemma4",
                    "pixtral", "blip", "kosmos", "florence", "internvl", "qwen2_5_omni", "aria")

# Weights of each kind of evidence; documented in the reasons each adds.
W_RAISED = 4.0          # innermost library frame is this package
W_CALLED_TORCH = 3.5    # this package's own code made the torch call that raised
W_TORCH_PASSTHROUGH = 1.5
W_ENTRY = 2.0           # the user called this package's API
W_BOUNDARY = 5.0        # caller passed arguments the callee rejects
W_CALLEE = -1.0
W_FAMILY = 1.5
W_INTEGRATION = 4.0
W_FRAMES = 0.5          # present anywhere on the path
W_IMPORTED = 0.5        # the repro uses this package's API
W_MESSAGE_NAMES = 3.0   # the error message names this package's class or module (near the raise)
W_CUT_ENTRY = 2.5       # a pasted traceback cut at the user's call into this package
W_NEIGHBOURS = 3.0      # similar indexed failures were filed there (times their share)
W_PRIOR = 2.0           # the index's model of where failures with these words go (times its share)
W_RAISE_SITE = 3.5      # a paste without the raising frame: this package's code raises the message
# The failing line read a tensor another package of ours made and handed over (built.json): the
# check fired on that package's value, which makes it as likely the owner as the raiser.
W_HANDED_OVER = W_RAISED

# Words of transformers' API that an error message uses in their plain sense.
_GENERIC_IN_MESSAGES = frozenset(["trainer", "tokenizer", "processor", "generate", "pipeline", "from_pretrained",
                                  "save_pretrained", "push_to_hub", "unload", "accelerator"])
# Errors a user's line raises on its own while evaluating its arguments.
_USER_ERRORS = frozenset(["NameError", "SyntaxError", "IndentationError", "UnboundLocalError"])


# --- evidence ----------------------------------------------------------------------------------

def _call_text(line: str) -> str | None:
    """``model = PeftModel.from_pretrained(`` -> ``PeftModel.from_pretrained``."""
    m = None
    for m in re.finditer(r"([A-Za-z_][\w.]*)\s*\(", line):
        if m.group(1) not in ("print", "len", "str", "int", "float", "list", "dict", "tuple"):
            break
    return m.group(1) if m else None


@lru_cache(maxsize=32)
def _pattern(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def family_dir(rel: str | None) -> tuple[Target, re.Match[str]] | None:
    """(the target, the match) when a package-relative path is model code of one of a target's
    families (``transformers/models/gemma4/...``), else None."""
    for owner in registry.family_owners():
        m = _pattern(owner.family_path).match(rel or "") if owner.family_path else None
        if m:
            return owner, m
    return None


def _family_name(stem: str, not_families: frozenset[str] = frozenset()) -> str | None:
    """``Qwen2VL`` -> ``qwen2_vl`` (a known family's spelling when maintainers.json lists it)."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", stem).lower().strip("_")
    if not name or name.replace("_", "") in not_families or name.split("_")[0] in not_families:
        return None
    squash = name.replace("_", "")
    for names in maintainers().get("family_kinds", {}).values():
        for known in names:
            if known.replace("_", "") == squash:
                return known
    return name


def model_families(frames: list[PathFrame], message: str, repro_source: str | None) -> list[str]:
    """Model families on the path: transformers/models/<family>/ frames first, then class
    names in the message and in repro.py (``Gemma4ForConditionalGeneration`` -> gemma4)."""
    fams: list[str] = []
    for pf in reversed(frames):
        found = family_dir(pf.rel)
        if found and found[1].group("family") not in fams:
            fams.append(found[1].group("family"))
    for text in [message] + ([repro_source] if repro_source else []):
        for owner in registry.family_owners():
            if not owner.family_class:
                continue
            for m in _pattern(owner.family_class).finditer(text or ""):
                fam = _family_name(m.group("stem"), owner.not_families)
                if fam and fam not in fams:
                    fams.append(fam)
    return fams


def repro_packages(source: str | None, also: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """Our packages the repro imports (and those of ``also``), with the names it takes from each."""
    out: dict[str, list[str]] = {}
    if not source:
        return out
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return out
    ours = registry.stack_packages() | also
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            if top in ours:
                out.setdefault(top, []).extend(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top in ours:
                    out.setdefault(top, [])
    return out


@dataclass
class Candidate:
    owner: str                       # package name or "user code"
    score: float = 0.0
    reasons: list[str] = field(default_factory=list)
    _points: list[float] = field(default_factory=list)

    def add(self, points: float, reason: str) -> None:
        self.score += points
        self.reasons.append(reason)
        self._points.append(points)

    @property
    def strongest(self) -> str:
        """The reason that carried the most weight (what the verdict quotes)."""
        return self.reasons[max(range(len(self.reasons)), key=lambda i: self._points[i])] if self.reasons else ""

    @property
    def repo(self) -> str | None:
        return registry.repo_of_package(self.owner)


@dataclass
class RouteResult:
    target: str | None
    ranked: list[dict[str, Any]]
    cross_links: list[str]
    who_can_help: list[str]
    entry_point: str | None
    raised_in: str | None
    verdict: str
    areas: list[str] = field(default_factory=list)
    model_family: str | None = None
    boundary: str | None = None
    source: str = ""
    # Mentions for a draft in each repository involved (the target and the cross-links).
    who_can_help_by_repo: dict[str, list[str]] = field(default_factory=dict)
    confidence: float = 0.0         # the top candidate's share of all positive evidence

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "ranked": self.ranked, "cross_links": self.cross_links,
                "who_can_help": self.who_can_help, "entry_point": self.entry_point,
                "raised_in": self.raised_in, "verdict": self.verdict, "areas": self.areas,
                "model_family": self.model_family, "boundary": self.boundary, "source": self.source,
                "who_can_help_by_repo": self.who_can_help_by_repo, "confidence": self.confidence}


@dataclass
class _Evidence:
    """What every piece of evidence reads, and the candidates it adds points to."""

    failure: FailureReport
    frames: list[PathFrame]
    cands: dict[str, Candidate] = field(default_factory=dict)
    raised_in: str | None = None
    entry_point: str | None = None
    boundary: str | None = None
    family: str | None = None
    involved: set[str] = field(default_factory=set)
    torch_own: bool = False          # torch's compiler or runtime machinery itself raised
    override: Override | None = None  # the library's call bound to another's override (override.py)
    _raise_sites: dict[str, RaiseSite] | None = None

    @property
    def raise_sites(self) -> dict[str, RaiseSite]:
        """Packages of ours whose code raises this message, when a paste does not show the frame
        that raised it (a traceback reprobot ran itself is whole: its frames say who)."""
        if self._raise_sites is None:
            inner = self.innermost
            shown = inner is not None and inner.package is not None
            # A user's line that raises by itself (``raise ValueError(...)``) is its own raiser.
            own = inner is not None and re.match(r"\s*(raise|assert)\b", inner.frame.line or "")
            found = {} if shown or own or not self.pasted else raisers(self.record.exc_type, self.record.message)
            ours = registry.stack_packages()
            self._raise_sites = {pkg: site for pkg, site in found.items() if pkg in ours}
        return self._raise_sites

    @property
    def record(self) -> TracebackRecord:
        return self.failure.record

    @property
    def lib(self) -> list[PathFrame]:
        return [pf for pf in self.frames if pf.package]

    @property
    def ours_on_path(self) -> list[str]:
        ours = registry.stack_packages()
        return [pf.package for pf in self.lib if pf.package in ours]

    @property
    def innermost(self) -> PathFrame | None:
        return self.frames[-1] if self.frames else None

    @property
    def pasted(self) -> bool:
        """A pasted traceback may be cut anywhere; one reprobot ran itself is whole."""
        return self.failure.repro_dir is None

    def cand(self, owner: str) -> Candidate:
        return self.cands.setdefault(owner, Candidate(owner))

    def entered(self) -> int | None:
        """The index of the library frame the user's code entered last: the innermost step from
        a user frame into a library frame (a helper decorated with ``torch.no_grad`` passes
        through ``decorate_context`` first; that outer step is not the call that failed)."""
        steps = [i + 1 for i in range(len(self.frames) - 1)
                 if self.frames[i].package is None and self.frames[i + 1].package]
        if steps:
            return steps[-1]
        return next((i for i, pf in enumerate(self.frames) if pf.package), None)

    def user_call(self) -> str | None:
        """The call on the user's line that led into the libraries (or, when no library frame
        is shown, the innermost user line)."""
        first_lib = self.entered()
        first_lib = len(self.frames) if first_lib is None else first_lib
        if first_lib == 0:
            return None
        user = self.frames[first_lib - 1].frame
        line = user.line
        src = self.failure.repro_source
        if not line and src and user.lineno and re.split(r"[\\/]", user.path)[-1] == "repro.py":
            rows = src.splitlines()
            line = rows[user.lineno - 1] if 0 < user.lineno <= len(rows) else ""
        if re.match(r"\s*(raise|assert)\b", line or ""):
            return None     # the user's own raise: no call entered anything (no `RuntimeError: RuntimeError`)
        # ``import bitsandbytes`` or a CLI line (``accelerate launch``) has no call: the line is it.
        return _call_text(line or "") or (line or "").strip() or None


def _imported_package(line: str | None) -> tuple[str, str] | None:
    """``import transformers`` / ``from peft.tuners import X``: importing runs the package's code,
    so a paste that ends at that line was cut above the package's frames."""
    m = re.match(r"\s*(?:import|from)\s+([A-Za-z_]\w*)", line or "")
    if m and m.group(1) in registry.stack_packages():
        return m.group(1), (line or "").strip()
    return None


def _calls_out(line: str) -> bool:
    """The line calls a function (not a ``raise``/``assert`` of its own)."""
    return bool(line) and not re.match(r"(raise|assert)\b", line) and _call_text(line) is not None


def api_owner(text: str | None, *, in_message: bool = False) -> tuple[str, str] | None:
    """(package, name) of the first API name of ours in ``text`` (each target's ``api_names``)."""
    for pkg, pattern in registry.api_patterns():
        for m in pattern.finditer(text or ""):
            name = m.group(0)
            if in_message and name.lower() in _GENERIC_IN_MESSAGES:
                continue
            return pkg, name.removeprefix("from ").strip(".' ")
    return None


def _raised(ev: _Evidence) -> None:
    """Who raised: the innermost frame's package (torch: whoever handed torch the input)."""
    innermost, record = ev.innermost, ev.record
    if innermost is None:
        return
    if innermost.package is None:
        ev.raised_in = "user code"
        # The file's base name only: the user's directories are nobody's business.
        name = re.split(r"[\\/]", innermost.frame.path)[-1] or "the script"
        cut = None
        if ev.pasted and not ev.lib:
            cut = _imported_package(innermost.frame.line) or api_owner(ev.user_call())
        user_error = record.exc_type.rsplit(".", 1)[-1] in _USER_ERRORS
        line = (innermost.frame.line or "").strip()
        if (cut or ev.raise_sites) and not user_error:
            if cut:
                pkg, api = cut
                ev.cand(pkg).add(W_CUT_ENTRY, f"the pasted traceback stops at the user's call into {pkg} ({api}): "
                                               "the library frames below it were not pasted")
            ev.cand("user code").add(W_RAISED / 2, f"the innermost frame shown is the user's ({name})")
        elif ev.pasted and not ev.lib and not user_error and _calls_out(line):
            # Python shows the frames of every Python function a line calls: a paste whose last
            # frame is a user's line that calls something was cut there, and who raised is unknown.
            ev.cand("user code").add(W_RAISED / 4, f"the innermost frame shown is the user's ({name}), and its line "
                                                   f"calls {_call_text(line)}: the frames below it were not pasted")
        else:
            ev.cand("user code").add(W_RAISED, f"raised in the user's own code ({name}, in {innermost.frame.func})")
        return
    ev.raised_in = innermost.package
    where = f"{innermost.rel}:{innermost.frame.func}"
    if (o := ev.override) is not None:
        # Python raised it binding the call's arguments: the frame shown is the caller's line, the
        # function that refused them is the override, never entered.
        ev.cand(o.owner).add(W_RAISED, f"raised binding {o.caller}'s call ({where}) to {o.owner_text} override "
                                       f"{o.method}(), which refused the arguments")
    elif innermost.package in registry.stack_packages():
        ev.cand(innermost.package).add(W_RAISED, f"raised in {innermost.package} ({where})")
    elif innermost.package == "torch":
        _raised_in_torch(ev, where)
    elif innermost.package == "huggingface_hub" or _HUB_ERRORS.search(record.exc_type):
        ev.cand("huggingface_hub").add(W_RAISED + (2 if _HUB_ERRORS.search(record.exc_type) else 0),
                                       f"raised by huggingface_hub ({record.exc_type.rsplit('.', 1)[-1]}): "
                                       "a repo id, token, network or cache problem")
    else:
        ev.cand(innermost.package).add(W_RAISED, f"raised in {innermost.package} ({where})")
        _asked_for_what_it_does_not_hold(ev, innermost, where)
        _refused_what_it_was_handed(ev, innermost, where)


# A lookup a container answered with "not here": the key was the caller's to get right.
_LOOKUPS = frozenset({"__getitem__", "__getattr__", "__getattribute__"})
_LOOKUP_ERRORS = frozenset({"KeyError", "IndexError", "AttributeError"})


def _asked_for_what_it_does_not_hold(ev: _Evidence, innermost, where: str) -> None:
    """A package outside the stack refused a lookup (``datasets``' formatter: ``KeyError: 'text'``)
    that one of ours made: the package that asked for the key owns the failure (trl's formatting
    function asked a dataset row for a column it does not have). Only where the very next frame
    out is ours: a user's lookup stays the user's."""
    if innermost.frame.func not in _LOOKUPS or ev.record.exc_type.rsplit(".", 1)[-1] not in _LOOKUP_ERRORS:
        return
    outer = ev.lib[-2] if len(ev.lib) > 1 else None
    if outer is None or outer.package not in registry.stack_packages() or outer.package == innermost.package:
        return
    ev.cand(outer.package).add(W_BOUNDARY, f"{outer.package} ({outer.rel}:{outer.frame.func}) asked {innermost.package} "
                                           f"for what it does not hold ({where}): the lookup is the caller's")


# A check's own raise of a fresh input error (not a re-raise, not an internal failure).
_REFUSAL_LINE = re.compile(r"\s*raise\s+(?:\w+\.)*(?:ValueError|TypeError)\b")
_REFUSALS = frozenset({"ValueError", "TypeError"})


def _refused_what_it_was_handed(ev: _Evidence, innermost, where: str) -> None:
    """A package outside the stack refused, by its own check, a value one of ours handed it
    (safetensors' ``save_file`` refusing a non-contiguous tensor that transformers'
    ``save_pretrained`` passed): the package that built and passed the value owns the failure, as
    it would had torch refused it. Only a deliberate ``raise ValueError/TypeError`` line, and only
    when the first frame outside that package is ours: a value the user handed it directly stays
    the user's, and a crash inside the package (no check of its input) stays the package's."""
    if ev.record.exc_type.rsplit(".", 1)[-1] not in _REFUSALS or not _REFUSAL_LINE.match(innermost.frame.line or ""):
        return
    outside = next((pf for pf in reversed(ev.frames) if pf.package != innermost.package and not pf.plumbing), None)
    if outside is None or outside.package not in registry.stack_packages():
        return
    ev.cand(outside.package).add(W_BOUNDARY, f"{outside.package} ({outside.rel}:{outside.frame.func}) handed "
                                             f"{innermost.package} a value its own check refuses ({where}): the "
                                             "value is the caller's")


_PRIVATE_MISSING = re.compile(r"object has no attribute '(?P<attr>_\w+)'")


def _own_state_missing(ev: _Evidence) -> str | None:
    """The private attribute (``_last_lr``) a library method read from its own object (``return
    self._last_lr``) and did not find: state the library sets up itself, never the caller's input,
    so whoever made the call, the object's own package failed (torch's ``ReduceLROnPlateau`` before
    its first ``step()``). None for anything else."""
    m = _PRIVATE_MISSING.search(ev.record.message or "")
    line = ev.innermost.frame.line if ev.innermost is not None else ""
    if not (ev.record.exc_type.rsplit(".", 1)[-1] == "AttributeError" and m
            and re.search(rf"\bself\.{re.escape(m.group('attr'))}\b", line or "")):
        return None
    return m.group("attr")


def _torch_caller(ev: _Evidence) -> PathFrame | None:
    """Who handed torch the failing input: the innermost non-torch, non-plumbing frame."""
    return next((pf for pf in reversed(ev.frames) if pf.package != "torch" and not pf.plumbing), None)


def _raised_in_torch(ev: _Evidence, where: str) -> None:
    own = _TORCH_OWN.match(ev.innermost.rel or "") or _TORCH_OWN_EXC.search(ev.record.exc_type)
    caller = _torch_caller(ev)
    if own:
        ev.torch_own = True
        ev.cand("torch").add(W_RAISED + 1, f"raised inside torch's own machinery ({where})")
    elif (state := _own_state_missing(ev)) is not None:
        ev.cand("torch").add(W_RAISED + 1, f"torch's own object lacks the private state its method reads "
                                           f"(self.{state} in {where}): the object's state is torch's to keep")
    elif caller is not None and caller.package in registry.stack_packages():
        ev.cand("torch").add(W_TORCH_PASSTHROUGH, f"raised inside torch ({where})")
        ev.cand(caller.package).add(W_CALLED_TORCH, f"{caller.package} made the failing torch call "
                                                    f"({caller.rel}:{caller.frame.func})")
    elif caller is not None and caller.package is None:
        ev.cand("torch").add(W_TORCH_PASSTHROUGH, f"raised inside torch ({where})")
        cut = api_owner(ev.user_call()) if ev.pasted else None
        if cut:
            # The user's line calls our API, yet the next frame shown is torch's: the frames in
            # between were cut from the paste, and it was our package that called torch.
            ev.cand(cut[0]).add(W_CALLED_TORCH - 1, f"the user's line calls {cut[0]} ({cut[1]}) and the pasted "
                                                    "traceback skips from there to torch")
        else:
            ev.cand("user code").add(W_CALLED_TORCH, "the user's code made the failing torch call "
                                                     f"(in {caller.frame.func})")
    else:
        ev.cand("torch").add(W_RAISED, f"raised inside torch ({where})")


def _raise_site(ev: _Evidence) -> None:
    """A paste cut above the raising frame (or an error line alone): the packages whose own raise
    statements produce this message (raise_sites.py), sharing the points when several do."""
    found = ev.raise_sites
    if len(found) == 1 and ev.raised_in in (None, "user code"):
        ev.raised_in = next(iter(found))
    for pkg, site in found.items():
        ev.cand(pkg).add(W_RAISE_SITE / len(found), f"{pkg}'s code raises this message ({site.where}); "
                                                     "the paste does not show that frame")


def _out_of_memory(ev: _Evidence) -> None:
    """An exhausted resource is the run's budget, not a bug in the stack (the fix is a smaller
    batch, offloading or a bigger GPU); it outweighs whoever made the allocating call."""
    if _OOM.search(ev.record.exc_type) or _OOM_MESSAGE.search(ev.record.message or ""):
        ev.cand("user code").add(W_RAISED + W_ENTRY + 1, "out of memory: a resource limit of this run, not a bug "
                                                         "(reduce batch or sequence size, offload, or quantize)")


def _entry_point(ev: _Evidence) -> None:
    """The outermost library frame, and the user's line that called it."""
    frames = ev.frames
    first_lib = ev.entered()
    called = ev.user_call()
    if first_lib is None:
        owner = api_owner(called) if called else None
        ev.entry_point = called
        if owner and not ev.pasted:    # a pasted cut was credited by _raised already
            ev.cand(owner[0]).add(W_ENTRY, f"the user calls {owner[0]}'s API ({called})")
        return
    top = frames[first_lib]
    ev.entry_point = entry_name(called, frames[first_lib:]) or f"{top.frame.func} ({top.rel})"
    ours = registry.stack_packages()
    if top.package in ours and top.package != ev.raised_in:
        ev.cand(top.package).add(W_ENTRY, f"the repro calls {top.package}'s API ({ev.entry_point})")
    elif top.package in ours:
        ev.cand(top.package).add(W_ENTRY / 2, f"the repro calls {top.package}'s API directly ({ev.entry_point})")
    elif called and (owner := api_owner(called)) and owner[0] not in ev.ours_on_path:
        # The user called our API but the outermost frame shown is torch's (``model.generate``
        # cut short, or a forward pass): the call still says whose API it was.
        ev.cand(owner[0]).add(W_ENTRY / 2, f"the user calls {owner[0]}'s API ({called})")


def entry_name(called: str | None, entered: list[PathFrame]) -> str | None:
    """The library function the user's line entered, as a maintainer names it. As the user
    spelled it when that names the function (``PeftModel.from_pretrained``, ``get_peft_model``,
    ``SFTTrainer`` for its ``__init__``); else its class and name read from the library's source
    (``model.generate`` is ``GenerationMixin.generate``; calling a DDP model is
    ``DistributedDataParallel.forward``, past torch's ``_call_impl``); else, for a paste whose
    files are not on this machine, the user's spelling."""
    api = next((pf for pf in entered if pf.package and not pf.plumbing), entered[0] if entered else None)
    if api is None:
        return called
    func = api.frame.func
    if called:
        parts = called.split(".")
        if parts[-1] == func and (len(parts) == 1 or parts[-2][:1].isupper()):
            return called
        if func == "__init__" and parts[-1][:1].isupper():
            return called       # a class called: ``SFTTrainer``, its constructor
    owner = enclosing_class(api.frame.path, api.frame.lineno)
    if owner:
        return f"{owner}.{func}"
    return called or func       # a paste from another machine: the user's spelling is all there is


def _named_in_message(ev: _Evidence) -> None:
    """Classes and modules of ours the error message names (``'Params4bit' object has no
    attribute``, ``module 'bitsandbytes.nn' has no attribute``, ``LoraConfig.__init__()``)."""
    ours = registry.stack_packages()
    if ev.lib and ev.innermost is not None and ev.innermost.package in ours:
        return      # the frames already say who raised; a name in the message adds nothing
    owner = api_owner(ev.record.message, in_message=True) or api_owner(ev.record.exc_type, in_message=True)
    if owner and owner[0] in ours:
        ev.cand(owner[0]).add(W_MESSAGE_NAMES, f"the message names {owner[0]}'s {owner[1]}")


def _crossed_boundary(ev: _Evidence) -> None:
    """A call across a package boundary with arguments the callee rejects."""
    record, innermost = ev.record, ev.innermost
    m = _REJECTED_CALL.search(record.message or "")
    if not (record.exc_type.endswith("TypeError") and m and innermost is not None and innermost.package):
        return
    callee_name = m.group("callee")
    arg = _rejected_args(m)
    if (o := ev.override) is not None:
        base = o.base or f"{o.caller}'s own method"
        ev.boundary = (f"{o.caller} ({o.where}) passed {arg} to {o.owner_text} {o.method}(), an override of "
                       f"{base} that rejects it")
        ev.cand(o.owner).add(W_BOUNDARY, f"{o.caller} called self.{o.name}() with the arguments of {base}; "
                                         f"{o.owner_text} override {o.method}() rejects them ({arg}): the "
                                         "override's owner fixes it")
        return
    head = callee_name.split(".")[0]
    callee_pkg = registry.callee_packages().get(head) or _package_named_in_frames(head, ev.lib)
    caller_pkg = innermost.package
    if callee_pkg and callee_pkg != caller_pkg and caller_pkg in registry.stack_packages():
        ev.boundary = (f"{caller_pkg} ({innermost.rel}:{innermost.frame.func}) passed {arg!s} to "
                       f"{callee_pkg}'s {callee_name}(), which rejects it")
        ev.cand(caller_pkg).add(W_BOUNDARY, f"the call crossed from {caller_pkg} into {callee_pkg} with an argument "
                                            f"the callee rejects ({arg}): the caller owns the call")
        if registry.known_owner(callee_pkg):
            ev.cand(callee_pkg).add(W_CALLEE, f"{callee_pkg}'s {callee_name}() is the callee that rejected {arg}")


def _rejected_args(m: re.Match[str]) -> str:
    """What the callee refused, as a reason names it: the keyword, or the positional count."""
    if m.group("given"):
        return f"{m.group('given')} positional arguments where it takes {m.group('takes').strip()}"
    return m.group("kw") or m.group("multi") or (m.group("missing") or "").strip() or "its arguments"


def _override(ev: _Evidence) -> Override | None:
    """A rejected call a package made on its own object that bound to the user's or another
    package's override (``self.log(...)`` into trl's ``DPOTrainer.log``): override.py."""
    m = _REJECTED_CALL.search(ev.record.message or "")
    if not (ev.record.exc_type.endswith("TypeError") and m):
        return None
    return find_override(ev.frames, m.group("callee"), ev.failure.repro_source)


def _model_family(ev: _Evidence) -> None:
    families = model_families(ev.frames, ev.record.message or "", ev.failure.repro_source)
    ev.family = families[0] if families else None
    if not ev.family:
        return
    inner = family_dir(ev.innermost.rel) if ev.innermost is not None else None
    if inner is not None:
        owner, m = inner
        models = m.group(0)[:m.start("family")]                # "transformers/models/"
        ev.cand(owner.packages[0]).add(W_FAMILY, f"the failing line is {ev.family} model code "
                                                 f"({models}{ev.family}/)")
    elif (on_path := next((found for pf in ev.lib if (found := family_dir(pf.rel))), None)) is not None:
        ev.cand(on_path[0].packages[0]).add(W_FAMILY / 2, f"{ev.family} model code is on the path")


def _presence(ev: _Evidence) -> None:
    """Our packages on the path and in the repro."""
    ours = ev.ours_on_path
    imported = repro_packages(ev.failure.repro_source)
    for pkg in dict.fromkeys(ours):
        ev.cand(pkg).add(W_FRAMES, f"{sum(1 for p in ours if p == pkg)} frame(s) in {pkg}")
    for pkg, names in imported.items():
        if pkg not in ours:
            shown = ", ".join(sorted(set(names))[:3])
            ev.cand(pkg).add(W_IMPORTED, f"the repro uses {pkg}" + (f" ({shown})" if shown else ""))
    ev.involved = set(ours) | set(imported)


def _integration(ev: _Evidence) -> None:
    """A failure across three of the stack's packages on a transformers model is filed where the
    integration is wired, when torch rejected state the integration produced (or transformers
    itself raised): a package of ours that raised directly keeps the issue."""
    involved = ev.involved
    home = registry.integration_home()
    if home is None:
        return
    pkg = home.packages[0]
    if (len(involved) >= 3 and pkg in involved and ev.boundary is None
            and ev.raised_in not in ("user code", "huggingface_hub")
            and (ev.raised_in not in registry.stack_packages() or ev.raised_in == pkg)
            and not _wired_by_innermost(ev)):
        ev.cand(pkg).add(W_INTEGRATION, f"the failure crosses {len(involved)} of the stack's packages "
                                        f"({', '.join(sorted(involved))}) on a {pkg} model: file "
                                        "where the integration is wired, cross-link the rest")


def _wired_by_innermost(ev: _Evidence) -> bool:
    """The innermost of our packages on the path wires the others together itself (trl): the
    integration is its code, not transformers'."""
    inner = next((pf.package for pf in reversed(ev.lib) if pf.package in registry.stack_packages()), None)
    target = registry.package_targets().get(inner or "")
    return bool(target and target.wires_integrations)


def _neighbours(ev: _Evidence, index: Any) -> None:
    """Where the most similar indexed failures were filed (or fixed)."""
    if index is None:
        return
    from bot.upstream.neighbours import votes

    for vote in votes(index, ev.failure):
        ev.cand(vote.package).add(W_NEIGHBOURS * vote.share, f"similar failures were filed at {vote.repo} "
                                                             f"({', '.join(vote.refs[:3])})")


def _repo_prior(ev: _Evidence, index: Any) -> None:
    """Where indexed failures with these words were filed (prior.py), for every failure."""
    if index is None:
        return
    from bot.upstream.prior import features, prior_of

    frames = [f"{pf.rel}:{pf.frame.func}" for pf in ev.lib if pf.rel]
    shares = prior_of(index).shares(features(ev.record.exc_type, ev.record.message, frames),
                                    excluded=getattr(index, "excluded", None))
    by_repo = {registry.repo_of_package(p): p for p in registry.stack_packages()}
    for repo, share in list(shares.items())[:2]:
        if repo in by_repo and share >= 0.2:
            ev.cand(by_repo[repo]).add(W_PRIOR * share, f"failures with these words were mostly filed at {repo} "
                                                        f"({share:.0%} of the index's model)")


def _handed_over(ev: _Evidence) -> None:
    """The raising package's failing line (torch's: the line of ours that called it) read tensors
    another package of ours made (built.json, bot/rerun/built.py): that package handed them over."""
    built = ev.failure.built
    reader = ev.raised_in
    if reader == "torch":
        caller = _torch_caller(ev)
        reader = caller.package if caller is not None else None
    if built is None or reader not in registry.stack_packages():
        return
    by_maker: dict[str, list] = {}
    for frame, made in built.handed_over(reader):
        if made.package in registry.stack_packages():
            by_maker.setdefault(made.package, []).append((frame, made))
    for maker, found in by_maker.items():
        frame = found[0][0]
        what = ", ".join(f"`{m.name}` ({m.at})" for _, m in found[:3])
        ev.cand(maker).add(W_HANDED_OVER, f"the failing line ({frame}) read tensors {maker} made and handed over: "
                                          f"{what}")


EVIDENCE = (_raised, _raise_site, _handed_over, _out_of_memory, _entry_point, _crossed_boundary, _named_in_message,
            _model_family, _presence, _integration)


def route(failure: FailureReport, *, index: Any = None) -> RouteResult:
    """Rank the repositories that could own ``failure`` by the evidence above; ``index`` (an
    IssueIndex) adds where similar failures were filed."""
    ev = _Evidence(failure, path_frames(failure.record))
    ev.override = _override(ev)
    for gather in EVIDENCE:
        gather(ev)
    _neighbours(ev, index)
    _repo_prior(ev, index)
    ranked = sorted(ev.cands.values(), key=lambda c: (-c.score, c.owner))
    top_cand = ranked[0] if ranked else None
    ours = registry.stack_packages()
    cross = [registry.repo_of_package(p) for p in
             dict.fromkeys(ev.ours_on_path + ([_boundary_callee(ev.boundary)] if ev.boundary else [])) if p in ours]
    areas = detect_areas(ev.record, ev.frames, failure.repro_source, ev.family)
    positive = sum(max(c.score, 0.0) for c in ranked) or 1.0
    confidence = round(max(top_cand.score, 0.0) / positive, 2) if top_cand else 0.0
    if top_cand is None:
        verdict = "no frames to route by: not enough evidence to name a repository"
        target = None
    elif top_cand.owner in ours or _foundation_alone(ev, top_cand.owner):
        target = registry.repo_of_package(top_cand.owner)
        runner_up = next((c for c in ranked[1:] if c.owner in ours), None)
        margin = f" (next: {runner_up.owner}, {runner_up.score:.1f})" if runner_up else ""
        verdict = f"file at {target}: {top_cand.strongest}{margin}"
        if ev.raised_in == "torch":
            cross.append(registry.repo_of_package("torch"))
    elif (via := _through_the_stack(ev, top_cand, ranked)) is not None:
        # torch raised, but our packages are on the path: the package of ours with the most
        # evidence triages it (it made the call), and torch's tracker is cross-linked.
        target = registry.repo_of_package(via.owner)
        verdict = (f"file at {target}: {top_cand.strongest}, reached through {via.owner} ({via.strongest}); "
                   f"cross-link {registry.repo_of_package(top_cand.owner)}")
        cross.append(registry.repo_of_package(top_cand.owner))
    else:
        target = None
        where = registry.repo_of_package(top_cand.owner) or ""
        verdict = (f"not one of ours: {top_cand.strongest}"
                   + (f"; report it at {where}" if where else "; check the script's own code"))
    cross = [r for r in dict.fromkeys(cross) if r != target]
    who = who_can_help(target, areas, ev.family) if target else []
    # Repositories whose maintainers.json entry names nobody (trl, pytorch) get no entry.
    by_repo = {repo: handles for repo in ([target] if target else []) + cross
               if registry.target_for_repo(repo) and (handles := who_can_help(repo, areas, ev.family))}
    return RouteResult(
        target=target,
        ranked=[{"repo": c.repo or c.owner, "score": round(c.score, 2), "reasons": c.reasons} for c in ranked],
        cross_links=cross, who_can_help=who, entry_point=ev.entry_point, raised_in=ev.raised_in,
        verdict=verdict, areas=areas, model_family=ev.family, boundary=ev.boundary, source=failure.source,
        who_can_help_by_repo=by_repo, confidence=confidence)


def _foundation_alone(ev: _Evidence, owner: str) -> bool:
    """torch is the target only when its frames are alone on the path: with any other target's
    frames there, the failure is theirs to triage (torch is cross-linked), as it always was."""
    target = registry.package_targets().get(owner)
    return bool(target and target.foundation and not ev.ours_on_path)


def _through_the_stack(ev: _Evidence, top: Candidate, ranked: list[Candidate]) -> Candidate | None:
    """The best of our candidates when a foundation (torch) outranks them although our frames
    are on the path: a failure inside the stack always names one of ours. Not when torch's own
    machinery (its compiler, its distributed runtime) raised: that is torch's to fix."""
    target = registry.package_targets().get(top.owner)
    if not (target and target.foundation and ev.ours_on_path) or ev.torch_own:
        return None
    ours = registry.stack_packages()
    return next((c for c in ranked if c.owner in ours and c.score > 0), None)


def _package_named_in_frames(name: str, lib: list[PathFrame]) -> str | None:
    """A callee named like a frame's function or module (``dispatch_model`` in accelerate)."""
    low = name.lower()
    for pf in lib:
        if pf.frame.func == name or (pf.rel or "").rsplit("/", 1)[-1].removesuffix(".py") == low:
            return pf.package
    return None


def _boundary_callee(boundary: str | None) -> str:
    if not boundary:
        return ""
    m = re.search(r"to (\w+)'s ", boundary)
    return m.group(1) if m else ""


# --- who can help ------------------------------------------------------------------------------

@lru_cache(maxsize=8)
def maintainers(source: str = MAINTAINERS_FILE) -> dict[str, Any]:
    """Handles per repository and area, from a data file of the bot package (bot/data/maintainers.json
    unless a target names another as its ``maintainers``): edit that file, not code."""
    try:
        text = resources.files("bot").joinpath(source).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, json.JSONDecodeError) as e:
        raise ReprobotError(f"bot/{source} unreadable ({e})", ExitCode.BAD_INPUT) from None
    return data


def detect_areas(record: TracebackRecord, frames: list[PathFrame], repro_source: str | None,
                 family: str | None) -> list[str]:
    """The maintainers' areas this failure touches, nearest the raise site first."""
    areas: list[str] = []

    def hit(area: str) -> None:
        if area not in areas:
            areas.append(area)

    for pf in reversed(frames):
        if not pf.package or pf.plumbing:
            continue
        rel = pf.rel or ""
        fam = family_dir(rel)
        if fam:
            hit(f"model family: {fam[1].group('family')}")
        for prefix, area in registry.area_prefixes():
            if rel.startswith(prefix):
                hit(area)
    text = " ".join([record.exc_type, record.message or "", repro_source or ""])
    if re.search(r"Params4bit|Int8Params|Linear4bit|Linear8bitLt|quant_state|BitsAndBytesConfig|"
                 r"load_in_4bit|load_in_8bit", text):
        hit("quantization")
    if re.search(r"device_map|offload|meta tensor|same device", text):
        hit("big-model inference")
    if family and not any(a.startswith("model family") for a in areas):
        hit(f"model family: {family}")
    return areas


def family_kind(family: str) -> str:
    data = maintainers().get("family_kinds", {})
    for kind, names in data.items():
        if family in names:
            return kind
    if any(h in family for h in MULTIMODAL_HINTS):
        return "multimodal models"
    return "text models"


def who_can_help(target: str, areas: list[str], family: str | None) -> list[str]:
    """Handles to mention, for the target repository, from the areas matched."""
    found = registry.target_for_repo(target)
    if found is not None and found.maintainers is None:
        return []           # its form names no one to tag
    data = maintainers(found.maintainers if found is not None and found.maintainers else MAINTAINERS_FILE)
    repo = data.get("repos", {}).get(target, {})
    area_map: dict[str, list[str]] = repo.get("areas", {})
    out: list[str] = []
    for area in areas:
        key = family_kind(family) if area.startswith("model family") and family else area
        out.extend(area_map.get(key, []))
    if not out:
        out.extend(repo.get("default", []))
    seen: dict[str, None] = {}
    for h in out:
        seen.setdefault(h if h.startswith("@") else "@" + h, None)
    return list(seen)[: int(data.get("max_mentions", 4))]
