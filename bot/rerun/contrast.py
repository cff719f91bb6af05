"""`reprobot contrast`: which single change to the minimal repro makes it pass.

Every keyword, boolean, device, dtype and dict entry left in the repro gets a small set of
alternatives — drop it (the callee's default), the other boolean, a `device_map` collapsed to
one device, the dtype swapped, `cpu` <-> `cuda:0` — applied one at a time, each a real cold
run judged by the same signature. A maintainer reads the result as "all-GPU works, the split
map fails". The failing library call also gets each boolean option it left at its default set the
other way (bot/rerun/options.py): "passes with `assign=True`" is the answer a usage error gets.

Each change costs a cold run of the stack (7-17 s for a transformers script), so a repro with a
vocabulary and a few data rows written out has dozens of changes. The settings (keywords,
booleans, devices, dtypes) run first and the entries of data last; data rows lose one key in
every row at once, not row by row; and contrast.json is written after every change, so a stop
(SIGTERM, Ctrl-C) keeps what ran, with a line saying after how many changes it stopped.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from bot.rerun.options import MAX_OPTIONS, CallOptions, call_options, description
from bot.rerun.repro_run import ReproRunner
from bot.rerun.verdict import Kind, Verdict, classify
from reducer.errors import ExitCode, ReprobotError
from reducer.analysis.handback import Handback, handback_run
from reducer.failure.normalize import library_path
from reducer.failure.outcome import TracebackRecord
from reducer.failure.signature import find_match

MAX_CHANGES = 80
# Which changes run first: what a maintainer reads as a setting, then the entries of a dict the
# repro passes on, then the entries of data (a table of integers such as a vocabulary or a label
# map, rows of records): a stop keeps the settings' answers.
SETTING, ENTRY, DATA = 0, 1, 2
# Seconds a run may go on once the repro's own failure is on screen (the rest is teardown: 1.7 s of
# a 6.3 s transformers run measured); a little, so the traceback is printed whole.
STOP_GRACE = 0.5
_MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+$")
_DTYPES = ("float16", "bfloat16", "float32")
_DTYPE_STRINGS = {"float16": "bfloat16", "bfloat16": "float16", "float32": "bfloat16",
                  "fp16": "bf16", "bf16": "fp16"}


@dataclass(frozen=True)
class Change:
    line: int
    description: str          # "`b=True` -> `b=False`", as a maintainer reads it
    source: str               # the whole repro with this one change


@dataclass
class Contrast:
    change: Change
    verdict: Verdict

    def to_dict(self) -> dict:
        return {"line": self.change.line, "change": self.change.description, "verdict": self.verdict.to_dict()}


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _short(node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(_code(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Replace(cst.CSTTransformer):
    """Replaces (or removes, with None) one node, found by identity in the tree it was taken from."""

    def __init__(self, target: cst.CSTNode, replacement: cst.CSTNode | None) -> None:
        self.target, self.replacement = target, replacement

    def on_leave(self, original, updated):
        if original is self.target:
            return cst.RemoveFromParent() if self.replacement is None else self.replacement
        return updated


def _string_value(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:
            return None
        return value if isinstance(value, str) else None
    return None


def _device_values(d: cst.Dict) -> list[cst.BaseExpression]:
    seen, out = set(), []
    for el in d.elements:
        if isinstance(el, cst.DictElement) and isinstance(el.value, (cst.Integer, cst.SimpleString)):
            code = _code(el.value)
            if code not in seen:
                seen.add(code)
                out.append(el.value)
    return out


def _is_device(v: cst.BaseExpression) -> bool:
    return (_string_value(v) or "").split(":")[0] in ("cpu", "cuda", "disk", "meta")


def _module_key(k: cst.BaseExpression) -> bool:
    """A device map's key: a module path (``model.layers.0``) or ``""`` for the whole model."""
    key = _string_value(k)
    return key is not None and (key == "" or _MODULE_PATH.match(key) is not None)


