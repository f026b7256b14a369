"""A custom import-linter contract: no first-party import inside a function,
where it could dodge the layers or an import cycle unseen.

Django's start-up wiring (``AppConfig.ready``) is allowed, and so are the
places ``allowed`` names (``module.function``), each for a reason said next to
it in pyproject.toml. Run by ``lint-imports`` with the other contracts.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from importlinter import Contract, ContractCheck, fields, output


class NoLocalImportsContract(Contract):
    type_name = "no_local_imports"

    packages = fields.ListField(subfield=fields.StringField())
    allowed = fields.ListField(subfield=fields.StringField(), required=False, default=[])

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        first_party = set(self.packages)  # type: ignore[call-overload]
        allowed = set(self.allowed)  # type: ignore[call-overload]
        found: list[str] = []
        for module in sorted(graph.modules):
            if module.split(".")[0] not in first_party or ".migrations." in module:
                continue
            path = _source(module)
            if path is None:
                continue
            tree = ast.parse(path.read_text(), str(path))
            for where, imported, line in _local_imports(tree, first_party):
                if where.rsplit(".", 1)[-1] == "ready" or f"{module}.{where}" in allowed:
                    continue
                found.append(f"{module}.{where} (l.{line}) imports {imported}")
        return ContractCheck(kept=not found, metadata={"found": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["found"]:
            output.print_error(f"- {line}")
        output.new_line()
        output.print(
            "Import at module level; if a cycle stops that, break the cycle (register, or "
            "queue a task by name). A lazy import that is right says why under `allowed`."
        )


ROOT = Path(__file__).resolve().parents[1]
# Where a package lives when it is not at the top of the checkout.
HOMES = {"berth_cli": ROOT / "cli"}


def _source(module: str) -> Path | None:
    """The module's file, found without importing it (importing would need
    Django's settings)."""
    parts = module.split(".")
    base = HOMES.get(parts[0], ROOT).joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _local_imports(tree: ast.Module, first_party: set[str]) -> list[tuple[str, str, int]]:
    """(function's qualified name in its module, what it imports, line)."""
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, scope: list[str], in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = in_function or not isinstance(child, ast.ClassDef)
                visit(child, [*scope, child.name], inner)
                continue
            if in_function and isinstance(child, ast.ImportFrom | ast.Import):
                names = (
                    [child.module or ""]
                    if isinstance(child, ast.ImportFrom)
                    else [a.name for a in child.names]
                )
                for name in names:
                    if child.__dict__.get("level", 0) == 0 and name.split(".")[0] in first_party:
                        found.append((".".join(scope), name, child.lineno))
            visit(child, scope, in_function)

    visit(tree, [], False)
    return found
