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
import functools
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


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """Each module's tree, read once for every check here."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _edges(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = _parsed(path)
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


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    modules = _modules()
    return {m: frozenset(_edges(m, p, modules)) for m, p in modules.items()}


def import_graph() -> dict[str, set[str]]:
    """The tree's graph, read once per session (every test here reads the same source)."""
    return {m: set(targets) for m, targets in _graph().items()}


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
# Every module of bot/ and reducer/ is named here: "pkg.*" is a package and everything in it, any
# other entry is exactly one module ("bot" is bot/__init__.py alone). There is no default: a new
# module fails test_every_module_has_a_layer until it is placed, on purpose.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engine", ("reducer.*",)),
    # the registry imports nothing of bot's: the scrubber and the store may read it
    ("targets", ("bot.targets.*",)),
    ("core", ("bot", "bot.store", "bot.run_recipe", "bot.verified", "bot.scrub", "bot.scrub_places",
              "bot.output", "bot.progress",
              # the GitHub client: both stages that talk to GitHub (upstream, issue) use it
              "bot.github_api",
              # `reduce tests/test_x.py::test`'s pytest side (issue #43): the draft's stage reads its
              # record (bot/issue/pytest_note.py), so it sits below the stages
              "bot.pytest_input")),
    ("stages", ("bot.env.*", "bot.upstream.*", "bot.issue.*")),
    # bot.reduction is `reduce`'s adapter to the engine's whole reduction (reducer/engine.py)
    ("drivers", ("bot.rerun.*", "bot.action.*", "bot.prepare", "bot.reduction", "bot.notebook")),
    ("cli", ("bot.commands.*", "bot.cli", "bot.__main__")),
)


def _covers(entry: str, module: str) -> bool:
    if entry.endswith(".*"):
        package = entry[:-2]
        return module == package or module.startswith(package + ".")
    return module == entry


def layer_of(module: str) -> int | None:
    """The layer index of ``module``, or None when no entry names it (nor a package above it)."""
    for rank, (_, entries) in enumerate(LAYERS):
        if any(_covers(entry, module) for entry in entries):
            return rank
    return None


def unplaced(graph: dict[str, set[str]]) -> list[str]:
    return sorted(m for m in graph if layer_of(m) is None)


def stale_entries(graph: dict[str, set[str]]) -> list[str]:
    """Entries that name no module any more (a module moved or gone: the table says so too)."""
    return [entry for _, entries in LAYERS for entry in entries if not any(_covers(entry, m) for m in graph)]


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
    assert layer_of("bot.github_api") == 2 and layer_of("bot.reduction") == 4 and layer_of("reducer.engine") == 0
    assert upward_edges({"reducer.search.driver": {"bot.store"}, "bot.upstream.kind": {"bot.rerun.report"},
                         "bot.commands.file": {"bot.issue.filing"}}) == [
        "bot.upstream.kind (stages) -> bot.rerun.report (drivers)",
        "reducer.search.driver (engine) -> bot.store (core)"]


def test_an_unplaced_module_fails_the_layer_check() -> None:
    # No default layer: a new top-level module of bot/ is in none until LAYERS names it, and a
    # module entry covers only itself ("bot" is not every module under bot/).
    assert layer_of("bot.brand_new") is None and layer_of("bot.store_helpers") is None
    assert layer_of("bot.store.extra") is None
    assert unplaced({"bot.brand_new": set(), "bot.store": set(), "bot.targets.datasets": set()}) == ["bot.brand_new"]
    assert stale_entries({"bot.store": set()})[:2] == ["reducer.*", "bot.targets.*"]


def test_every_module_has_a_layer() -> None:
    found = unplaced(import_graph())
    assert found == [], "modules in no layer (add them to LAYERS): " + ", ".join(found)


def test_every_layer_entry_names_a_module() -> None:
    found = stale_entries(import_graph())
    assert found == [], "LAYERS entries that name no module (moved or gone?): " + ", ".join(found)


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = upward_edges(import_graph())
    assert found == [], "imports against the layer order:\n" + "\n".join(found)


# ---- packages of bot/ ------------------------------------------------------------------------
# The same graph with each sub-package of bot/ taken as one node (its modules' imports together)
# and each top-level module of bot/ as its own: two stages that import each other are one stage
# in disguise, even when no two of their modules form a cycle.
def package_graph(graph: dict[str, set[str]], root: str = "bot") -> dict[str, set[str]]:
    def node(module: str) -> str | None:
        parts = module.split(".")
        if parts[0] != root:
            return None
        return ".".join(parts[:2])

    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        a = node(module)
        if a is None:
            continue
        out.setdefault(a, set()).update(b for t in targets if (b := node(t)) is not None and b != a)
    return out


