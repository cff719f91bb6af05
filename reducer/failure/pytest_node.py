"""A failing pytest test written as a plain script that fails the same way outside pytest
(issue #43): `reprobot reduce tests/test_x.py::test_name` reduces that script as any other.

pytest itself says which test failed, with which parameter set, and which fixtures it set up in
which order (reducer/run/pytest_probe.py records it); this module only writes the script, with
the standard library and libcst:

* the conftest.py files pytest loaded for the test (outermost first) and the test module, as
  they are: their imports, helpers and module-level code run as pytest ran them on import
  (``from __future__`` imports go first; ``from conftest import ...`` and ``if __name__ ==
  "__main__":`` blocks go);
* then, in pytest's setup order, each fixture as plain code: a fixture of a conftest.py or of the
  test module is inlined (its body at the top level, ``return X`` / ``yield X`` becoming
  ``name = X``; what follows the yield, the teardown, is dropped) or, when its body cannot stand
  at the top level (a return inside a branch, a name it would clobber), kept as a plain function
  and called (``name = fixture(...)``, ``next(...)`` for a generator); ``tmp_path`` is a fresh
  folder; ``tmp_path_factory.mktemp(x)`` a fresh folder too; ``monkeypatch``'s setenv, delenv,
  setattr, delattr, setitem, delitem, chdir and syspath_prepend are the assignments they make
  (their undoing is the teardown); ``capsys.readouterr()`` whose result is not used is dropped;
  the chosen parameter set's values, from the ``parametrize`` list's own source
  (``pytest.param(..., id=...)`` too) or, for a list built in code, from the value's repr when it
  reads back as the same value; a parametrized fixture's ``request.param`` is that value;
* then the test's body (a test in a class runs on ``self = TestX()``; a ``unittest.TestCase``
  runs as ``TestX("test_name").debug()``).

Anything else a test needs from pytest (a plugin's fixture, ``caplog``, ``request.node``, a
session-scoped fixture with a teardown, ...) is refused with one line naming it (exit
``BAD_INPUT``), never half-converted. The caller checks that the script fails with the test's own
failure (bot/pytest_input.py).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import libcst as cst

from reducer.errors import ExitCode, ReprobotError

# pytest's own fixtures written as plain code here; every other one of its own is refused.
BUILTINS = ("tmp_path", "tmp_path_factory", "monkeypatch", "capsys", "capfd")
_NO_BINDING = {"monkeypatch", "capsys", "capfd", "request"}      # rewritten where used, never a value
_MONKEYPATCH = ("setenv", "delenv", "setattr", "delattr", "setitem", "delitem", "chdir", "syspath_prepend")
_XUNIT = ("_xunit_setup_module_fixture_", "_xunit_setup_function_fixture_", "_xunit_setup_class_fixture_",
          "_xunit_setup_method_fixture_", "_unittest_setUpClass_fixture_", "_unittest_setUpModule_fixture_")
HEADER = "# reprobot: the test {node} as a plain script (pytest's fixtures written as plain code)"


@dataclass
class NodeScript:
    """The test as a script, and what was done to write it (shown, and stored in pytest.json)."""

    script: str
    nodeid: str
    path: Path                                   # the test module: the script runs under its name
    function: str
    param_id: str | None = None
    params: dict[str, str] = field(default_factory=dict)       # argument -> the source of its value
    fixtures: list[str] = field(default_factory=list)          # set up as plain code, in order
    kept_as_functions: list[str] = field(default_factory=list)  # of those, called rather than inlined
    not_inlined: list[str] = field(default_factory=list)       # a plugin's autouse fixture, left out
    conftests: list[str] = field(default_factory=list)         # relative to the test's folder

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.nodeid, "test_file": self.path.name, "function": self.function,
                "param_id": self.param_id, "params": dict(self.params), "fixtures": list(self.fixtures),
                "kept_as_functions": list(self.kept_as_functions), "not_inlined": list(self.not_inlined),
                "conftests": list(self.conftests)}


def _read(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def build_script(failure: dict, read: Callable[[str], str] = _read) -> NodeScript:
    """The failing test ``failure`` (as reducer/run/pytest_probe.py records it) as one script."""
    return _Builder(failure, read).build()


def refuse(node: str, why: str) -> ReprobotError:
    return ReprobotError(f"{node}: {why}; reprobot writes a test as a plain script only when each fixture it "
                         "uses is tmp_path, tmp_path_factory, monkeypatch, capsys or a fixture of a conftest.py "
                         "or of the test module", ExitCode.BAD_INPUT)


# ---- finding things in a module -------------------------------------------------------------------
@dataclass
class _Def:
    """A function of a module (a fixture or the test), found by pytest's file and line."""

    path: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    owner: list[str]                      # enclosing classes, outermost first

    @property
    def line(self) -> int:
        return self.node.lineno


