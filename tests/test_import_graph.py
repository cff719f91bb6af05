"""No import cycles in bot/ or reducer/.

The graph is read from the source with ``ast``, nothing is imported. What counts as an edge:

* every ``import x`` / ``from x import y`` anywhere in a module: at module level, inside
  functions and methods, and under ``if TYPE_CHECKING:``. A function-level import is still a
  cycle, only a deferred one: it breaks the day someone hoists it, and it hides which layer
  depends on which;
* ``from pkg import name`` is an edge to ``pkg.name`` when that is a module of ours, else to
  ``pkg`` itself; relative imports are resolved against the importing module;
* the implicit import of a parent package's ``__init__`` is NOT an edge (every module would
  otherwise depend on its package, and a package that imports its submodules, like
  reducer/passes/__init__.py, would put every pass in one cycle).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "reducer")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _ours(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that ``name`` names (``bot.upstream.route.route`` -> ``bot.upstream.route``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _edges(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):               # ast.walk: function bodies included
        if isinstance(node, ast.Import):
            out |= {m for a in node.names if (m := _ours(a.name, modules))}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path.name == "__init__.py", node)
            for a in node.names:
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                if (m := _ours(target, modules)):
                    out.add(m)
    out.discard(module)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _edges(m, p, modules) for m, p in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_the_imports_it_should() -> None:
    graph = import_graph()
    # Module level, function level and a relative-free "from package import module" all count.
    assert "bot.targets" in graph["bot.upstream.route"]
    assert "bot.upstream.neighbours" in graph["bot.upstream.route"]          # imported inside _neighbours
    assert "reducer.passes.cleanup" in graph["reducer.passes"]               # from reducer.passes import cleanup
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


# ---- layer order -----------------------------------------------------------------------------
# Lowest first. A module may import its own layer and the layers below it, never one above:
# the engine never knows about the bot, the registry of targets knows nothing of the stages that
# read it, the stages (env, upstream, issue) know nothing of what drives them, and only the
# command line knows every command. Within a layer, test_no_import_cycles is the rule.
# Every module of bot/ and reducer/ must sit in a layer (a new package is placed here on purpose).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engine", ("reducer",)),
    # the registry imports nothing of bot's: the scrubber and the store may read it
    ("targets", ("bot.targets",)),
    ("core", ("bot", "bot.store", "bot.run_recipe", "bot.scrub", "bot.output", "bot.progress")),
    ("stages", ("bot.env", "bot.upstream", "bot.issue")),
    ("drivers", ("bot.rerun", "bot.action", "bot.prepare", "bot.reduction", "bot.standalone", "bot.notebook")),
    ("cli", ("bot.commands", "bot.cli", "bot.__main__")),
)


def layer_of(module: str) -> int | None:
    """The layer index of ``module``: the longest prefix listed wins (``bot.store`` is core, not
    the bare ``bot`` package's layer)."""
    best: tuple[int, int] | None = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), rank)
    return None if best is None else best[1]


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = layer_of(module), layer_of(target)
            if a is not None and b is not None and b > a:
                out.append(f"{module} ({LAYERS[a][0]}) -> {target} ({LAYERS[b][0]})")
    return out


def test_the_layer_check_can_fail() -> None:
    assert layer_of("bot.store") == 2 and layer_of("bot") == 2 and layer_of("bot.upstream.route") == 3
    assert layer_of("bot.targets.registry") == 1 and layer_of("reducer.passes.cleanup") == 0
    assert layer_of("reducer.run.runner") == 0 and layer_of("reducer.run.exception_hook.sitecustomize") == 0
    assert layer_of("bot.commands.file") == 5 and layer_of("bot.cli") == 5
    assert upward_edges({"reducer.search": {"bot.store"}, "bot.upstream.kind": {"bot.rerun.report"},
                         "bot.commands.file": {"bot.issue.filing"}}) == [
        "bot.upstream.kind (stages) -> bot.rerun.report (drivers)",
        "reducer.search (engine) -> bot.store (core)"]


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in import_graph() if layer_of(m) is None)
    assert unplaced == [], "modules in no layer (add them to LAYERS): " + ", ".join(unplaced)


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = upward_edges(import_graph())
    assert found == [], "imports against the layer order:\n" + "\n".join(found)


# ---- the run machinery -----------------------------------------------------------------------
# Inside the engine, reducer/run/ starts and watches the user's processes; the search (oracle,
# scheduler, gate, loop, passes, trace, failure...) asks it for runs through run/slots.py, which
# is what lets a slot on another host stand in for a local run. So run/ imports nothing of the
# search: only itself and the failure's own data types, plus artefacts.env_names (the variables a
# script reads, left out of a run made "alone"). A new edge out of run/ is a decision, made here.
RUN = "reducer.run"
RUN_MAY_IMPORT = ("reducer.errors", "reducer.outcome", "reducer.normalize", "reducer.tracebacks",
                  "reducer.artefacts")


def run_edges_out(graph: dict[str, set[str]]) -> list[str]:
    return [f"{module} -> {target}" for module, targets in sorted(graph.items())
            if module == RUN or module.startswith(RUN + ".")
            for target in sorted(targets)
            if not (target == RUN or target.startswith(RUN + ".")) and target not in RUN_MAY_IMPORT]


def test_the_run_rule_can_fail() -> None:
    assert run_edges_out({"reducer.run.runner": {"reducer.run.limits", "reducer.outcome", "reducer.oracle"},
                          "reducer.oracle": {"reducer.run.slots"}}) == ["reducer.run.runner -> reducer.oracle"]


def test_the_run_package_holds_the_run_machinery() -> None:
    graph = import_graph()
    assert {"reducer.run.runner", "reducer.run.zygote", "reducer.run.slots",
            "reducer.run.exception_hook.sitecustomize"} <= set(graph)
    assert "reducer.run.slots" in graph["reducer.oracle"]      # the search reaches runs through the seam


def test_the_run_machinery_never_imports_the_search() -> None:
    found = run_edges_out(import_graph())
    assert found == [], "reducer/run/ imports outside what it may (RUN_MAY_IMPORT):\n" + "\n".join(found)
