"""The shape of the code cannot rot back: dependencies point one way.

Reads the project's own imports with `ast` (function-level imports included) and fails on any
cycle, between packages (actors/session, actors/tools, serve_apps/routes...) and between modules.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("actors", "serve_apps", "vision", "clients")
# Shared foundations sit at the bottom: they import nothing else of ours but the store's models.
FOUNDATIONS = "actors.common"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in TOPS:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _parse(path: Path) -> ast.AST:
    # CPython 3.11.7 can raise "AST constructor recursion depth mismatch" (gh-106905) when
    # another thread used the ast module at the same moment; parsing again is unaffected.
    for _ in range(2):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError:
            continue
    return ast.parse(path.read_text(), str(path))


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Our modules this one imports, anywhere in the file."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(_parse(path)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            names = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {module: _imports(module, path, known) for module, path in known.items()}


def package_of(module: str) -> str:
    """actors.session.loop -> actors.session; serve_apps.routes.memory -> serve_apps.routes;
    a top-level module (actors.settings) is a package of its own."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("actors", "serve_apps") and len(parts) > 1 else parts[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
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


def _package_graph(graph: dict[str, set[str]]) -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    packages: dict[str, set[str]] = defaultdict(set)
    example: dict[tuple[str, str], str] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = package_of(module), package_of(target)
            if a != b:
                packages[a].add(b)
                example.setdefault((a, b), f"{module} imports {target}")
    return packages, example


def test_no_import_cycle_between_packages() -> None:
    packages, example = _package_graph(_graph())
    problems = []
    for component in cycles(packages):
        edges = [example[(a, b)] for a in component for b in sorted(packages[a]) if b in component]
        problems.append(f"{' <-> '.join(component)}: " + "; ".join(edges))
    assert problems == []


def test_no_import_cycle_between_modules() -> None:
    assert cycles(_graph()) == []


def test_foundations_import_no_domain_package() -> None:
    graph = _graph()
    wrong = sorted(f"{module} imports {target}" for module, targets in graph.items()
                   if module.startswith(FOUNDATIONS) for target in targets
                   if not target.startswith(FOUNDATIONS))
    assert wrong == []


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    """The checks above could pass by finding nothing; this one shows they would not."""
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(planted) == [["a", "b", "c"]]
    packages, _ = _package_graph({"actors.tools.x": {"actors.session.y"}, "actors.session.y": {"actors.tools.z"},
                                  "actors.tools.z": set()})
    assert cycles(packages) == [["actors.session", "actors.tools"]]


def family_prefixes(files: list[str], packages: set[str]) -> dict[str, list[str]]:
    """Modules of one folder named `<family>_<part>.py` that belong in a `<family>/` subpackage:
    a prefix shared by three modules or more, or the name of a subpackage beside them."""
    by_prefix: dict[str, list[str]] = defaultdict(list)
    for name in files:
        stem = name.removesuffix(".py")
        if "_" in stem.strip("_"):
            by_prefix[stem.split("_", 1)[0]].append(name)
    return {prefix: sorted(names) for prefix, names in by_prefix.items()
            if prefix and (len(names) >= 3 or prefix in packages)}


def test_families_live_in_subpackages_not_behind_name_prefixes() -> None:
    """autonomy/, inspect/ and mcp/ were once autonomy_*.py (x7), inspect_*.py (x6) and
    mcp_*.py (x5) beside everything else: a family grows in its own subpackage."""
    found = {}
    for folder in sorted({p.parent for top in ("actors", "serve_apps", "vision") for p in (ROOT / top).rglob("*.py")}):
        files = [p.name for p in folder.glob("*.py") if p.name != "__init__.py"]
        packages = {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
        prefixed = family_prefixes(files, packages)
        if prefixed:
            found[str(folder.relative_to(ROOT))] = prefixed
    assert found == {}
    assert (ROOT / "actors/scheduler/autonomy/__init__.py").exists() and (ROOT / "actors/tools/mcp/client.py").exists()


def test_the_family_rule_sees_a_prefix_family() -> None:
    assert family_prefixes(["mcp_client.py", "mcp_streams.py", "mcp_resolve.py", "hub.py"], set()) == {
        "mcp": ["mcp_client.py", "mcp_resolve.py", "mcp_streams.py"]}
    assert family_prefixes(["inspect_docs.py", "hub.py"], {"inspect"}) == {"inspect": ["inspect_docs.py"]}
    assert family_prefixes(["call_store.py", "calls.py", "telegram_loop.py"], set()) == {}