def _defs(tree: ast.Module) -> list[tuple[list[str], ast.AST]]:
    out, stack = [], [([], tree)]
    while stack:
        owner, node = stack.pop()
        for child in getattr(node, "body", []):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((owner, child))
            elif isinstance(child, ast.ClassDef):
                stack.append((owner + [child.name], child))
    return out


def _first_line(node: ast.AST) -> int:
    return min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr.value}" if head else ""
    return ""


def _is_fixture_decorator(dec: cst.Decorator) -> bool:
    expr = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
    return _dotted(expr) in ("pytest.fixture", "fixture", "_pytest.fixtures.fixture", "pytest.yield_fixture")


def _is_mark_decorator(dec: cst.Decorator) -> bool:
    expr = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
    return _dotted(expr).startswith(("pytest.mark.", "mark."))


def _kwarg(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _string(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _param_values(entry: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """``pytest.param(a, b, id=...)`` -> [a, b]; anything else: None."""
    if isinstance(entry, cst.Call) and _dotted(entry.func) in ("pytest.param", "param"):
        return _positional(entry)
    return None


def _element(values: cst.BaseExpression, index: int) -> cst.BaseExpression | None:
    if not isinstance(values, (cst.List, cst.Tuple)):
        return None
    if any(isinstance(e, cst.StarredElement) for e in values.elements) or not 0 <= index < len(values.elements):
        return None
    return values.elements[index].value


# ---- locals of a body, and what can stand at the top level ----------------------------------------
class _Scan(ast.NodeVisitor):
    """Names a function body binds in its own scope, and what keeps it from the top level."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.exits: list[ast.AST] = []          # return / yield / await, not in a nested scope
        self.blockers: list[str] = []

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.bound.add(node.id)
        elif node.id in ("super", "__class__"):
            self.blockers.append(node.id)

    def _scope(self, node) -> None:
        self.bound.add(node.name)
        for dec in getattr(node, "decorator_list", []):
            self.visit(dec)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_Lambda(self, node: ast.Lambda) -> None:
        pass

    def visit_Import(self, node) -> None:
        for alias in node.names:
            self.bound.add((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)

    def visit_Global(self, node) -> None:
        self.blockers.append("global")

    visit_Nonlocal = visit_Global

    def _exit(self, node) -> None:
        self.exits.append(node)
        self.generic_visit(node)

    visit_Return = visit_Yield = visit_YieldFrom = visit_Await = _exit


def _scan(body: list[ast.stmt]) -> _Scan:
    s = _Scan()
    for stmt in body:
        s.visit(stmt)
    return s


def _module_names(source: str) -> set[str]:
    """Names a module binds at its top level (what an inlined body must not clobber)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        s = _Scan()
        s.visit(node)
        names |= s.bound
    return names


# ---- the rewrites of pytest's own fixtures -----------------------------------------------------------
class _Builtins(cst.CSTTransformer):
    """``monkeypatch.X(...)``, ``tmp_path_factory.mktemp(...)``, ``capsys.readouterr()`` and
    ``request.param`` in a body, as the plain code they stand for."""

    def __init__(self, names: set[str], param: cst.BaseExpression | None, imports: set[str], where: str,
                 node: str) -> None:
        self.names, self.param, self.imports, self.where, self.node = names, param, imports, where, node

    def _refuse(self, what: str, code: cst.CSTNode) -> ReprobotError:
        return refuse(self.node, f"{self.where}: `{_code(code).strip()[:80]}`: {what} has no plain-script form here")

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if isinstance(updated.value, cst.Name) and updated.value.value == "request" and "request" in self.names \
                and updated.attr.value == "param" and self.param is not None:
            return self.param
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return updated
        owner, method = func.value.value, func.attr.value
        if owner == "tmp_path_factory" and owner in self.names:
            args = _positional(updated)
            if method == "mktemp" and args:
                self.imports.update(("pathlib", "tempfile"))
                return cst.parse_expression(f"pathlib.Path(tempfile.mkdtemp(prefix={_code(args[0])}))")
            if method == "getbasetemp":
                self.imports.update(("pathlib", "tempfile"))
                return cst.parse_expression("pathlib.Path(tempfile.gettempdir())")
            raise self._refuse(f"tmp_path_factory.{method}", updated)
        return updated

    def leave_SimpleStatementLine(self, original, updated: cst.SimpleStatementLine):
        body = []
        for small in updated.body:
            call = small.value if isinstance(small, cst.Expr) else None
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                    and isinstance(call.func.value, cst.Name) and call.func.value.value in self.names:
                owner, method = call.func.value.value, call.func.attr.value
                if owner == "monkeypatch":
                    body.extend(self._monkeypatch(method, call))
                    continue
                if owner in ("capsys", "capfd") and method == "readouterr":
                    continue                          # its result is not used: nothing to capture
            body.append(small)
        if not body:
            return cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=updated.leading_lines)
        return updated.with_changes(body=body)

    def _monkeypatch(self, method: str, call: cst.Call) -> list[cst.BaseSmallStatement]:
        args = _positional(call)
        raising = _kwarg(call, "raising")
        lenient = isinstance(raising, cst.Name) and raising.value == "False"
        if method not in _MONKEYPATCH or any(a.star for a in call.args):
            raise self._refuse(f"monkeypatch.{method}", call)
        c = _code

        def stmt(text: str) -> list[cst.BaseSmallStatement]:
            return list(cst.parse_statement(text + "\n").body)

        if method == "setenv" and len(args) == 2 and _kwarg(call, "prepend") is None:
            self.imports.add("os")
            value = c(args[1]) if isinstance(args[1], (cst.SimpleString, cst.FormattedString,
                                                       cst.ConcatenatedString)) else f"str({c(args[1])})"
            return stmt(f"os.environ[{c(args[0])}] = {value}")
        if method == "delenv" and len(args) == 1:
            self.imports.add("os")
            return stmt(f"os.environ.pop({c(args[0])}, None)" if lenient else f"del os.environ[{c(args[0])}]")
        if method == "chdir" and len(args) == 1:
            self.imports.add("os")
            return stmt(f"os.chdir({c(args[0])})")
        if method == "syspath_prepend" and len(args) == 1:
            self.imports.add("sys")
            return stmt(f"sys.path.insert(0, str({c(args[0])}))")
        if method == "setitem" and len(args) == 3:
            return stmt(f"{c(args[0])}[{c(args[1])}] = {c(args[2])}")
        if method == "delitem" and len(args) == 2:
            return stmt(f"{c(args[0])}.pop({c(args[1])}, None)" if lenient else f"del {c(args[0])}[{c(args[1])}]")
        if method in ("setattr", "delattr"):
            target = _string(args[0]) if args else None
            if target is not None and len(args) == (2 if method == "setattr" else 1):
                # monkeypatch.setattr("pkg.mod.attr", value): the object the dotted path names
                if "." not in target:
                    raise self._refuse(f"monkeypatch.{method} of {target!r}", call)
                self.imports.add("pkgutil")
                owner, attr = target.rsplit(".", 1)
                obj, rest = f"pkgutil.resolve_name({owner!r})", [repr(attr)] + [c(a) for a in args[1:]]
            elif len(args) == (3 if method == "setattr" else 2):
                obj, rest = c(args[0]), [c(a) for a in args[1:]]
            else:
                raise self._refuse(f"monkeypatch.{method}", call)
            name = _string(cst.parse_expression(rest[0]))
            if name is not None and name.isidentifier() and not obj.startswith("pkgutil."):
                tail = f" = {rest[1]}" if method == "setattr" else ""
                return stmt(f"{'del ' if method == 'delattr' else ''}{obj}.{name}{tail}")
            return stmt(f"{method}({obj}, {', '.join(rest)})")
        raise self._refuse(f"monkeypatch.{method}", call)


def _names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)          # the attribute's own name is not a variable
            return False

    node.visit(V())
    return found


# ---- the builder ----------------------------------------------------------------------------------
class _Builder:
    def __init__(self, failure: dict, read: Callable[[str], str]) -> None:
        self.f = failure
        self.node = str(failure.get("nodeid") or "the test")
        self.test_path = str(failure["path"])
        self.conftests = [p for p in failure.get("conftests") or [] if p != self.test_path]
        self.read = read
        self.texts: dict[str, str] = {}
        self.trees: dict[str, ast.Module] = {}
        for path in [*self.conftests, self.test_path]:
            try:
                self.texts[path] = read(path)
                self.trees[path] = ast.parse(self.texts[path])
            except (OSError, UnicodeDecodeError) as e:
                raise refuse(self.node, f"cannot read {Path(path).name} ({e})") from None
            except SyntaxError as e:
                raise ReprobotError(f"{path}: does not parse (line {e.lineno}: {e.msg})", ExitCode.NOT_PYTHON) from None
        self.entries = {e["name"]: e for e in failure.get("fixtures") or []}
        self.params = failure.get("params") or {}
        self.imports: set[str] = set()
        self.removed: dict[str, set[int]] = {p: set() for p in self.texts}     # def lines taken out
        self.rewritten: dict[tuple[str, int], cst.FunctionDef] = {}            # def line -> new def
        self.section: list[str] = []
        self.done: set[str] = set()
        self.out = NodeScript("", self.node, Path(self.test_path), str(failure.get("function") or ""),
                              failure.get("param_id"))
        self.out.conftests = [_relative(p, Path(self.test_path).parent) for p in self.conftests]
        self.requested: set[str] = set(failure.get("argnames") or [])
        for e in self.entries.values():
            if e.get("kind") == "fixture" and not str(e.get("module", "")).startswith("_pytest"):
                self.requested.update(e.get("argnames") or [])
        self.cls = failure.get("cls")
        self.module_names: set[str] = set()
        for text in self.texts.values():
            self.module_names |= _module_names(text)

    # -- locating -----------------------------------------------------------------------------------
    def find_def(self, path: str, func: str, line: int, owner: list[str] | None = None) -> _Def:
        tree = self.trees.get(path)
        if tree is None:
            raise refuse(self.node, f"{func} is defined in {Path(path).name}, not in a conftest.py or the test module")
        candidates = [(o, d) for o, d in _defs(tree) if d.name == func and (owner is None or o == owner)]
        exact = [(o, d) for o, d in candidates if line in (d.lineno, _first_line(d))]
        chosen = (exact or candidates or [None])[0]
        if chosen is None:
            raise refuse(self.node, f"cannot find {func} in {Path(path).name}")
        return _Def(path, chosen[1], chosen[0])

    def cst_def(self, d: _Def) -> cst.FunctionDef:
        key = (d.path, d.line)
        if key in self.rewritten:
            return self.rewritten[key]
        from libcst.metadata import MetadataWrapper, PositionProvider
        wrapper = MetadataWrapper(cst.parse_module(self.texts[d.path]), unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        for n, pos in positions.items():
            if isinstance(n, cst.FunctionDef) and pos.start.line == d.line:
                return n
        raise refuse(self.node, f"cannot find {d.node.name} in {Path(d.path).name}")

    # -- parameters ---------------------------------------------------------------------------------
    def parametrize_marks(self) -> list[cst.Call]:
        """The parametrize calls that apply to the test: its own decorators, its classes', the
        module's ``pytestmark``."""
        test = self.test_def()
        calls: list[cst.Call] = []
        decorated = [self.cst_def(test)]
        module = cst.parse_module(self.texts[self.test_path])
        classes = _classes(module, test.owner)
        decorated += list(reversed(classes))
        for node in decorated:
            for dec in node.decorators:
                if isinstance(dec.decorator, cst.Call) and _dotted(dec.decorator.func).endswith("parametrize"):
                    calls.append(dec.decorator)
        for scope in [*reversed(classes), module]:
            body = scope.body.body if isinstance(scope, cst.ClassDef) else scope.body
            for stmt in body:
                if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 \
                        and isinstance(stmt.body[0], cst.Assign) \
                        and any(isinstance(t.target, cst.Name) and t.target.value == "pytestmark"
                                for t in stmt.body[0].targets):
                    value = stmt.body[0].value
                    marks = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
                    calls += [m for m in marks if isinstance(m, cst.Call) and _dotted(m.func).endswith("parametrize")]
        return calls

    def param_source(self, name: str) -> tuple[str, bool]:
        """(the source of the chosen value of argument ``name``, whether it goes to a fixture)."""
        info = self.params.get(name) or {}
        index = info.get("index")
        for call in self.parametrize_marks():
            args = _positional(call)
            names_node = _kwarg(call, "argnames") or (args[0] if args else None)
            values = _kwarg(call, "argvalues") or (args[1] if len(args) > 1 else None)
            names = _argnames(names_node)
            if names is None or name not in names:
                continue
            indirect = _kwarg(call, "indirect")
            to_fixture = (isinstance(indirect, cst.Name) and indirect.value == "True") or \
                (isinstance(indirect, (cst.List, cst.Tuple)) and name in [_string(e.value) for e in indirect.elements])
            entry = _element(values, index) if values is not None and isinstance(index, int) else None
            if entry is not None:
                inner = _param_values(entry)
                if len(names) == 1:
                    if inner is None:
                        return _code(entry), to_fixture
                    if len(inner) == 1:
                        return _code(inner[0]), to_fixture
                else:
                    parts = inner if inner is not None else (
                        [e.value for e in entry.elements] if isinstance(entry, (cst.List, cst.Tuple)) else None)
                    if parts is not None and len(parts) == len(names):
                        return _code(parts[names.index(name)]), to_fixture
            return self.repr_source(name), to_fixture
        return self.repr_source(name), False

    def repr_source(self, name: str) -> str:
        info = self.params.get(name) or {}
        if info.get("literal"):
            return str(info["repr"])
        raise refuse(self.node, f"parameter {name!r}: its value ({str(info.get('repr', '?'))[:60]}) is built in "
                                "code and has no literal form to write down")

    def fixture_param_source(self, d: _Def, name: str) -> str:
        dec = _fixture_call(self.cst_def(d))
        values = _kwarg(dec, "params") if dec is not None else None
        index = (self.params.get(name) or {}).get("index")
        entry = _element(values, index) if values is not None and isinstance(index, int) else None
        if entry is not None:
            inner = _param_values(entry)
            if inner is None:
                return _code(entry)
            if len(inner) == 1:
                return _code(inner[0])
        return self.repr_source(name)

    def test_def(self) -> _Def:
        owner = self.cls.split(".") if self.cls else []
        return self.find_def(self.test_path, self.out.function or str(self.f.get("originalname")),
                             int(self.f.get("line") or 0), owner)

    # -- the script ---------------------------------------------------------------------------------
    def build(self) -> NodeScript:
        test = self.test_def()
        if isinstance(test.node, ast.AsyncFunctionDef):
            raise refuse(self.node, "an async test runs through a plugin (pytest-asyncio, anyio)")
        if self.cls and not self.f.get("unittest"):
            self.section.append(f"self = {self.cls}()")
        for name in list(self.entries):
            self.visit(name, [])
        self.call_test(test)
        return self.finish()

    def visit(self, name: str, chain: list[str]) -> None:
        if name in self.done:
            return
        if name in chain:
            raise refuse(self.node, f"fixture {name!r} requests itself ({' -> '.join(chain + [name])})")
        self.done.add(name)
        entry = self.entries.get(name)
        if name.startswith(_XUNIT):
            self.xunit(name)
            return
        if entry is None or entry.get("kind") == "unknown":
            raise refuse(self.node, f"fixture {name!r}: pytest gave no definition of it")
        if entry.get("kind") == "request":
            if name in self.f.get("argnames", []):
                raise refuse(self.node, "the test uses `request` (pytest's own object)")
            return
        if entry.get("kind") == "param":
            source, _ = self.param_source(name)
            self.out.params[name] = source
            self.section.append(f"{name} = {source}")
            return
        module = str(entry.get("module") or "")
        if module.startswith("_pytest") or module == "pytest":
            self.builtin(name)
            return
        path = str(entry.get("file") or "")
        if path not in self.texts:
            where = module or Path(path).name
            if name not in self.requested:          # autouse: the signature check says whether it mattered
                self.out.not_inlined.append(f"{name} ({where})")
                return
            raise refuse(self.node, f"fixture {name!r} comes from {where}, not from a conftest.py or the test module")
        for dep in entry.get("argnames") or []:
            if dep == name:
                raise refuse(self.node, f"fixture {name!r} overrides a fixture of the same name that it requests")
            if dep != "request":
                self.visit(dep, chain + [name])
        self.user_fixture(name, entry)

    def builtin(self, name: str) -> None:
        if name not in BUILTINS:
            if name not in self.requested:        # what pytest's own fixtures use (tmp_path's factory)
                return
            raise refuse(self.node, f"fixture {name!r} (pytest's own) has no plain-script form here")
        if name in self.requested:
            self.out.fixtures.append(name)
        if name == "tmp_path":
            self.imports.update(("pathlib", "tempfile"))
            self.section.append("tmp_path = pathlib.Path(tempfile.mkdtemp())")

    def xunit(self, name: str) -> None:
        module = cst.parse_module(self.texts[self.test_path])
        funcs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
        if name.startswith("_xunit_setup_module_fixture_") or name.startswith("_unittest_setUpModule_fixture_"):
            for fn in ("setup_module", "setUpModule"):
                if fn in funcs:
                    takes = bool(funcs[fn].params.params)
                    if takes:
                        self.imports.add("sys")
                    self.section.append(f"{fn}(sys.modules[__name__])" if takes else f"{fn}()")
                    self.out.fixtures.append(fn)
                    return
            return
        if name.startswith("_unittest_setUpClass_fixture_"):
            self.section.append(f"{self.cls}.setUpClass()")
            return
        if name.startswith("_xunit_setup_class_fixture_"):
            self.section.append(f"{self.cls}.setup_class()")
            self.out.fixtures.append("setup_class")
            return
        what = "setup_function" if "function" in name else "setup_method"
        self.out.fixtures.append(what)
        self.xunit_call = what          # called with the test function, just before it

    def user_fixture(self, name: str, entry: dict) -> None:
        owner = None
        d = self.find_def(str(entry["file"]), str(entry.get("func") or name), int(entry.get("line") or 0), owner)
        fdef = self.cst_def(d)
        if isinstance(d.node, ast.AsyncFunctionDef):
            raise refuse(self.node, f"fixture {name!r} is async (it runs through a plugin)")
        scope = str(entry.get("scope") or "function")
        param = None
        arg_names = [p.name.value for p in fdef.params.params]
        if "request" in arg_names:
            if entry.get("has_params"):
                param = cst.parse_expression(self.fixture_param_source(d, name))
            elif name in self.params:
                source, _ = self.param_source(name)
                param = cst.parse_expression(source)
            if param is not None:
                self.out.params[name] = _code(param)
        fdef = self.rewrite(fdef, name, param, f"fixture {name!r}")
        self.out.fixtures.append(name)
        owner_is_class = bool(d.owner)
        inline = self.inline_body(fdef, d, name, scope)
        if inline is not None:
            self.removed[d.path].add(d.line)
            self.section.extend(inline)
            return
        generator = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes(d.node))
        if generator and scope != "function" and _after_yield(d.node):
            raise refuse(self.node, f"fixture {name!r} is {scope}-scoped with a teardown after its yield")
        self.keep_function(d, fdef)
        call = f"{'self.' if owner_is_class else ''}{fdef.name.value}({self.kwargs(fdef)})"
        self.section.append(f"{name} = {'next(' + call + ')' if generator else call}")
        self.out.kept_as_functions.append(name)

    def rewrite(self, fdef: cst.FunctionDef, name: str, param, where: str) -> cst.FunctionDef:
        """The def with pytest's own fixtures written as plain code, and the parameters that
        named them gone; one line naming what is left when another use remains."""
        arg_names = {p.name.value for p in fdef.params.params}
        names = (arg_names & (set(BUILTINS) | {"request"}))
        body = fdef.body.visit(_Builtins(names, param, self.imports, where, self.node))
        left = _names_in(body) & (names & (_NO_BINDING | {"tmp_path_factory"}))
        if left:
            what = sorted(left)[0]
            raise refuse(self.node, f"{where} uses {what!r} in a way reprobot does not write as plain code"
                         if what != "request" else f"{where} uses `request` beyond request.param")
        params = [p for p in fdef.params.params if p.name.value not in (names & (_NO_BINDING | {"tmp_path_factory"}))]
        if params:
            params[-1] = params[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return fdef.with_changes(body=body, params=fdef.params.with_changes(params=params))

    def inline_body(self, fdef: cst.FunctionDef, d: _Def, name: str | None, scope: str) -> list[str] | None:
        """The body as top-level statements binding ``name`` (None: the test's body), or None
        when it cannot stand at the top level."""
        if any(not (_is_fixture_decorator(x) or _is_mark_decorator(x)) for x in fdef.decorators):
            return None
        scan = _scan(d.node.body)
        if scan.blockers:
            return None
        params = {a.arg for a in d.node.args.args + d.node.args.kwonlyargs}
        others = (self.module_names | set(self.entries) | {"self"}) - ({name} if name else set())
        if (scan.bound - params) & others or (scan.bound & params):
            return None
        stmts = list(fdef.body.body) if isinstance(fdef.body, cst.IndentedBlock) else \
            [cst.SimpleStatementLine(body=list(fdef.body.body))]
        exits = scan.exits
        value = "None"
        if exits:
            top = d.node.body
            last = top[-1]
            if len(exits) != 1 or name is None:
                return None
            ex = exits[0]
            if isinstance(ex, ast.Return) and last is ex:
                value = None
            elif isinstance(ex, ast.Yield) and any(isinstance(s, ast.Expr) and s.value is ex for s in top):
                at = next(i for i, s in enumerate(top) if isinstance(s, ast.Expr) and s.value is ex)
                if scope != "function" and at < len(top) - 1:
                    raise refuse(self.node, f"fixture {name!r} is {scope}-scoped with a teardown after its yield")
                stmts = stmts[:at + 1]
                value = None
            else:
                return None
        if name is None:
            return [_render(stmts)] if stmts else []
        # An autouse fixture nothing requests binds no name (its value is pytest's alone).
        wanted = name in self.requested
        if value is None:
            *head, last_stmt = stmts
            *before, small = last_stmt.body
            if before:
                head.append(last_stmt.with_changes(body=before))
            inner = small.value.value if isinstance(small, cst.Expr) else small.value
            if inner is None and not wanted:
                return [_render(head)] if head else []
            bound = f"{name} = {_code(inner) if inner is not None else 'None'}"
            return ([_render(head)] if head else []) + [bound]
        return ([_render(stmts)] if stmts and not _only_pass(stmts) else []) + ([f"{name} = None"] if wanted else [])

    def keep_function(self, d: _Def, fdef: cst.FunctionDef) -> None:
        decorators = [x for x in fdef.decorators if not _is_fixture_decorator(x)]
        self.rewritten[(d.path, d.line)] = fdef.with_changes(decorators=decorators)

    def kwargs(self, fdef: cst.FunctionDef) -> str:
        return ", ".join(f"{p.name.value}={p.name.value}" for p in fdef.params.params
                         if p.name.value != "self" and p.default is None)

    def call_test(self, test: _Def) -> None:
        fdef = self.cst_def(test)
        if self.f.get("unittest"):
            self.section.append(f"{self.cls}({test.node.name!r}).debug()")
            return
        fdef = self.rewrite(fdef, "", None, "the test")
        for p in fdef.params.params:
            if p.default is not None and p.name.value not in self.done:
                self.section.append(f"{p.name.value} = {_code(p.default)}")
        xunit = getattr(self, "xunit_call", None)
        inline = None if xunit else self.inline_body(fdef, test, None, "function")
        if inline is not None:
            self.removed[test.path].add(test.line)
            self.section.extend(inline)
            return
        target = f"{'self.' if self.cls else ''}{fdef.name.value}"
        if xunit:
            takes = self._takes_argument(xunit)
            self.section.append(f"{'self.' if self.cls else ''}{xunit}({target if takes else ''})")
        self.keep_function(test, fdef)
        self.section.append(f"{target}({self.kwargs(fdef)})")

    def _takes_argument(self, fn: str) -> bool:
        for owner, d in _defs(self.trees[self.test_path]):
            if d.name == fn:
                return len(d.args.args) > (1 if owner else 0)
        return False

    def finish(self) -> NodeScript:
        futures: list[str] = []
        lead: list[str] = []              # every module's leading imports, while nothing above has effects
        parts: list[str] = []
        hoisting, defined = True, set()
        for path in [*self.conftests, self.test_path]:
            module = cst.parse_module(self.texts[path])
            module = module.visit(_ModuleEdits(self, path, futures))
            imports, rest = _leading_imports(module)
            # nor when an import would bind a name the code above it defines (its order decides)
            hoisting = hoisting and not (_module_names("\n".join(imports)) & defined) and \
                not any("import *" in i for i in imports)
            if hoisting:
                lead += [i for i in imports if i not in lead]
            else:
                parts.append("\n".join(imports))
            parts.append(_render(rest))
            defined |= _module_names(parts[-1])
            # The warm interpreters import a script's leading block of imports once
            # (reducer/run/zygote.py): the test module's imports join the conftests' there, above
            # the conftests' own code, when that code only defines things (no call it makes
            # could change what an import does, as setting an environment variable would).
            hoisting = hoisting and all(_only_defines(stmt) for stmt in rest)
        head = [f"from __future__ import {', '.join(dict.fromkeys(futures))}"] if futures else []
        head += list(dict.fromkeys([f"import {m}" for m in sorted(self.imports)] + lead))
        text = "\n".join(head) + ("\n\n" if head else "")
        text += "\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n\n\n" + HEADER.format(node=self.node) + "\n"
        text += "\n".join(s.rstrip("\n") for s in self.section if s.strip()) + "\n"
        try:
            compile(text, self.test_path, "exec", dont_inherit=True)
            cst.parse_module(text)
        except (SyntaxError, cst.ParserSyntaxError) as e:   # a rewrite of ours that does not parse
            raise refuse(self.node, f"the script written from the test does not parse ({e})") from None
        self.out.script = text
        return self.out


class _ModuleEdits(cst.CSTTransformer):
    """A conftest or the test module as it goes into the script."""

    def __init__(self, b: _Builder, path: str, futures: list[str]) -> None:
        super().__init__()
        self.b, self.path, self.futures = b, path, futures
        self.lines: dict[int, int] = {}

    def visit_Module(self, node: cst.Module) -> bool:
        from libcst.metadata import MetadataWrapper, PositionProvider
        wrapper = MetadataWrapper(node, unsafe_skip_copy=True)
        for n, pos in wrapper.resolve(PositionProvider).items():
            if isinstance(n, cst.FunctionDef):
                self.lines[id(n)] = pos.start.line
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        line = self.lines.get(id(original))
        if line in self.b.removed[self.path]:
            return cst.RemoveFromParent()
        new = self.b.rewritten.get((self.path, line))
        return new if new is not None else updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if isinstance(updated.body, cst.IndentedBlock) and not updated.body.body:
            return updated.with_changes(body=updated.body.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])]))
        return updated

    def leave_If(self, original: cst.If, updated: cst.If):
        test = original.test
        if isinstance(test, cst.Comparison) and _dotted(test.left) == "__name__" and len(test.comparisons) == 1 \
                and _string(test.comparisons[0].comparator) == "__main__":
            return cst.RemoveFromParent()
        return updated

    def leave_SimpleStatementLine(self, original, updated: cst.SimpleStatementLine):
        body = []
        for small in updated.body:
            if isinstance(small, cst.ImportFrom) and small.module is not None:
                module = _dotted(small.module)
                if module == "__future__" and not isinstance(small.names, cst.ImportStar):
                    self.futures.extend(a.name.value for a in small.names)
                    continue
                if module == "conftest" and self.b.conftests:
                    continue                            # its names are defined above, from the conftest
            body.append(small)
        if not body:
            return cst.RemoveFromParent()
        return updated.with_changes(body=body)


