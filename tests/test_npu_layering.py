"""The emulated runtime is a clean lower stage: no import cycle inside ``hermes/npu`` (package
faces and imports inside functions included) and nothing imported from above it."""

from __future__ import annotations

import ast
from pathlib import Path

import hermes.npu

NPU = Path(hermes.npu.__file__).parent
#: what the emulator may import of Hermes besides itself (DESIGN.md, "Stages and the one-way rule")
ALLOWED = ("hermes.trace", "hermes.errors", "hermes.findings", "hermes.registry",
           "hermes.devices", "hermes.hooks")


def _modules() -> dict[str, Path]:
    out = {}
    for f in NPU.rglob("*.py"):
        parts = list(f.relative_to(NPU).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["hermes.npu", *parts])] = f
    return out


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import statement stands."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            found.update(f"{base}.{a.name}" for a in node.names)
            found.add(base)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for target in _imports(name, path):
            while target and target not in mods:  # "pkg.mod.Name" -> the module "pkg.mod"
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                deps.add(target)
        graph[name] = deps
    return graph


def test_npu_imports_only_the_ground_floor() -> None:
    bad = []
    for name, path in _modules().items():
        for target in _imports(name, path):
            if target.partition(".")[0] != "hermes" or target.startswith("hermes.npu"):
                continue
            if not any(target == a or target.startswith(a + ".") for a in ALLOWED):
                bad.append(f"{name} -> {target}")
    assert not bad, bad


def test_no_import_cycle_in_npu() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (cycle := visit(d)) is not None:
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m)
            assert cycle is None, " -> ".join(cycle)
