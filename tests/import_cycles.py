"""Import cycles between our modules, counting imports inside functions too:
`python -m tests.import_cycles` lists them.

A module imports another when any `import` or `from … import` statement names it, at any
depth of the file (a function-level import hides a cycle from Python, not from a reader).
`from pkg import name` counts as importing `pkg.name` when that is a module, else `pkg`
(so a package re-exporting its own modules is no cycle by itself).
Each strongly connected group of two or more modules is one cycle. Imports under
`if TYPE_CHECKING:` are skipped: they never run.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("governance", "traces", "qualification", "specs", "artifacts", "numfmt")
SKIPPED_PARTS = {"migrations", "tests", "bench", "__pycache__"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT, apps: tuple[str, ...] = APPS) -> dict[str, Path]:
    found = {}
    for app in apps:
        for path in sorted((root / app).rglob("*.py")):
            if not SKIPPED_PARTS & set(path.relative_to(root).parts):
                found[module_name(path, root)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_modules(tree: ast.AST, name: str, is_package: bool, known) -> set[str]:
    """Every one of the `known` modules an import statement in `tree` names."""
    targets = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                base_parts = package[: len(package) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in known else base)
        stack.extend(ast.iter_child_nodes(node))
    return (targets & set(known)) - {name}


def import_graph(root: Path = ROOT, apps: tuple[str, ...] = APPS) -> dict[str, set[str]]:
    """Each of our modules → the set of our modules it imports."""
    found = modules(root, apps)
    return {
        name: _imported_modules(
            ast.parse(path.read_text(), filename=str(path)),
            name,
            path.name == "__init__.py",
            found,
        )
        for name, path in found.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def main() -> int:
    found = cycles(import_graph())
    for group in found:
        print(" ↔ ".join(group))
    print(f"{len(found)} import cycles (counting function-level imports).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
