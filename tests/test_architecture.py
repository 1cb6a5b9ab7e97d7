"""The one-way rule (DESIGN.md, "Stages and the one-way rule") and module size, checked on the
source: an import graph built with ``ast`` from every module of the package (imports inside
functions included), which must have no cycle and no import from a stage to a later one.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Stage of each package prefix; the longest prefix wins. A module may import its own stage and
#: the ones below it, never a higher one. ``collectors`` and ``npu`` are siblings and must not
#: import each other (the emulator hands its events to a collector its caller gives it).
STAGES = {
    "hermes.errors": 0, "hermes.findings": 0, "hermes.registry": 0, "hermes.trace": 0,
    "hermes.devices": 0, "hermes.hooks": 0, "hermes.sample_traces": 0, "hermes._version": 0,
    "hermes.collectors": 1, "hermes.npu": 1,
    "hermes.analyzers": 2,
    "hermes.rules": 3, "hermes.advisor": 3, "hermes.whatif": 3,
    "hermes.report": 4, "hermes.check": 4, "hermes.diff": 4, "hermes.pipeline": 4,
    "hermes.query": 4,
    "hermes.commands": 5, "hermes.cli": 5, "hermes.mcp": 5,
}
SIBLINGS = {frozenset({"hermes.collectors", "hermes.npu"})}
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 100
#: A module or function over the limit states why, in a comment at its top.
REASON = "# long:"


def modules() -> dict[str, Path]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    out: dict[str, Path] = {}
    for pkg, folder in cfg["package-dir"].items():
        base = ROOT / folder
        for f in base.rglob("*.py"):
            rel = f.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([pkg, *parts])
            if name not in out or len(pkg) > len(_owner(out[name], cfg)):
                out[name] = f
    return out


def compiled_modules() -> set[str]:
    """The C extensions setup.py builds: they import nothing of Hermes, so an import of one is
    no edge (``from pkg import _c`` would otherwise read as an import of ``pkg``)."""
    import re

    return set(re.findall(r'Extension\(\s*"([\w.]+)"', (ROOT / "setup.py").read_text()))


def _owner(path: Path, cfg: dict) -> str:
    best = ""
    for pkg, folder in cfg["package-dir"].items():
        if (ROOT / folder) in path.parents and len(pkg) > len(best):
            best = pkg
    return best


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def graph() -> dict[str, set[str]]:
    mods = modules()
    compiled = compiled_modules()
    g: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                # ``from pkg import sub`` depends on the module pkg.sub when there is one, else
                # on pkg (a name defined there)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            if isinstance(node, ast.ImportFrom):
                targets = [t for t, a in zip(targets, node.names, strict=True)
                           if f"{t}.{a.name}" not in compiled]
            for t in targets:
                if not t.startswith("hermes") or t in compiled:
                    continue
                r = _resolve(t, mods)
                if r and r != m and not (r == "hermes" and t != "hermes"):
                    g[m].add(r)
    return g


def stage(m: str) -> tuple[str, int] | None:
    best = None
    for p, s in STAGES.items():
        if (m == p or m.startswith(p + ".")) and (best is None or len(p) > len(best[0])):
            best = (p, s)
    return best


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in g:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(g[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_graph_sees_the_package():
    g = graph()
    assert "hermes.analyzers.engine.run" in g and "hermes.advisor" in g
    assert "hermes.findings" in g["hermes.analyzers.engine.base"]       # a plain import is seen
    assert "hermes.analyzers.engine.run" in g["hermes.pipeline"]


def test_compiled_modules_are_known():
    assert {"hermes.trace._columns", "hermes.collectors.importers.nsys._scan"} <= \
        compiled_modules()


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_up_the_stages():
    bad = []
    for a, bs in graph().items():
        sa = stage(a)
        for b in bs:
            sb = stage(b)
            if sa is None or sb is None:
                continue
            if sb[1] > sa[1] or frozenset({sa[0], sb[0]}) in SIBLINGS:
                bad.append(f"{a} -> {b}")
    assert bad == []


def test_every_module_has_a_stage():
    assert [m for m in graph() if m != "hermes" and stage(m) is None] == []


def _long_functions(tree: ast.Module, lines: list[str]) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            head = "\n".join(lines[node.lineno - 1: node.lineno + 3])
            if n > MAX_FUNCTION_LINES and REASON not in head:
                out.append((node.name, n))
    return out


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_and_functions_are_small_or_say_why(name):
    f = modules()[name]
    text = f.read_text()
    lines = text.splitlines()
    if len(lines) > MAX_MODULE_LINES:
        assert REASON in "\n".join(lines[:30]), \
            f"{f} has {len(lines)} lines: split it or say why at its top ({REASON} ...)"
    assert _long_functions(ast.parse(text), lines) == []


# ------------------------------------------------------------------ analyses keep to their rooms
#: Folders of ``hermes.analyzers`` that are not analyses: the engine (how analyses run) and the
#: shared frame helpers. Every other top-level module or folder there is one analysis (family).
NOT_ANALYSES = ("engine", "common")


def analysis_of(module: str) -> str | None:
    """The analysis (family) a module of ``hermes.analyzers`` belongs to; None for the engine,
    the shared helpers, the package itself and any module outside it."""
    if not module.startswith("hermes.analyzers."):
        return None
    top = module.split(".")[2]
    return None if top in NOT_ANALYSES else top


def cross_analysis_imports(g: dict[str, set[str]]) -> list[str]:
    """Imports from one analysis into another, and from the engine or the shared helpers into
    any analysis: what one analysis needs of another comes through its declared ``needs``."""
    bad = []
    for a, bs in g.items():
        fa = analysis_of(a)
        inside = a.startswith("hermes.analyzers.")
        for b in bs:
            fb = analysis_of(b)
            if fb is not None and inside and fa != fb:
                bad.append(f"{a} -> {b}")
    return sorted(bad)


def test_no_analysis_imports_another():
    assert cross_analysis_imports(graph()) == []


def test_the_room_check_catches_a_cross_import():
    g = {"hermes.analyzers.cpu": {"hermes.analyzers.critical_path.analysis",
                                  "hermes.analyzers.common.names"},
         "hermes.analyzers.common.spans": {"hermes.analyzers.io"},
         "hermes.analyzers.computation.roofline": {"hermes.analyzers.computation.opvec"},
         "hermes.whatif.replay": {"hermes.analyzers.critical_path.graph"}}
    assert cross_analysis_imports(g) == [
        "hermes.analyzers.common.spans -> hermes.analyzers.io",
        "hermes.analyzers.cpu -> hermes.analyzers.critical_path.analysis"]


# ------------------------------------------------------------------ no private coupling
def private_uses(name: str, tree: ast.Module, mods: set[str]) -> list[str]:
    """Uses of another module's ``_private`` names in module ``name``: ``from M import _x``
    and ``alias._x`` where ``alias`` is an imported module. Modules themselves may be
    imported by any name (``_launch``, the console script's; a compiled ``_lanes``): what a
    module keeps private are the names inside it."""
    aliases: dict[str, str] = {}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in mods:
                    aliases[a.asname or a.name.split(".")[0]] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in mods:  # a module (a ``_private`` one is its package's own file)
                    aliases[a.asname or a.name] = sub
                elif a.name.startswith("_") and not a.name.startswith("__") and \
                        node.module.startswith(("hermes", "tests")) and node.module != name:
                    out.append(f"{name}: from {node.module} import {a.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.attr.startswith("_") and not node.attr.startswith("__") and \
                node.value.id in aliases and aliases[node.value.id] != name:
            out.append(f"{name}: {aliases[node.value.id]}.{node.attr}")
    return sorted(set(out))


def _test_modules() -> dict[str, Path]:
    return {".".join(f.relative_to(ROOT).with_suffix("").parts): f
            for f in (ROOT / "tests").rglob("*.py")}


def compiled_modules() -> set[str]:
    """Module names of the C extensions (a ``NAME.c`` beside the package's modules)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    out = set()
    for pkg, folder in cfg["package-dir"].items():
        for f in (ROOT / folder).rglob("*.c"):
            out.add(".".join([pkg, *f.relative_to(ROOT / folder).with_suffix("").parts]))
    return out


def test_no_module_uses_another_modules_private_names():
    mods = modules()
    everything = {**mods, **_test_modules()}
    names = set(mods) | set(_test_modules()) | compiled_modules()
    bad = [u for m, f in everything.items()
           for u in private_uses(m, ast.parse(f.read_text(), str(f)), names)]
    assert bad == []


def test_the_private_check_catches_both_forms():
    src = ("from hermes.analyzers.critical_path import graph as cg\n"
           "from hermes.analyzers.communication.rank import _P2P, COLUMNS\n"
           "import hermes.analyzers.engine.run as run\n"
           "from hermes.analyzers.critical_path import lanes\n"
           "x = cg._shortest(1) + cg.edges(2) + run._reduce(3) + lanes._lanes\n")
    mods = {"hermes.analyzers.critical_path.graph", "hermes.analyzers.communication.rank",
            "hermes.analyzers.engine.run", "hermes.whatif.chains",
            "hermes.analyzers.critical_path.lanes", "hermes.analyzers.critical_path._lanes"}
    assert private_uses("hermes.whatif.chains", ast.parse(src), mods) == [
        "hermes.whatif.chains: from hermes.analyzers.communication.rank import _P2P",
        "hermes.whatif.chains: hermes.analyzers.critical_path.graph._shortest",
        "hermes.whatif.chains: hermes.analyzers.critical_path.lanes._lanes",
        "hermes.whatif.chains: hermes.analyzers.engine.run._reduce"]
    inside = "from hermes.analyzers.critical_path import _lanes\n"
    assert private_uses("hermes.analyzers.critical_path.lanes", ast.parse(inside), mods) == []


#: packages whose ``__init__`` only re-exports (their logic lives in named modules)
REEXPORT_ONLY = ("hermes.whatif", "hermes.advisor", "hermes.rules")


def logic_in(tree: ast.Module) -> list[str]:
    """What a package ``__init__`` holds besides its docstring, imports and ``__all__``: one
    entry per other statement (a function, a class, an assignment, any code)."""
    out = []
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
                "__all__"]:
            continue
        out.append(f"line {node.lineno}: {type(node).__name__}")
    return out


@pytest.mark.parametrize("name", REEXPORT_ONLY)
def test_these_packages_only_re_export(name):
    path = modules()[name]
    assert path.name == "__init__.py"
    assert logic_in(ast.parse(path.read_text())) == []


def test_the_re_export_check_catches_logic():
    src = '"""doc."""\nfrom a import b\n__all__ = ["b"]\nX = 1\ndef f():\n    pass\n'
    assert logic_in(ast.parse(src)) == ["line 4: Assign", "line 5: FunctionDef"]
