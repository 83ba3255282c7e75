"""The import rules of DESIGN.md ("Direction after the first release"), checked over the source.

1. The agent core (`agent/`) imports no Django app of ours and no `django.db` (models, ORM,
   transactions): what it needs from the apps it gets through the ports in `agent/ports.py`.
2. No import circles among our modules.

Both rules read every `import` statement with `ast`: module-level imports *and* imports inside
functions (a lazy import hides a dependency, it does not remove it). Imports under
`if TYPE_CHECKING:` are left out: they never run. `from pkg import name` counts as an import of
`pkg.name` when that is a module of ours, else of `pkg`. Importing `a.b.c` is an edge to
`a.b.c` only, not to the packages above it (as import-linter counts).
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "sessions_app", "tools_app", "memory_app", "recall_app", "profiles_app", "skills_app", "local_models",
            "navi_site", "notify_app", "telegram_app", "approvals_app")
CORE = "agent"
CORE_MAY_NOT_IMPORT = tuple(p for p in PACKAGES if p != CORE) + ("django.db", "django.contrib", "tools", "tests")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        base = ROOT / package
        if not base.is_dir():
            continue
        for path in base.rglob("*.py"):
            if "migrations" in path.parts:
                continue
            found[_module_name(path)] = path
    return found


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                for child in node.body:
                    lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(module: str, path: Path) -> Iterator[tuple[str, str, int]]:
    """(name, the module as written, line) for every import of `module` (TYPE_CHECKING excluded).

    `name` is what may be a module (`pkg.name` for `from pkg import name`); the module as written
    is what the statement names (`pkg`).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _type_checking_lines(tree)
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                yield f"{base}.{alias.name}", base, node.lineno


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for name, _, _ in imports_of(module, path):
            target = _resolve(name, modules)
            if target and target != module:
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def core_violations() -> list[str]:
    modules = project_modules()
    bad = []
    for module, path in sorted(modules.items()):
        if module != CORE and not module.startswith(CORE + "."):
            continue
        for _, stated, line in imports_of(module, path):
            if any(stated == p or stated.startswith(p + ".") for p in CORE_MAY_NOT_IMPORT):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {stated}")
    return sorted(set(bad))


def test_the_agent_core_imports_no_app_and_no_orm():
    assert core_violations() == [], (
        "agent/ is the core: it may not import an app or django.db. Define a port in agent/ports.py "
        "and let the app register its implementation in AppConfig.ready()."
    )


def test_there_are_no_import_circles():
    assert cycles(import_graph()) == [], (
        "Import circles: break them (tasks call services; services enqueue through their app's "
        "enqueue helpers; shared pieces move down into a module both can import)."
    )


def test_the_checker_sees_a_circle_and_a_core_violation(tmp_path, monkeypatch):
    """The checks can fail: a planted circle and a planted core import are both reported."""
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}
    assert cycles(graph) == [["a.x", "a.y", "a.z"]]

    fake_root = tmp_path
    (fake_root / "agent").mkdir()
    (fake_root / "agent" / "__init__.py").write_text("")
    (fake_root / "agent" / "core.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from sessions_app.models import Session\n"
        "def f():\n    from tools_app.registry import get_registry\n"
        "from django.db import models\n"
    )
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", fake_root)
    assert core_violations() == [
        "agent/core.py:5 imports tools_app.registry",
        "agent/core.py:6 imports django.db",
    ]


if __name__ == "__main__":  # a quick report while refactoring
    for line in core_violations():
        print("core:", line)
    for component in cycles(import_graph()):
        print("circle:", " <-> ".join(component))