# ---- small helpers ----------------------------------------------------------------------------------
def _argnames(node: cst.BaseExpression | None) -> list[str] | None:
    text = _string(node)
    if text is not None:
        return [n.strip() for n in text.split(",") if n.strip()]
    if isinstance(node, (cst.List, cst.Tuple)):
        names = [_string(e.value) for e in node.elements]
        return names if all(isinstance(n, str) for n in names) else None
    return None


def _fixture_call(fdef: cst.FunctionDef) -> cst.Call | None:
    for dec in fdef.decorators:
        if _is_fixture_decorator(dec) and isinstance(dec.decorator, cst.Call):
            return dec.decorator
    return None


def _classes(module: cst.Module, owner: list[str]) -> list[cst.ClassDef]:
    out, body = [], module.body
    for name in owner:
        found = next((s for s in body if isinstance(s, cst.ClassDef) and s.name.value == name), None)
        if found is None:
            break
        out.append(found)
        body = found.body.body
    return out


def _own_nodes(fn: ast.AST):
    """The nodes of a function's own scope (not of the functions and classes inside it)."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _after_yield(fn: ast.FunctionDef) -> bool:
    """Statements after the body's top-level yield (a teardown)."""
    for i, stmt in enumerate(fn.body):
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):
            return i < len(fn.body) - 1
    return True


def _leading_imports(module: cst.Module) -> tuple[list[str], list]:
    """(the module's leading import statements, as code; the statements after them)."""
    body = list(module.body)
    imports = []
    while body and isinstance(body[0], cst.SimpleStatementLine) and \
            all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in body[0].body) or \
            body and _docstring(body[0]):
        stmt = body.pop(0)
        if not _docstring(stmt):
            imports.append(_code(stmt.with_changes(leading_lines=[])).strip())
    return imports, body


def _docstring(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) \
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _only_defines(stmt) -> bool:
    """A top-level statement with no effect but its names: a def, a class, an assignment that calls
    nothing, an import, a docstring."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return True
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, (cst.Import, cst.ImportFrom, cst.Pass)) or _docstring(stmt):
            continue
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None and \
                not any(isinstance(n, cst.Call) for n in _walk(small.value)):
            continue
        return False
    return True


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


def _render(stmts: list) -> str:
    return cst.Module(body=stmts).code.strip("\n")


def _only_pass(stmts: list) -> bool:
    return all(isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body) for s in stmts)


def _relative(path: str, base: Path) -> str:
    try:
        return Path(path).relative_to(base).as_posix()
    except ValueError:
        return Path(path).name