def _looks_like_device_map(name: str | None, d: cst.Dict) -> bool:
    """Named so (``device_map=``, ``device_map = {...}``), or its values are devices: a device
    string among them, or integers under module paths. Integers alone are not: a vocabulary or a
    label map (``{"neg": 0, "pos": 1}``) is all integers too."""
    if name and "device" in name.lower():
        return True
    entries = [e for e in d.elements if isinstance(e, cst.DictElement)]
    if not entries or not all(isinstance(e.value, cst.Integer) or _is_device(e.value) for e in entries):
        return False
    return any(_is_device(e.value) or _module_key(e.key) for e in entries)


def _int_table(d: cst.Dict) -> bool:
    """Every value an integer (a vocabulary, a label map): data, not settings."""
    entries = [e for e in d.elements if isinstance(e, cst.DictElement)]
    return len(entries) > 1 and all(isinstance(e.value, cst.Integer) for e in entries)


def _rows(node: cst.List | cst.Tuple | cst.Set) -> list[cst.Dict]:
    """The dicts of a list written out as records (two or more dict elements): its rows."""
    dicts = [el.value for el in node.elements if isinstance(el, cst.Element) and isinstance(el.value, cst.Dict)]
    return dicts if len(dicts) > 1 else []


def _without_key(node: cst.List | cst.Tuple | cst.Set, key: str) -> cst.CSTNode:
    """The list with ``key``'s entry dropped from each of its rows."""
    def drop(d: cst.Dict) -> cst.Dict:
        return d.with_changes(elements=[e for e in d.elements
                                        if not (isinstance(e, cst.DictElement) and _code(e.key) == key)])
    return node.with_changes(elements=[el.with_changes(value=drop(el.value)) if isinstance(el, cst.Element)
                                       and isinstance(el.value, cst.Dict) else el for el in node.elements])