def test_the_package_check_can_fail() -> None:
    # Two modules that form no cycle between themselves, in two packages that do.
    graph = {"bot.upstream.dedup": {"bot.issue.github"}, "bot.issue.draft": {"bot.upstream.kind"},
             "bot.issue.github": set(), "bot.upstream.kind": set(), "bot.store": {"bot.targets.registry"}}
    assert cycles(graph) == []
    assert package_graph(graph)["bot.store"] == {"bot.targets"}
    assert cycles(package_graph(graph)) == [["bot.issue", "bot.upstream"]]


def test_no_package_cycle_under_bot() -> None:
    found = cycles(package_graph(import_graph()))
    assert found == [], "packages of bot/ that import each other: " + "; ".join(" <-> ".join(c) for c in found)


# ---- the run machinery -----------------------------------------------------------------------
# Inside the engine, reducer/run/ starts and watches the user's processes; the search (oracle,
# scheduler, gate, loop, passes, trace, failure...) asks it for runs through run/slots.py, which
# is what lets a slot on another host stand in for a local run. So run/ imports nothing of the
# search: only itself and the failure's own data types, plus artefacts.env_names (the variables a
# script reads, left out of a run made "alone"). A new edge out of run/ is a decision, made here.
RUN = "reducer.run"
RUN_MAY_IMPORT = ("reducer.errors", "reducer.failure.outcome", "reducer.failure.normalize", "reducer.failure.tracebacks",
                  "reducer.analysis.artefacts")


def run_edges_out(graph: dict[str, set[str]]) -> list[str]:
    return [f"{module} -> {target}" for module, targets in sorted(graph.items())
            if module == RUN or module.startswith(RUN + ".")
            for target in sorted(targets)
            if not (target == RUN or target.startswith(RUN + ".")) and target not in RUN_MAY_IMPORT]


def test_the_run_rule_can_fail() -> None:
    assert run_edges_out({"reducer.run.runner": {"reducer.run.limits", "reducer.failure.outcome", "reducer.failure.oracle"},
                          "reducer.failure.oracle": {"reducer.run.slots"}}) == ["reducer.run.runner -> reducer.failure.oracle"]


def test_the_run_package_holds_the_run_machinery() -> None:
    graph = import_graph()
    assert {"reducer.run.runner", "reducer.run.zygote", "reducer.run.slots",
            "reducer.run.exception_hook.sitecustomize"} <= set(graph)
    assert "reducer.run.slots" in graph["reducer.failure.oracle"]      # the search reaches runs through the seam


def test_the_run_machinery_never_imports_the_search() -> None:
    found = run_edges_out(import_graph())
    assert found == [], "reducer/run/ imports outside what it may (RUN_MAY_IMPORT):\n" + "\n".join(found)


# ---- the engine's stages --------------------------------------------------------------------
# Inside reducer/, each stage is a folder and the folders are layers, lowest first: a module
# imports its own folder and the ones below it, never one above. run/ is the lowest; what it reads
# from above is RUN_MAY_IMPORT's list (the failure's data types a run produces, the variables a
# script reads) and nothing else. Like LAYERS, every module of reducer/ is named: a new module at
# reducer/'s top is in no stage until it is placed here (or moved into its stage's folder).
ENGINE_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the public face below every folder: the exit codes, the interface the targets answer
    ("base", ("reducer", "reducer.errors", "reducer.stack")),
    ("run", ("reducer.run.*",)),
    ("failure", ("reducer.failure.*",)),
    ("analysis", ("reducer.analysis.*",)),
    ("passes", ("reducer.passes.*",)),
    ("search", ("reducer.search.*",)),
    # the steps around the search, and the search's runs on a Ray cluster (--cluster)
    ("reduction", ("reducer.reduction.*", "reducer.cluster.*")),
    ("entry", ("reducer.engine",)),
)


def stage_of(module: str) -> int | None:
    """The engine layer of ``module`` (a module of reducer/), or None when no entry names it."""
    for rank, (_, entries) in enumerate(ENGINE_LAYERS):
        if any(_covers(entry, module) for entry in entries):
            return rank
    return None


def _in_engine(module: str) -> bool:
    return module == "reducer" or module.startswith("reducer.")


def unstaged(graph: dict[str, set[str]]) -> list[str]:
    return sorted(m for m in graph if _in_engine(m) and stage_of(m) is None)


def stale_stages(graph: dict[str, set[str]]) -> list[str]:
    return [entry for _, entries in ENGINE_LAYERS for entry in entries if not any(_covers(entry, m) for m in graph)]


