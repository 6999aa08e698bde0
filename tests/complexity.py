"""Functions over a cyclomatic complexity of 15 (radon), outside the pure `analysis/` and
`formats/` packages, migrations, tests and bench: `python -m tests.complexity` lists them.

Report-only in `make lint` until the count reaches 0; `tests/governance/test_complexity.py`
keeps the count from growing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from radon.complexity import cc_visit

LIMIT = 15
ROOT = Path(__file__).resolve().parent.parent
APPS = ("governance", "traces", "qualification", "specs", "artifacts", "numfmt")
SKIPPED_PARTS = {"analysis", "formats", "migrations", "tests", "bench", "__pycache__"}


@dataclass(frozen=True)
class Complex:
    path: str
    line: int
    name: str
    complexity: int

    def __str__(self) -> str:
        return f"{self.complexity:3d}  {self.path}:{self.line}  {self.name}"


def source_files(root: Path = ROOT) -> list[Path]:
    files = []
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            if not SKIPPED_PARTS & set(path.relative_to(root).parts):
                files.append(path)
    return files


def over_limit(root: Path = ROOT, limit: int = LIMIT) -> list[Complex]:
    """Every function and method whose complexity is over `limit`, the worst first."""
    found = []
    for path in source_files(root):
        # cc_visit lists each function and method once (classes too, which are skipped);
        # closures are counted in the function around them.
        for block in cc_visit(path.read_text()):
            if not hasattr(block, "methods") and block.complexity > limit:
                found.append(
                    Complex(
                        path=str(path.relative_to(root)),
                        line=block.lineno,
                        name=block.fullname,
                        complexity=block.complexity,
                    )
                )
    return sorted(found, key=lambda c: (-c.complexity, c.path, c.line))


def main() -> int:
    found = over_limit()
    for entry in found:
        print(entry)
    print(f"{len(found)} functions over cyclomatic complexity {LIMIT} (report only).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
