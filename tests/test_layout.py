"""The package's import graph (imports at any depth of a file, lazy ones included): the
measurement and training code form no import cycle, the engine never imports measurement, and the
app (app.py, eagle_app/, viz/) never reaches the benchmark package (eagle_core/bench), which stays
out of the Space."""
import ast
import os

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "eagle_core")


def _module(path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _resolve(name: str) -> str | None:
    """The eagle_core module or package a dotted import name lands in (`pkg.mod.NAME` -> `pkg.mod`)."""
    while name and name.startswith("eagle_core"):
        path = os.path.join(os.path.dirname(ROOT), *name.split("."))
        if os.path.exists(path + ".py") or os.path.isdir(path):
            return name
        name = name.rsplit(".", 1)[0] if "." in name else ""
    return None


def eagle_imports(path: str, package: str = "") -> set[str]:
    """The eagle_core modules a file imports at any depth (`package`: the file's own, for relative imports)."""
    deps = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            names = [f"{target}.{a.name}" for a in node.names] + ([target] if node.module else [])
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        deps |= {m for m in map(_resolve, names) if m}
    return deps


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
            graph[mod] = eagle_imports(path, package) - {mod}
    return graph


def test_no_import_cycles():
    """Over the whole package: the engine, its kernels, measurement and training."""
    graph = import_graph()
    assert "eagle_core.bench.costmodel" in graph and "eagle_core.bench.cost_report" in graph
    assert "eagle_core.cpu.kernels.attention" in graph and "eagle_core.target" in graph
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
    """The engine imports no measurement code (bench/, machine/); machine/ imports nothing from bench/;
    training reads prompts through bench.prompts only."""
    graph = import_graph()
    assert {"eagle_core.machine", "eagle_core.machine.hardware", "eagle_core.machine.timing"} <= set(graph)
    for mod, deps in graph.items():
        bench = {d for d in deps if d.startswith("eagle_core.bench")}
        machine = {d for d in deps if d == "eagle_core.machine" or d.startswith("eagle_core.machine.")}
        if mod.startswith("eagle_core.bench"):
            continue
        if mod.startswith("eagle_core.train"):
            assert bench <= {"eagle_core.bench.prompts"}, (mod, bench)
        elif mod == "eagle_core.machine" or mod.startswith("eagle_core.machine.") or mod == "eagle_core.__main__":
            assert not bench, (mod, bench)  # the command line, a front end as the app is, asks machine its tree
        else:
            assert not bench and not machine, (mod, bench | machine)


def app_sources() -> list[str]:
    """app.py and every module of eagle_app/ and viz/."""
    out = [os.path.join(REPO, "app.py")]
    for top in ("eagle_app", "viz"):
        for d, _, files in os.walk(os.path.join(REPO, top)):
            out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".py")]
    return out


def test_the_app_never_imports_the_benchmark_package():
    """Issue 44: the app takes its hardware measurement from eagle_core.machine; eagle_core/bench (the
    benchmark command lines) is left out of the Space, so nothing the app imports, at any depth of a
    file or through the modules it imports, may be under it."""
    graph = import_graph()
    reached, todo = set(), []
    for path in app_sources():
        direct = eagle_imports(path)
        assert not {m for m in direct if m.startswith("eagle_core.bench")}, (os.path.relpath(path, REPO), direct)
        todo += direct
    while todo:
        m = todo.pop()
        if m not in reached:
            reached.add(m)
            parents = [m.rsplit(".", i)[0] for i in range(1, m.count(".") + 1)]  # their __init__.py run first
            todo += list(graph.get(m, ())) + parents
    assert "eagle_core.machine.hardware" in reached  # the hardware panel's measurement is reached
    assert not sorted(m for m in reached if m.startswith("eagle_core.bench")), "the app reaches eagle_core.bench"


# ---- sizes: short functions, short files, __init__.py files that only hand names on ----------------
REPO = os.path.dirname(ROOT)
SIZED = [os.path.join(REPO, d) for d in ("eagle_core", "viz", "eagle_app", "scripts")] + [os.path.join(REPO, "app.py")]
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 400


def _sources():
    for top in SIZED:
        if os.path.isfile(top):
            yield top
        for d, _, files in os.walk(top):
            for f in sorted(files):
                if f.endswith(".py"):
                    yield os.path.join(d, f)


