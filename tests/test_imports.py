"""The import graph of grpo_research runs one way: no cycle (imports inside functions count),
no private name taken from another module, and the config and method registry load without torch."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = "grpo_research"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted((ROOT / PKG).rglob("*.py"))}


def resolve(name: str) -> str | None:
    """The grpo_research module that `import name` loads (a name inside a module: that module)."""
    while name and name not in MODULES:
        name = name.rsplit(".", 1)[0] if "." in name else ""
    return name or None


def imports_of(mod: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import statement anywhere in `mod`."""
    path = MODULES[mod]
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.startswith(PKG)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rsplit(".", 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            if not base.startswith(PKG):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub, [], node.lineno) if sub in MODULES else (base, [a.name], node.lineno))
    return out


def graph() -> dict[str, dict[str, int]]:
    """mod -> {module it loads: line}. Importing a.b.c loads the packages a.b too, unless the
    importer lives inside them (then they are already loading)."""
    g: dict[str, dict[str, int]] = {}
    for mod in MODULES:
        edges: dict[str, int] = {}
        for target, _, line in imports_of(mod):
            r = resolve(target)
            if r is None:
                continue
            parts = r.split(".")
            for i in range(2, len(parts) + 1):
                dep = ".".join(parts[:i])
                inside = mod == dep or mod.startswith(dep + ".")
                if dep in MODULES and not inside:
                    edges.setdefault(dep, line)
        g[mod] = edges
    return g


def cycles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    for v in g:
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_sees_a_function_level_cycle():
    g = {"a": {"b": 1}, "b": {"c": 3}, "c": {"a": 7}, "d": {"a": 2}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_cycle_inside_grpo_research():
    g = graph()
    found = cycles(g)
    detail = [" ; ".join(f"{m} -> {[d for d in g[m] if d in comp]}" for m in comp) for comp in found]
    assert not found, "import cycles: " + " | ".join(detail)


def test_no_private_name_imported_from_another_module():
    bad = []
    for mod in MODULES:
        for target, names, line in imports_of(mod):
            r = resolve(target) or target
            owner = r.rsplit(".", 1)[0] if MODULES.get(r, Path()).name != "__init__.py" else r
            private_module = any(part.startswith("_") for part in r.split(".")[1:])
            if private_module and not (mod == owner or mod.startswith(owner + ".")):
                bad.append(f"{mod}:{line} imports private module {r}")
            for n in names:
                if n.startswith("_") and r != mod:
                    bad.append(f"{mod}:{line} imports private name {n} from {r}")
    assert not bad, "\n".join(bad)


def test_config_and_method_registry_load_without_torch():
    code = ("import sys, grpo_research.config, grpo_research.methods; "
            "cfg = grpo_research.config.RunConfig(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# ---------------------------------------------------------------- the direction between packages
# Entry points at the top import what sits below; nothing imports an entry point or a trainer
# except what drives training, and the pure tensor functions import nothing of the product.
ONLY_IMPORTED_BY = {
    "trainers": {"cli"},
    "cli": set(),
    "pipeline": {"cli"},
    "hpo": {"cli", "pipeline"},
}
IMPORTS_ONLY = {"algorithms": {"registry"}, "registry": set(), "errors": set()}


def package(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph(g: dict[str, dict[str, int]]) -> dict[str, dict[str, str]]:
    """package -> {package it imports: 'module:line' of the first such import}."""
    out: dict[str, dict[str, str]] = {}
    for mod, deps in g.items():
        a = package(mod)
        out.setdefault(a, {})
        for dep, line in deps.items():
            b = package(dep)
            if a != b:
                out[a].setdefault(b, f"{mod}:{line}")
    return out


def direction_problems(pg: dict[str, dict[str, str]]) -> list[str]:
    nodes = set(pg) | {b for deps in pg.values() for b in deps}
    bad = [f"package cycle: {' <-> '.join(c)}" for c in cycles({p: dict(pg.get(p, {})) for p in nodes})]
    for a, deps in pg.items():
        for b, where in deps.items():
            if b in ONLY_IMPORTED_BY and a not in ONLY_IMPORTED_BY[b]:
                bad.append(f"{where} imports {b} (only {sorted(ONLY_IMPORTED_BY[b]) or 'nothing'} may)")
            if a in IMPORTS_ONLY and b not in IMPORTS_ONLY[a]:
                bad.append(f"{where}: {a} may import only {sorted(IMPORTS_ONLY[a]) or 'nothing of the product'}, not {b}")
    return bad


def test_direction_checker_sees_a_back_edge():
    pg = {"evaluation": {"trainers": "grpo_research.evaluation.generate:45"}, "trainers": {"evaluation": "x:1"},
          "algorithms": {"config": "grpo_research.algorithms.loss:3"}}
    bad = direction_problems(pg)
    assert any("evaluation.generate:45 imports trainers" in b for b in bad)
    assert any("package cycle" in b for b in bad) and any("algorithms may import only" in b for b in bad)
    assert direction_problems({"trainers": {"evaluation": "x:1"}, "cli": {"trainers": "y:2"}}) == []


def test_packages_depend_one_way():
    pg = package_graph(graph())
    assert {"trainers", "evaluation", "rollout", "algorithms"} <= set(pg)  # the graph sees the packages
    assert "evaluation" in pg["trainers"]  # trainers may import evaluation (the final evaluation)
    assert direction_problems(pg) == []