class _Sites(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, options: CallOptions | None = None) -> None:
        self.found: list[tuple[int, int, str, cst.CSTNode, cst.CSTNode | None]] = []
        self._options = options
        self._keyword: list[str | None] = [None]
        self._assigned: list[str | None] = []       # the name an assignment binds (``device_map = {...}``)
        self._dicts: list[cst.Dict] = []            # the dicts being visited, innermost last
        self._row_ids: set[int] = set()             # dicts that are rows of a list of records
        # Only what the repro passes on: call arguments and assigned values, never a def's own
        # defaults or a comparison inside the user's helper.
        self._passing = 0
        self._skip = 0

    def visit_Parameters(self, node: cst.Parameters) -> None:
        self._skip += 1

    def leave_Parameters(self, original_node: cst.Parameters) -> None:
        self._skip -= 1

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._skip += 1

    def leave_Comparison(self, original_node: cst.Comparison) -> None:
        self._skip -= 1

    def visit_Assign(self, node: cst.Assign) -> None:
        self._passing += 1
        target = node.targets[0].target if len(node.targets) == 1 else None
        self._assigned.append(target.value if isinstance(target, cst.Name) else None)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._passing -= 1
        self._assigned.pop()

    @property
    def _active(self) -> bool:
        return self._passing > 0 and self._skip == 0

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _add(self, node: cst.CSTNode, description: str, replacement: cst.CSTNode | None,
             rank: int = SETTING) -> None:
        if not self._active:
            return
        self.found.append((rank, self._line(node), description, node, replacement))

    def visit_Call(self, node: cst.Call) -> None:
        """The failing call's options left at their default, each set the other way (options.py);
        the call may stand alone (``model.load_state_dict(sd)``), so this is not only what is passed on."""
        opts = self._options
        name = node.func.attr.value if isinstance(node.func, cst.Attribute) else (
            node.func.value if isinstance(node.func, cst.Name) else None)
        if opts is None or name != opts.func or self._skip or any(a.star for a in node.args):
            return
        given = {a.keyword.value for a in node.args if a.keyword}
        given |= set(opts.positional[:sum(1 for a in node.args if a.keyword is None)])
        unset = [(k, d) for k, d in opts.options.items() if k not in given][:MAX_OPTIONS]
        for keyword, default in unset:
            arg = cst.Arg(keyword=cst.Name(keyword), value=cst.Name(str(not default)),
                          equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
            args = [*node.args[:-1], node.args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)] if node.args else []
            self.found.append((SETTING, self._line(node), description(keyword, not default, name), node,
                               node.with_changes(args=[*args, arg])))

    def visit_Arg(self, node: cst.Arg) -> None:
        name = node.keyword.value if node.keyword else None
        self._keyword.append(name)
        self._passing += 1
        if name and node.star == "":
            self._add(node, f"without `{name}={_short(node.value)}` (the default)", None)

    def leave_Arg(self, original_node: cst.Arg) -> None:
        self._keyword.pop()
        self._passing -= 1

    def visit_DictElement(self, node: cst.DictElement) -> None:
        inside = self._dicts[-1] if self._dicts else None
        if inside is not None and id(inside) in self._row_ids:
            return      # a row's key is dropped from every row at once (visit_List)
        rank = DATA if inside is not None and _int_table(inside) and not self._device_map(inside) else ENTRY
        self._add(node, f"without the entry `{_short(node.key)}: {_short(node.value)}`", None, rank)

    def _records(self, node: cst.List | cst.Tuple | cst.Set) -> None:
        rows = _rows(node)
        self._row_ids |= {id(d) for d in rows}
        keys = dict.fromkeys(_code(e.key) for d in rows for e in d.elements if isinstance(e, cst.DictElement))
        for key in keys:
            self._add(node, f"without the entry `{_short(cst.parse_expression(key))}` in each of the {len(rows)} rows",
                      _without_key(node, key), DATA)

    def visit_List(self, node: cst.List) -> None:
        self._records(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._records(node)

    def visit_Set(self, node: cst.Set) -> None:
        self._records(node)

    def _device_map(self, d: cst.Dict) -> bool:
        name = self._keyword[-1] or (self._assigned[-1] if self._assigned and self._keyword[-1] is None else None)
        return _looks_like_device_map(name, d)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("True", "False"):
            other = "False" if node.value == "True" else "True"
            kw = self._keyword[-1]
            text = f"`{kw}={node.value}` -> `{kw}={other}`" if kw else f"`{node.value}` -> `{other}`"
            self._add(node, text, cst.Name(other))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == "torch" and node.attr.value in _DTYPES:
            for other in _DTYPES:
                if other != node.attr.value:
                    self._add(node, f"`torch.{node.attr.value}` -> `torch.{other}`",
                              node.with_changes(attr=cst.Name(other)))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = _string_value(node)
        if value is None:
            return
        quote = node.quote
        swaps: list[str] = []
        if value == "cpu":
            swaps = ["cuda:0"]
        elif value in ("cuda", "cuda:0") or value.startswith("cuda:"):
            swaps = ["cpu"]
        elif value in _DTYPE_STRINGS:
            swaps = [_DTYPE_STRINGS[value]]
        for other in swaps:
            self._add(node, f"`{value!r}` -> `{other!r}`", node.with_changes(value=f"{quote}{other}{quote}"))

    def leave_Dict(self, original_node: cst.Dict) -> None:
        self._dicts.pop()

    def visit_Dict(self, node: cst.Dict) -> None:
        self._dicts.append(node)
        if not self._device_map(node):
            return
        values = _device_values(node)
        if len(node.elements) < 2 and len(values) < 2:
            return
        for v in values:
            one = cst.Dict([cst.DictElement(cst.SimpleString('""'), v)])
            self._add(node, f"device_map collapsed to one device: `{_code(one)}`", one)


def changes(source: str, options: CallOptions | None = None) -> list[Change]:
    """The single changes of ``source``; with ``options``, also each option of the failing call
    that the call did not set, set the other way."""
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module)
    sites = _Sites(options)
    wrapper.visit(sites)
    out: list[Change] = []
    seen: set[str] = {source}
    # settings first, data last; in the order the repro reads within each (sorted is stable)
    for _rank, line, description, node, replacement in sorted(sites.found, key=lambda f: f[0]):
        try:
            new = wrapper.module.visit(_Replace(node, replacement)).code
            compile(new, "<contrast>", "exec")
        except Exception:
            continue
        if new in seen:
            continue
        seen.add(new)
        out.append(Change(line, description, new))
        if len(out) >= MAX_CHANGES:
            break
    return out


