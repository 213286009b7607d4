"""The house's shape in numbers (issue 33's before/after table), read from the source tree.

    .venv/bin/python benchmarks/house.py          # one JSON line
    .venv/bin/python benchmarks/house.py --list   # and what each count is made of

Counted over actors/, serve_apps/ and vision/ (the product, not tests or benchmarks):
- `routers`: `include_router` calls, and how many of them give a prefix or tags; `app_module`:
  the modules that build `FastAPI(...)`;
- `any_handles`: parameters and attributes typed `Any` whose name says they hold a deployment or
  actor handle (`*handle*`, `agent`, `registry`, `hub`, `router`, `perception`, `gateway`, ...);
- `errors_outside_tree`: exception classes that do not descend from `IriisError`;
- `string_event_compares`: comparisons of an event's `.type` with a string or a tuple of them;
- `long_functions`: functions over 80 lines;
- `inner_imports`: imports inside a function with no `# lazy: <reason>` comment on their line (the
  rule is imports at the top of the module); `lazy_imports`: imports inside a function that are
  lazy on purpose (a heavy or optional package, Ray kept out of a fast CLI) and say why with
  `# lazy: <reason>` on the import's own line;
- `long_files`: files over 400 lines.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("actors", "serve_apps", "vision")
HANDLE_NAME = re.compile(r"handle|^agent$|registry$|^hub$|^router$|perception|gateway|^actor$|deployment")
# A deliberately lazy import says why on its own line: `import x  # lazy: x costs ~1 s to import`.
LAZY = re.compile(r"#\s*lazy:\s*\S")
BUILTIN_EXCEPTIONS = {name for name in dir(builtins)
                      if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), BaseException)}


def _files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _is_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return text in ("Any", "Any | None", "Optional[Any]", "typing.Any")


def _base_names(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]


def measure() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {k: [] for k in (
        "routers", "routers_with_prefix_or_tags", "app_module", "any_handles", "errors_outside_tree",
        "string_event_compares", "long_functions", "inner_imports", "lazy_imports", "long_files")}
    classes: dict[str, tuple[list[str], str]] = {}
    defined: list[tuple[str, str]] = []   # (name, where) of every class, duplicates included
    for path in _files():
        rel = str(path.relative_to(ROOT))
        source = path.read_text()
        if source.count("\n") > 400:
            found["long_files"].append(f"{rel} ({source.count(chr(10))})")
        lines = source.splitlines()
        tree = ast.parse(source)
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name.endswith("include_router"):
                    found["routers"].append(where)
                    if any(k.arg in ("prefix", "tags") for k in node.keywords):
                        found["routers_with_prefix_or_tags"].append(where)
                elif name == "FastAPI":
                    found["app_module"].append(where)
            elif isinstance(node, ast.ClassDef):
                classes[node.name] = (_base_names(node), where)
                defined.append((node.name, where))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno and node.end_lineno - node.lineno + 1 > 80:
                    found["long_functions"].append(f"{where} {node.name} ({node.end_lineno - node.lineno + 1})")
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                for arg in arguments:
                    if HANDLE_NAME.search(arg.arg) and _is_any(arg.annotation):
                        found["any_handles"].append(f"{where} {node.name}({arg.arg})")
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        text = lines[inner.lineno - 1:inner.end_lineno or inner.lineno]
                        lazy = any(LAZY.search(line) for line in text)
                        found["lazy_imports" if lazy else "inner_imports"].append(f"{rel}:{inner.lineno}")
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, (ast.Attribute, ast.Name)):
                name = node.target.attr if isinstance(node.target, ast.Attribute) else node.target.id
                if HANDLE_NAME.search(name) and _is_any(node.annotation):
                    found["any_handles"].append(f"{where} {name}")
            elif isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                typed = any(isinstance(s, ast.Attribute) and s.attr == "type" and isinstance(s.value, ast.Name) for s in sides)
                strings = any(isinstance(s, ast.Constant) and isinstance(s.value, str)
                              or isinstance(s, (ast.Tuple, ast.Set, ast.List)) and s.elts
                              and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in s.elts)
                              or isinstance(s, ast.Name) and s.id.isupper()
                              for s in sides)
                if typed and strings:
                    found["string_event_compares"].append(where)
    # Nested functions count once per enclosing function too: keep each import line once.
    found["inner_imports"] = sorted(set(found["inner_imports"]))
    found["lazy_imports"] = sorted(set(found["lazy_imports"]))

    def exception_root(name: str, seen: frozenset[str] = frozenset()) -> str | None:
        """'iriis' for a class under IriisError, 'other' for another exception, None for none."""
        if name == "IriisError":
            return "iriis"
        if name in BUILTIN_EXCEPTIONS:
            return "other"
        if name not in classes or name in seen:
            return None
        roots = {exception_root(b, seen | {name}) for b in classes[name][0]}
        return "iriis" if "iriis" in roots else "other" if "other" in roots else None

    for name, where in sorted(defined, key=lambda item: item[1]):
        if name != "IriisError" and exception_root(name) == "other":
            found["errors_outside_tree"].append(f"{where} {name}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print what each count is made of")
    args = parser.parse_args()
    found = measure()
    if args.list:
        for key, items in found.items():
            print(f"# {key}: {len(items)}")
            for item in items:
                print("  " + item)
    print(json.dumps({"benchmark": "house", **{k: len(v) for k, v in found.items()}}))


if __name__ == "__main__":
    main()