def stage_edges_up(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = stage_of(module), stage_of(target)
            if a is None or b is None or b <= a:
                continue
            if (module == RUN or module.startswith(RUN + ".")) and target in RUN_MAY_IMPORT:
                continue        # the run rule's own list, checked by test_the_run_machinery_never_imports_the_search
            out.append(f"{module} ({ENGINE_LAYERS[a][0]}) -> {target} ({ENGINE_LAYERS[b][0]})")
    return out


def test_the_stage_check_can_fail() -> None:
    assert stage_of("reducer.errors") == 0 and stage_of("reducer.run.runner") == 1
    assert stage_of("reducer.failure.oracle") == 2 and stage_of("reducer.engine") == 7
    assert stage_of("reducer.brand_new") is None and stage_of("reducer.engine.extra") is None
    assert unstaged({"reducer.brand_new": set(), "reducer.search.judge": set(), "bot.store": set()}) == [
        "reducer.brand_new"]
    assert stale_stages({"reducer.errors": set()})[:2] == ["reducer", "reducer.stack"]
    assert stage_edges_up({"reducer.failure.oracle": {"reducer.search.judge", "reducer.run.slots"},
                           "reducer.run.runner": {"reducer.failure.outcome", "reducer.failure.oracle"},
                           "reducer.analysis.cst": {"reducer.passes.base"}}) == [
        "reducer.analysis.cst (analysis) -> reducer.passes.base (passes)",
        "reducer.failure.oracle (failure) -> reducer.search.judge (search)",
        "reducer.run.runner (run) -> reducer.failure.oracle (failure)"]


def test_every_engine_module_has_a_stage() -> None:
    found = unstaged(import_graph())
    assert found == [], "modules of reducer/ in no stage (move them into a stage's folder): " + ", ".join(found)


def test_every_stage_entry_names_a_module() -> None:
    found = stale_stages(import_graph())
    assert found == [], "ENGINE_LAYERS entries that name no module (moved or gone?): " + ", ".join(found)


def test_no_engine_module_imports_a_stage_above_its_own() -> None:
    found = stage_edges_up(import_graph())
    assert found == [], "imports against the engine's stage order:\n" + "\n".join(found)


# ---- the pass families -----------------------------------------------------------------------
# A pass family shares a helper with another through reducer/passes/rewrites.py (public, one job),
# never by reaching into another module's private names: a `_name` is its module's own, free to
# change with it, and a second family leaning on it is a shared helper in hiding. So no module of
# bot/ or reducer/ imports an underscore name of a reducer/passes/ module other than itself, nor
# anything from an underscore module there (`reducer.passes._shared` was one). Dunders are public.
PASSES = "reducer.passes"


def _imported_names(module: str, path: Path, modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(what was imported from, the name) for each import of ``module``, anywhere in it; a module
    imported whole is (its dotted name, "")."""
    tree = _parsed(path)
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {(a.name, "") for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path.name == "__init__.py", node)
            out |= {(f"{base}.{a.name}", "") if f"{base}.{a.name}" in modules else (base, a.name) for a in node.names}
    return out


@functools.cache
def _names() -> dict[str, frozenset[tuple[str, str]]]:
    modules = _modules()
    return {m: frozenset(_imported_names(m, p, modules)) for m, p in modules.items()}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_pass_imports(imports: dict[str, set[tuple[str, str]] | frozenset[tuple[str, str]]]) -> list[str]:
    """``importer: reducer.passes.x._name`` for each import of a private name (or from a private
    module) of reducer/passes/ by a module other than its own."""
    out = []
    for module, pairs in sorted(imports.items()):
        for source, name in sorted(pairs):
            if source == module or not (source == PASSES or source.startswith(PASSES + ".")):
                continue
            if _private(name) or any(_private(part) for part in source.split(".")):
                out.append(f"{module}: {source}.{name}" if name else f"{module}: {source}")
    return out


def test_the_name_walk_sees_the_imports_it_should() -> None:
    names = _names()
    assert ("reducer.passes.cleanup", "") in names["reducer.passes"]            # from reducer.passes import cleanup
    assert ("reducer.passes.rewrites", "one_iteration") in names["reducer.passes.slicing"]   # inside _render
    assert ("reducer.passes.rewrites", "drop_dead_code") in names["reducer.passes.constants"]


def test_the_private_import_rule_can_fail() -> None:
    imports = {"reducer.passes.heavy": {("reducer.passes.single", "_substitute"), ("reducer.passes.rewrites", "substitute")},
               "reducer.passes.cleanup": {("reducer.passes._shared", "spread_kwargs")},
               "reducer.passes.bindings": {("reducer.passes._shared", "")},
               "reducer.passes.single": {("reducer.passes.single", "_names")},        # its own: fine
               "reducer.search.driver": {("reducer.search.judge", "_unbound"), ("reducer.passes", "__doc__")},   # not a pass; a dunder
               "bot.standalone": {("reducer.passes.cleanup", "_apply")}}
    assert private_pass_imports(imports) == [
        "bot.standalone: reducer.passes.cleanup._apply",
        "reducer.passes.bindings: reducer.passes._shared",
        "reducer.passes.cleanup: reducer.passes._shared.spread_kwargs",
        "reducer.passes.heavy: reducer.passes.single._substitute"]


def test_no_module_imports_a_private_name_of_another_pass_module() -> None:
    found = private_pass_imports(_names())
    assert found == [], ("private names of reducer/passes/ imported from outside their module (share them "
                         "through reducer/passes/rewrites.py):\n" + "\n".join(found))