# Called with the changes run so far (in the order planned), how many were planned, and the line
# saying why it stopped (None while it goes on and when it ends); returns what it wrote.
Save = Callable[[list[Contrast], int, "str | None"], dict]


class ContrastStopped(ReprobotError):
    """SIGTERM or Ctrl-C during contrast: the changes that ran were written; ``data`` is that."""

    def __init__(self, message: str, results: list[Contrast], data: dict) -> None:
        super().__init__(message, ExitCode.INTERRUPTED)
        self.results, self.data = results, data


def _once(runner: ReproRunner, change: Change, cancel: threading.Event) -> Verdict | None:
    """One cold run of the change, stopped once the repro's own failure is on screen (that is the
    verdict; the rest of the run is teardown); None when a stop cut it short."""
    target, options = runner.repro.target, runner.repro.options
    runner.runs += 1

    def failed(records: list[TracebackRecord]) -> bool:
        return find_match(records, target, options) is not None

    outcome = runner.runner.run(change.source, stop_when=failed, stop_grace=STOP_GRACE, cancel=cancel)
    if cancel.is_set() and outcome.stopped_early and not failed(outcome.tracebacks):
        return None
    return classify(outcome, target, options)


def _same_verdict(a: Verdict, b: Verdict) -> bool:
    return (a.kind, a.signature_id, a.detail if a.signature_id is None else "") == \
        (b.kind, b.signature_id, b.detail if b.signature_id is None else "")


def _judge(runner: ReproRunner, change: Change, cancel: threading.Event) -> Verdict | None:
    """The change's verdict. "Changes the failure" is a claim a maintainer acts on, and a run can
    fail once for a reason of its own (two gloo ranks on a loaded machine aborting at teardown
    after the change passed): a different failure is run again, and where the two disagree a third
    run decides by majority, its detail naming the run that disagreed. A pass, the same failure or
    a timeout is taken from one run (a pass needs exit 0 and no traceback; a timeout run twice is
    minutes)."""
    first = _once(runner, change, cancel)
    if first is None or first.kind is not Kind.DIFFERENT:
        return first
    second = _once(runner, change, cancel)
    if second is None:
        return None
    if _same_verdict(first, second):
        return first
    third = _once(runner, change, cancel)
    if third is None:
        return None
    runs = [first, second, third]
    for pick in runs:
        if sum(_same_verdict(pick, other) for other in runs) >= 2:
            odd = next(r for r in runs if not _same_verdict(pick, r))
            note = f"1 of 3 runs: {odd.label()}"
            return replace(pick, detail=f"{pick.detail} ({note})" if pick.detail else note)
    # three different outcomes: the change makes the repro unstable; the first is reported with that
    return replace(first, detail=f"{first.detail} (3 runs, 3 different outcomes)")