def test_functions_and_files_are_short():
    long_functions, long_files = [], []
    for path in _sources():
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, os.path.dirname(ROOT))
        if text.count("\n") > MAX_FILE_LINES:
            long_files.append(f"{rel}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert not long_files, f"files over {MAX_FILE_LINES} lines: {long_files}"
    assert not long_functions, f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"


def test_package_inits_only_hand_names_on():
    """An __init__.py holds a docstring, imports and __all__: the code lives in named modules."""
    for path in _sources():
        if os.path.basename(path) != "__init__.py":
            continue
        for node in ast.parse(open(path, encoding="utf-8").read()).body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str)
            imports = isinstance(node, (ast.Import, ast.ImportFrom))
            exports = isinstance(node, (ast.Assign, ast.AugAssign)) and all(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
            assert docstring or imports or exports, \
                f"{os.path.relpath(path, os.path.dirname(ROOT))}:{node.lineno}: {type(node).__name__} in an __init__.py"


# ---- the top level shows the design ---------------------------------------------------------------
def test_app_py_is_the_only_top_level_python_file():
    assert sorted(f for f in os.listdir(REPO) if f.endswith(".py")) == ["app.py"]


def test_nothing_outside_the_tests_imports_them():
    offenders = []
    for path in _sources():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "tests" or n.startswith(("tests.", "conftest")) for n in names):
                offenders.append(f"{os.path.relpath(path, REPO)}:{node.lineno}")
    assert not offenders, offenders


def test_test_files_stay_under_500_lines():
    tests = os.path.join(REPO, "tests")
    long = [f for f in sorted(os.listdir(tests)) if f.endswith(".py")
            and open(os.path.join(tests, f), encoding="utf-8").read().count("\n") > 500]
    assert not long, long


def test_the_engine_shows_its_design_at_the_top():
    """eagle_core's top level holds the loop, tree, verification, trace and settings (at most 12
    modules); the target, the heads and drafting, and the CPU fast path are packages of their own."""
    top = sorted(f for f in os.listdir(ROOT) if f.endswith(".py"))
    assert len(top) <= 12, top
    assert {"decode.py", "tree.py", "verify.py", "trace.py", "config.py"} <= set(top)
    packages = {d for d in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, d, "__init__.py"))}
    assert {"target", "drafting", "cpu", "bench", "train"} <= packages, packages


def _engine_sources():
    for d, _, files in os.walk(ROOT):
        if os.path.relpath(d, ROOT).split(os.sep)[0] in ("bench", "train"):
            continue
        yield from (os.path.join(d, f) for f in sorted(files) if f.endswith(".py"))


def test_the_engine_has_one_switch():
    """The one environment variable that changes what the engine computes is EAGLE_PORTABLE (the
    portable path everywhere); the others it reads say where (its cache), how long (a hub probe) and how
    fast the GGUF-block and float32 products run (EAGLE_QB_TUNING, EAGLE_F32_TUNING: their knobs, which
    change no bit).
    Everything else about the CPU fast path is FastPath, chosen at load."""
    import re

    names = set()
    for path in _engine_sources():
        if os.path.relpath(path, ROOT) == "environment.py":  # the table of every variable, the app's too
            continue
        names |= set(re.findall(r"[\"'](EAGLE_[A-Z0-9_]+)[\"']", open(path, encoding="utf-8").read()))
    # EAGLE_FIXED_TREE: which tree the front ends open with (machine/tree_choice.py), not what a tree computes;
    # EAGLE_QB_TUNING, EAGLE_F32_TUNING: how fast the blocks' and the float32 products run (qtuning.py,
    # ftuning.py), not what they compute
    assert names <= {"EAGLE_PORTABLE", "EAGLE_EXPLAINER_CACHE", "EAGLE_HUB_PROBE_S", "EAGLE_FIXED_TREE",
                     "EAGLE_QB_TUNING", "EAGLE_F32_TUNING"}, names
    assert "EAGLE_PORTABLE" in names


def test_only_the_settings_module_reads_the_environment():
    """Every environment variable is read through eagle_core/environment.py, which checks it; elsewhere
    in the product no os.environ.get / os.getenv / os.environ[...] read (setting one for a child
    process, or passing os.environ on, is not a read). cpu/kernels/build.py's CC is the one left (its
    module belongs to the fast path's seam)."""
    import re

    reads = re.compile(r"os\.environ\.get\(|os\.getenv\(|os\.environ\[")
    offenders = []
    for top in ("eagle_core", "eagle_app", "viz"):
        for d, _, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                path = os.path.join(d, f)
                rel = os.path.relpath(path, REPO)
                if f.endswith(".py") and rel not in (os.path.join("eagle_core", "environment.py"),
                                                      os.path.join("eagle_core", "cpu", "kernels", "build.py")):
                    offenders += [f"{rel}:{i}" for i, line in enumerate(open(path, encoding="utf-8"), 1)
                                  if reads.search(line)]
    offenders += [f"app.py:{i}" for i, line in enumerate(open(os.path.join(REPO, "app.py"), encoding="utf-8"), 1)
                  if reads.search(line)]
    assert not offenders, offenders


def test_nothing_outside_the_fast_path_imports_its_private_names():
    offenders = []
    for path in _sources():
        rel = os.path.relpath(path, REPO)
        if rel.startswith(os.path.join("eagle_core", "cpu") + os.sep):
            continue
        mod = _module(path) if rel.startswith("eagle_core") else ""
        package = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.startswith("eagle_core.cpu") and any(a.name.startswith("_") for a in node.names):
                offenders.append(f"{rel}:{node.lineno}")
    assert not offenders, offenders
