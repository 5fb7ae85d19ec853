"""The package's import graph (imports at any depth of a file, lazy ones included): the
measurement and training code form no import cycle, and the engine never imports measurement."""
import ast
import os

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "eagle_core")


def _module(path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def import_graph() -> dict[str, set[str]]:
    """eagle_core module -> the eagle_core modules it imports (at any depth of the file)."""
    graph = {}
    for d, _, files in os.walk(ROOT):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            mod = _module(path)
            package = mod if f == "__init__.py" else mod.rsplit(".", 1)[0]
            deps = set()
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.ImportFrom):
                    base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                    target = ".".join(base + ([node.module] if node.module else []))
                    names = [f"{target}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    target, names = None, [a.name for a in node.names]
                else:
                    continue
                for name in names + ([target] if node.__class__ is ast.ImportFrom and node.module else []):
                    while name and name.startswith("eagle_core"):
                        if name in graph or os.path.exists(os.path.join(os.path.dirname(ROOT), *name.split(".")) + ".py") \
                                or os.path.isdir(os.path.join(os.path.dirname(ROOT), *name.split("."))):
                            break
                        name = name.rsplit(".", 1)[0]
                    if name and name.startswith("eagle_core") and name != mod:
                        deps.add(name)
            graph[mod] = deps
    return graph


def test_no_import_cycles():
    """Over the whole package: the engine, its kernels, measurement and training."""
    graph = import_graph()
    assert "eagle_core.bench.costmodel" in graph and "eagle_core.bench.cost_report" in graph
    assert "eagle_core.kernels.attention" in graph and "eagle_core.target" in graph
    mine = set(graph)
    graph = {m: {d for d in deps if d in mine} for m, deps in graph.items() if m in mine}
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for d in graph.get(m, ()):
            if m.startswith(d + "."):
                continue  # a submodule importing its own package's __init__
            assert state.get(d) != 1, "import cycle: " + " -> ".join(stack + [m, d])
            if d not in state:
                visit(d, stack + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_engine_never_imports_measurement():
    """The engine imports no bench code; training reads prompts through bench.prompts only."""
    for mod, deps in import_graph().items():
        bench = {d for d in deps if d.startswith("eagle_core.bench")}
        if mod.startswith("eagle_core.bench"):
            continue
        if mod.startswith("eagle_core.train"):
            assert bench <= {"eagle_core.bench.prompts"}, (mod, bench)
        else:
            assert not bench, (mod, bench)