def contrast(runner: ReproRunner, jobs: int = 1, notify: Callable[[str], None] = lambda _: None,
             save: Save | None = None) -> list[Contrast]:
    """Every change of ``changes``, each judged by a run; ``save`` hears the results after each one.
    A stop (KeyboardInterrupt, which SIGTERM is under bot/cli.py) kills the runs in flight, saves the
    changes that ran with a line saying so, and raises ContrastStopped."""
    todo = changes(runner.repro.source, call_options(runner.repro.record) if runner.repro.record else None)
    notify(f"{len(todo)} single changes to try")
    done: dict[int, Contrast] = {}
    written: dict = {}

    def report(stopped: str | None = None) -> list[Contrast]:
        results = [done[i] for i in sorted(done)]
        if save is not None:
            written.update(save(results, len(todo), stopped))
        return results

    report()        # from the start the file says what is planned and that none has run yet
    cancel = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    futures = {}
    try:
        futures = {pool.submit(_judge, runner, c, cancel): i for i, c in enumerate(todo)}
        for fut in as_completed(futures):
            i = futures[fut]
            verdict = fut.result()
            if verdict is not None:
                done[i] = Contrast(todo[i], verdict)
                notify(f"{len(done)}/{len(todo)} {verdict.kind.value}: {todo[i].description}")
                report()
    except KeyboardInterrupt as stop:
        cancel.set()                                      # the runs in flight are killed at once
        for fut, i in futures.items():                    # ended while the stop came in
            if i not in done and fut.done() and not fut.cancelled() and fut.exception() is None and fut.result():
                done[i] = Contrast(todo[i], fut.result())
        line = f"contrast stopped after {len(done)} of {len(todo)} changes"
        # written before waiting on anything, and again if a second signal cuts the write short
        # (`timeout` signals the process, then its whole group)
        results = [done[i] for i in sorted(done)]
        for _attempt in range(3):
            try:
                results = report(line)
                break
            except KeyboardInterrupt:
                continue
        raise ContrastStopped(f"{line}; contrast.json holds what they found", results, dict(written)) from stop
    finally:
        cancel.set()        # an error out of a run: the others in flight stop too
        pool.shutdown(wait=True, cancel_futures=True)
    return report()


def _same_failure(found: Handback, record: TracebackRecord | None) -> bool:
    if record is None:
        return True
    short = lambda t: (t or "").rsplit(".", 1)[-1]
    return short(found.exc_type) == short(record.exc_type) and \
        found.message.strip().splitlines()[:1] == (record.message or "").strip().splitlines()[:1]


def handback_line(row: dict) -> str:
    """One finding of ``handed_back`` as a person reads it (plain text)."""
    return (f"the library failed on what {row.get('func')}() returned ({row.get('returned')}): "
            f"`{row.get('local')}` in {row.get('path')}:{row.get('frame')}")


def handed_back(runner: ReproRunner) -> list[dict]:
    """One cold run of the repro under reducer/analysis/handback.py's launcher: the values a
    function of the repro returned to the library that then failed on them, for the repro's own
    failure (the library frame named by its package path: no path of this machine is stored)."""
    target, options = runner.repro.target, runner.repro.options

    def failed(records: list[TracebackRecord]) -> bool:
        return find_match(records, target, options) is not None

    def run(source: str, launcher: list[str], env: dict[str, str]):
        runner.runs += 1
        # stopped once the failure is on screen, as a change's run is: the record was written
        # when the exception reached the repro's frame, before the traceback was printed
        return runner.runner.run(source, launcher=launcher, extra_env=env, warm=False, stop_when=failed,
                                 stop_grace=STOP_GRACE)

    out = []
    for found in handback_run(runner.repro.source, run):
        rel = library_path(found.path)
        if rel is None or not _same_failure(found, runner.repro.record):
            continue
        row = {**found.to_dict(), "path": rel}
        if row not in out:
            out.append(row)
    return out[:5]


def grouped(results: list[Contrast]) -> dict[str, list[Contrast]]:
    groups: dict[str, list[Contrast]] = {"passes": [], "same failure": [], "changes it": []}
    for r in results:
        key = "passes" if r.verdict.kind is Kind.PASS else (
            "same failure" if r.verdict.kind is Kind.SAME else "changes it")
        groups[key].append(r)
    return groups
