"""bot/targets/ is the single source: no other module of bot/ or reducer/ spells out a target's
repository or a list of the stack's packages (the source is read with ``ast``, nothing run), the
package imports nothing of bot's outside itself, and every list the others read is derived
from the registry, so a target registered at run time is in all of them."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bot import targets as registry
from bot.targets import Target, textarea

ROOT = Path(__file__).resolve().parents[1]

# The one list that stays, and why: reducer/run/zygote_server.py runs in the user's interpreter with
# the standard library only (reducer never imports bot), and _HEAVY is not the target list but
# the libraries whose import may initialise CUDA before a fork (vllm, xformers, flash_attn...).
EXCEPTIONS = {("reducer/run/zygote_server.py", "_HEAVY")}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _assigned_name(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    return None


def hard_coded(source: str, names: frozenset[str], repos: frozenset[str]) -> list[tuple[int, str | None, str]]:
    """(line, the module-level name it is assigned to, what) for every repository string, every
    comma-separated string naming two or more of ``names``, and every literal collection naming
    two or more that are at least a quarter of its strings (a long word list that happens to hold
    "transformers" and "datasets", like the scrubber's folder words, is not a list of the stack);
    docstrings aside."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    listed = re.compile(rf"\b({'|'.join(map(re.escape, sorted(names)))})\b`?\s*(?:,|/| and | or )\s*`?"
                        rf"\b({'|'.join(map(re.escape, sorted(names)))})\b")
    found = []
    for stmt in tree.body:
        owner = _assigned_name(stmt)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                low = node.value.lower()
                hits = [r for r in repos if re.search(rf"(?<![\w.-]){re.escape(r)}(?![\w.-])", low)]
                if hits:
                    found.append((node.lineno, owner, f"repository {hits[0]!r}"))
                m = listed.search(node.value)
                if m and m.group(1) != m.group(2):
                    found.append((node.lineno, owner, f"a list in a string: {m.group(0)!r}"))
            elems = None
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                elems = node.elts
            elif isinstance(node, ast.Dict):
                elems = [k for k in node.keys if k is not None]
            if elems is not None:
                strings = [e.value for e in elems if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                members = {s for s in strings if s in names}
                if len(members) >= 2 and 4 * len(members) >= len(strings):
                    found.append((node.lineno, owner, f"a list of stack packages {sorted(members)}"))
    return found


def _sources() -> list[Path]:
    return [p for pkg in ("bot", "reducer") for p in sorted((ROOT / pkg).rglob("*.py"))
            if (ROOT / "bot" / "targets") not in p.parents]


def _names() -> tuple[frozenset[str], frozenset[str]]:
    # The stack's packages, the foundation's aside: "torch" alone beside "bitsandbytes" is how
    # env.json names its own sections, not a list of targets.
    stack = [t for t in registry.targets() if not t.foundation]
    names = frozenset(n for t in stack for n in (*t.packages, *t.dists))
    return names, frozenset(t.repo.lower() for t in registry.targets())


def test_no_list_of_targets_outside_bot_targets() -> None:
    names, repos = _names()
    problems, excepted = [], set()
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for line, owner, what in hard_coded(path.read_text(encoding="utf-8"), names, repos):
            if (rel, owner) in EXCEPTIONS:
                excepted.add((rel, owner))
                continue
            problems.append(f"{rel}:{line}: {what}")
    assert problems == [], "derive these from bot.targets instead:\n" + "\n".join(problems)
    # The exception is still needed (else it should go from the list).
    assert excepted == EXCEPTIONS


def test_the_check_finds_what_it_looks_for() -> None:
    names, repos = _names()
    bad = ('STACK = ("transformers", "peft")\n'
           'REPOS = {"trl": 1, "peft": 2}\n'
           'def f():\n    return "see huggingface/peft#12"\n'
           'HELP = "default: transformers, peft as locked"\n')
    assert [(line, owner) for line, owner, _ in hard_coded(bad, names, repos)] == [
        (1, "STACK"), (2, "REPOS"), (4, None), (5, "HELP")]
    fine = ('"""Docstrings may say huggingface/peft and transformers, peft."""\n'
            'ONE = ("peft", "numpy")\nWORD = "transformers-fork"\nPATH = "~/.cache/huggingface/hub"\n'
            'FOLDERS = {"transformers", "peft", ' + ", ".join(f'"w{i}"' for i in range(9)) + '}\n')
    assert hard_coded(fine, names, repos) == []


def test_bot_targets_imports_nothing_of_bot_outside_itself() -> None:
    for path in sorted((ROOT / "bot" / "targets").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for mod in mods:
                assert not mod.startswith("bot.") or mod.startswith("bot.targets"), f"{path.name} imports {mod}"


def test_every_module_in_bot_targets_is_a_registered_target() -> None:
    modules = {p.stem for p in (ROOT / "bot" / "targets").glob("*.py")} - {"__init__", "base", "registry", "sysinfo"}
    assert modules == {t.key for t in registry.targets()}
    assert [t.key for t in registry.targets()][:4] == ["transformers", "peft", "accelerate", "bitsandbytes"]


def test_the_derived_lists() -> None:
    # versions swaps every target but the foundation (torch: a build per accelerator), trl included.
    assert registry.versions_packages()[:5] == ("transformers", "peft", "accelerate", "bitsandbytes", "trl")
    assert registry.versions_shown()[0] == "torch"
    assert registry.git_repos()["trl"] == registry.get_target("trl").repo and "torch" not in registry.git_repos()
    assert registry.ordered_packages()[0] == "torch"
    assert set(registry.probe_imports()) <= set(registry.ordered_packages())


@pytest.fixture
def widgetlib():
    target = registry.register(Target(
        key="widgetlib", repo="example-org/widgetlib", packages=("widgetlib",), distributions=("widget-lib",),
        fields=(textarea("what-happened", "What happened", required=True),),
        render_system_info=lambda env: "widgetlib", probe_import=True, env_packages=("widget-extras",)))
    try:
        yield target
    finally:
        registry.unregister("widgetlib")


def test_a_registered_target_is_in_every_derived_list(widgetlib: Target) -> None:
    from bot.env.probe import probe_args, probe_sections, stack_names
    from bot.rerun.lock import github_repos, versions_stack
    from bot.rerun.versions import shown

    assert "widget-lib" in versions_stack() and "widget-lib" in shown()
    assert github_repos()["widget-lib"] == "example-org/widgetlib"
    assert "widget-lib" in stack_names()
    args = probe_args()
    assert "widget-lib" in args["--stack"].split(",") and "widget-extras" in args["--packages"].split(",")
    assert "import:widgetlib" in probe_sections()
    assert registry.repo_of_package("widgetlib") == "example-org/widgetlib"
    assert "widgetlib" in registry.owner_packages()
