"""A pytest plugin that runs in the user's interpreter (*user*: the standard library and pytest
only): `reprobot reduce tests/test_x.py::test_name` (issue #43) loads it with ``-p`` to learn,
from pytest itself, which tests the node id or ``-k`` selects and how the failing ones fail.

For each failing test it records what reducer/failure/pytest_node.py needs to write the test as a plain
script: the test function (and its class), the chosen parameter set (each argument's index in its
``parametrize`` list, and its value's repr), every fixture pytest resolved for it in the order
pytest sets them up (where each is defined, its scope, what it requests), the conftest.py files
pytest loaded for it, and the failure as Python prints it, with pytest's own frames that only call
the test left out. Collection errors are recorded too. The JSON goes to $REPROBOT_PYTEST_PROBE_OUT
when the session ends.
"""
from __future__ import annotations

import ast
import inspect
import json
import os
import traceback
import unittest
from pathlib import Path

OUT_ENV = "REPROBOT_PYTEST_PROBE_OUT"
_PYTEST_PARTS = (os.sep + "_pytest" + os.sep, os.sep + "pluggy" + os.sep, os.sep + "pytest" + os.sep)

_state = {"selected": [], "failures": [], "errors": [], "outcomes": {}, "rootdir": ""}


def _pytest_frame(filename: str) -> bool:
    return any(part in filename for part in _PYTEST_PARTS)


def _pruned(te: traceback.TracebackException, seen: set) -> None:
    """Leave out pytest's frames: those that call the test (and run its fixtures) are not the
    failure's, and a plain script has none. Frames pytest itself raised in (pytest.raises's
    "DID NOT RAISE", pytest.fail) are the failure's and stay."""
    if id(te) in seen:
        return
    seen.add(id(te))
    frames = list(te.stack)
    tail = len(frames)
    while tail > 0 and _pytest_frame(frames[tail - 1].filename):
        tail -= 1
    kept = [f for f in frames[:tail] if not _pytest_frame(f.filename)] + frames[tail:]
    te.stack = traceback.StackSummary.from_list(kept)
    for chained in (te.__cause__, te.__context__):
        if chained is not None:
            _pruned(chained, seen)


def _failure_text(excinfo) -> str:
    te = traceback.TracebackException(excinfo.type, excinfo.value, excinfo.tb, capture_locals=False)
    _pruned(te, set())
    return "".join(te.format())


def _literal(value) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value
    except Exception:
        return False


def _where(func) -> tuple[str, int, str]:
    func = inspect.unwrap(getattr(func, "__func__", func))
    try:
        path = inspect.getsourcefile(func) or ""
    except TypeError:
        path = ""
    code = getattr(func, "__code__", None)
    return (os.path.realpath(path) if path else "", code.co_firstlineno if code else 0,
            getattr(func, "__name__", ""))


def _fixtures(item) -> list[dict]:
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    out = []
    for name in getattr(item, "fixturenames", ()):
        chain = defs.get(name) or ()
        if not chain:
            out.append({"name": name, "kind": "request" if name == "request" else "unknown"})
            continue
        fd = chain[-1]
        path, line, func = _where(fd.func)
        kind = "param" if func == "get_direct_param_fixture_func" else "fixture"
        module = getattr(inspect.getmodule(fd.func), "__name__", "") or ""
        out.append({"name": name, "kind": kind, "scope": str(getattr(fd, "scope", "function")), "file": path,
                    "line": line, "func": func, "argnames": list(getattr(fd, "argnames", ()) or ()),
                    "has_params": getattr(fd, "params", None) is not None, "module": module})
    return out


def _conftests(item) -> list[str]:
    """The conftest.py files pytest loaded that apply to the test: its folder's and its parents'."""
    test_dir = Path(str(item.path)).resolve().parent
    found = []
    for plugin in item.config.pluginmanager.get_plugins():
        path = getattr(plugin, "__file__", None)
        if not path or Path(path).name != "conftest.py":
            continue
        folder = Path(path).resolve().parent
        if folder == test_dir or folder in test_dir.parents:
            found.append(os.path.realpath(path))
    return sorted(set(found), key=lambda p: len(Path(p).parts))


def _item(item, when: str, excinfo) -> dict:
    spec = getattr(item, "callspec", None)
    params = {}
    if spec is not None:
        for name, value in spec.params.items():
            params[name] = {"index": spec.indices.get(name), "repr": repr(value)[:4000], "literal": _literal(value)}
    cls = getattr(item, "cls", None)
    function = getattr(item, "function", None)
    path, line, func = _where(function) if function is not None else ("", 0, "")
    return {"nodeid": item.nodeid, "path": os.path.realpath(str(item.path)), "name": item.name,
            "originalname": getattr(item, "originalname", item.name), "function": func, "line": line,
            "cls": cls.__qualname__ if cls is not None else None,
            "unittest": bool(cls is not None and issubclass(cls, unittest.TestCase)),
            "param_id": spec.id if spec is not None else None, "params": params, "fixtures": _fixtures(item),
            "argnames": list(getattr(getattr(item, "_fixtureinfo", None), "argnames", ()) or ()),
            "conftests": _conftests(item), "rootdir": str(item.config.rootpath), "when": when,
            "exc_type": excinfo.typename, "message": str(excinfo.value)[:4000],
            "traceback": _failure_text(excinfo)}


def pytest_collection_finish(session) -> None:
    _state["selected"] = [item.nodeid for item in session.items]
    _state["rootdir"] = str(session.config.rootpath)


def pytest_exception_interact(node, call, report) -> None:
    if not getattr(report, "failed", False) or call.excinfo is None:
        return
    try:
        if hasattr(node, "function") or hasattr(node, "_testcase") or node.__class__.__name__ == "TestCaseFunction":
            _state["failures"].append(_item(node, call.when, call.excinfo))
        else:
            _state["errors"].append({"nodeid": node.nodeid, "exc_type": call.excinfo.typename,
                                     "message": str(call.excinfo.value)[:2000],
                                     "traceback": _failure_text(call.excinfo)})
    except Exception as e:          # the probe must never hide the test's own failure
        _state["errors"].append({"nodeid": getattr(node, "nodeid", "?"), "exc_type": "probe",
                                 "message": f"{type(e).__name__}: {e}", "traceback": ""})


def pytest_runtest_logreport(report) -> None:
    if report.when == "call" or report.outcome != "passed":
        key = report.outcome
        _state["outcomes"][key] = _state["outcomes"].get(key, 0) + 1


def pytest_sessionfinish(session, exitstatus) -> None:
    out = os.environ.get(OUT_ENV)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({**_state, "exitstatus": int(exitstatus)}, f)
