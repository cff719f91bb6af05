"""Where a value came from: what the reducer may write into a repro as a literal, and what not.

A repro is filed in public. A value the script read from the environment or from a file (an API
key, a local config holding one) was never part of the script, so the recorded-values passes
must leave the expression that read it in place (``os.environ["WANDB_API_KEY"]`` reads the
variable in the repro as it did in the original). Two layers, because each misses what the other
sees:

- ``Provenance`` (here, static): taint over the script's own statements. Sources are environment
  reads (``os.environ``, ``environ``/``getenv`` however imported, ``dict(os.environ)``), file
  reads (``open``, ``read*``, ``*load*``: json, yaml, pickle, torch, numpy, safetensors...),
  command output, and the stores of secrets (``getpass``, ``get_token()``, keyring, netrc). Names
  that merely look like secrets are not sources: ``pad_token_id`` and ``max_new_tokens`` are the
  values a Hugging Face repro most needs inlined, and a secret's value is caught by value. A name assigned from a tainted expression, a loop variable over one, a
  ``with ... as`` of one, a container filled with one, a function returning one (or called with
  one: its parameters) is tainted, to a fixpoint. Names are merged across scopes: a false
  positive only costs a less reduced repro, a false negative leaks.
- the trace launcher (reducer/analysis/trace.py, at run time): a recorded value none of whose strings
  contains an environment value or the content of a file the script read, whatever code
  computed it (a concatenation, a library call the static layer cannot follow).

``secret_values`` is the third check, the one the reducer's own process can make: any candidate
(recorded value or constant fold) that contains a secret-looking value of the current
environment is refused.
"""
from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Mapping

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
MIN_SECRET = 6

_ENV_NAMES = {"environ", "environb", "getenv", "getenvb"}
# The callee's last name: what reads a file, a pipe or the terminal.
_READERS = {"open", "fdopen", "load", "load_all", "safe_load", "safe_load_all", "full_load",
            "unsafe_load", "load_file", "safe_open", "loadtxt", "genfromtxt", "fromfile", "memmap",
            "check_output", "getoutput", "getstatusoutput", "popen", "communicate", "getpass",
            "input", "get_password", "get_credential", "get_token", "netrc", "authenticators",
            "dotenv_values", "load_dotenv"}
_READER_PREFIXES = ("read", "iter_lines", "iter_content")
# Methods that put their argument into their owner (a call of any other method on a module or an
# object, `os.path.join(token)`, leaves the owner as it was).
_MUTATORS = {"append", "appendleft", "extend", "extendleft", "insert", "update", "setdefault", "add",
             "__setitem__", "put", "put_nowait", "push", "set", "setattr"}


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of this environment's secret-looking variables, longest first."""
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if SECRET_NAME.search(k) and isinstance(v, str) and len(v) >= MIN_SECRET}
    return sorted(found, key=len, reverse=True)


def leaked(text: str, secrets: Iterable[str]) -> str | None:
    """The first secret ``text`` spells (as is, or as a repr would escape it), or None."""
    for s in secrets:
        if s in text or repr(s)[1:-1] in text:
            return s
    return None


def _callee(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _is_source(node: ast.AST) -> bool:
    """A node that by itself reads what is not in the script."""
    if isinstance(node, ast.Attribute):
        return node.attr in _ENV_NAMES
    if isinstance(node, ast.Call):
        name = _callee(node)
        return name is not None and (name in _READERS or name.startswith(_READER_PREFIXES))
    return False


def _targets(target: ast.AST) -> Iterable[str]:
    """Names a binding target taints: plain names, and the owner of ``x[k] = ...``/``x.a = ...``."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for e in target.elts:
            yield from _targets(e)
    elif isinstance(target, ast.Starred):
        yield from _targets(target.value)
    elif isinstance(target, (ast.Subscript, ast.Attribute)):
        root = target.value
        while isinstance(root, (ast.Subscript, ast.Attribute, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if isinstance(root, ast.Name):
            yield root.id


class Provenance:
    """Static taint of one script: ``tainted(expression_text)`` says whether a value that
    expression had may have come from outside the script."""

    def __init__(self, source: str) -> None:
        try:
            self.tree: ast.AST | None = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.tree = None
        self.names: set[str] = set()        # variables (any scope) that may hold outside data
        self.attrs: set[str] = set()        # attribute names assigned outside data (self.token = ...)
        self.functions: set[str] = set()    # functions of the script that may return it
        if self.tree is not None:
            self._solve(self.tree)

    # ---- the question ------------------------------------------------------------------------
    def tainted(self, text: str) -> bool:
        if self.tree is None:
            return True     # what cannot be analysed is not inlined
        body = text[2:] if text.startswith("**") else text
        try:
            expr = ast.parse("(" + body + "\n)", mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return True
        return self._expr(expr)

    def _expr(self, node: ast.AST) -> bool:
        for n in ast.walk(node):
            if _is_source(n):
                return True
            if isinstance(n, ast.Name) and (n.id in self.names or n.id in self.functions or n.id in _ENV_NAMES):
                return True
            if isinstance(n, ast.Attribute) and (n.attr in self.attrs or n.attr in self.functions):
                return True
        return False

    # ---- the fixpoint ------------------------------------------------------------------------
    def _solve(self, tree: ast.AST) -> None:
        nodes = list(ast.walk(tree))
        functions = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        # `from os import environ as E`: E reads the environment
        self.names.update(a.asname or a.name for n in nodes if isinstance(n, ast.ImportFrom)
                          and n.module in ("os", "posix") for a in n.names if a.name in _ENV_NAMES)
        for _ in range(50):
            before = (len(self.names), len(self.attrs), len(self.functions))
            for n in nodes:
                self._step(n, functions)
            if (len(self.names), len(self.attrs), len(self.functions)) == before:
                return

    def _taint_targets(self, targets: Iterable[ast.AST]) -> None:
        for t in targets:
            self.names.update(_targets(t))
            if isinstance(t, ast.Attribute):
                self.attrs.add(t.attr)

    def _step(self, n: ast.AST, functions: list[ast.AST]) -> None:
        if isinstance(n, ast.Assign) and self._expr(n.value):
            self._taint_targets(n.targets)
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and n.value is not None \
                and self._expr(n.value):
            self._taint_targets([n.target])
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and self._expr(n.iter):
            self._taint_targets([n.target])
        elif isinstance(n, ast.withitem) and n.optional_vars is not None and self._expr(n.context_expr):
            self._taint_targets([n.optional_vars])
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            self._function(n)
        elif isinstance(n, ast.Call):
            self._call(n, functions)

    def _function(self, fn: ast.AST) -> None:
        if isinstance(fn, ast.Lambda):
            return
        returns = [r.value for r in ast.walk(fn) if isinstance(r, (ast.Return, ast.Yield, ast.YieldFrom))
                   and r.value is not None]
        if any(self._expr(v) for v in returns):
            self.functions.add(fn.name)

    def _call(self, call: ast.Call, functions: list[ast.AST]) -> None:
        args = [*call.args, *(k.value for k in call.keywords)]
        if not any(self._expr(a) for a in args):
            return
        # `entries.append(token)`, `cfg.update(env)`: the container now holds it
        if isinstance(call.func, ast.Attribute) and call.func.attr in _MUTATORS:
            self.names.update(_targets(call.func))
        # a function of the script called with outside data: its parameters hold it
        name = _callee(call)
        for fn in functions:
            if fn.name == name:
                a = fn.args
                self.names.update(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs,
                                                  *(x for x in (a.vararg, a.kwarg) if x is not None)])
