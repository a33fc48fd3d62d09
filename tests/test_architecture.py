"""The layout's promises: the import floors of docs/ARCHITECTURE.md (read from the source with ``ast``), the
runtime never importing the training package, validating a method loading nothing, and the "add a verifier"
example of docs/ARCHITECTURE.md working as written."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_tiny_pair

from spec_core.engine import generate
from spec_core.methods import parse_method
from spec_core.verifiers import VERIFIERS

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = [
    "spec_core.engine",
    "spec_core.models",
    "spec_core.policies",
    "spec_core.verifiers",
    "spec_core.drafters",
    "spec_core.heads",
    "spec_core.methods",
    "spec_core.analysis.bench",
    "visuals.views",
]


def test_the_runtime_imports_nothing_from_train():
    code = (
        f"import sys, importlib; [importlib.import_module(m) for m in {RUNTIME!r}]; "
        "import spec_core.drafters.block.runtime, spec_core.drafters.feature, spec_core.drafters.standalone; "
        "bad = sorted(m for m in sys.modules if m.startswith('spec_core.train')); print(bad); sys.exit(bool(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


# -- the import floors, read from the source ---------------------------------------------------------------


def _module_files() -> dict[str, Path]:
    """Every module of spec_core, visuals and app.py, by dotted name."""
    files = [*ROOT.glob("spec_core/**/*.py"), *ROOT.glob("visuals/**/*.py"), ROOT / "app.py"]
    names = {}
    for path in files:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


MODULES = _module_files()


def _imports(name: str, import_time_only: bool = False) -> set[str]:
    """The modules ``name`` imports (a ``from a import b`` of a module ``a.b`` counts as ``a.b``), third-party ones
    included; ``import_time_only`` leaves out the imports inside functions, which run on a call."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            type_only = isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)  # never runs
            if import_time_only and (
                type_only or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            ):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: from the package up
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([child.module] if child.module else []))
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in child.names if f"{base}.{alias.name}" in MODULES)
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_runtime_imports_nothing_from_train_in_any_function():
    """Not even lazily: every module but the tools (analysis), the training package and the command line."""
    runtime = [
        m
        for m in MODULES
        if not any(_within(m, p) for p in ("spec_core.analysis", "spec_core.train")) and m != "spec_core.__main__"
    ]
    assert "spec_core.engine" in runtime and "visuals.views" in runtime and "app" in runtime
    bad = {m: sorted(i for i in _imports(m) if _within(i, "spec_core.train")) for m in runtime}
    assert not {m: i for m, i in bad.items() if i}


def test_the_engine_holds_one_loop():
    """No drafter-name branch: a token tree is a drafter behind the protocol and a registered verifier's rule, so
    the loop never names it (not even in a comment)."""
    assert "tree" not in (ROOT / "spec_core" / "engine.py").read_text().lower()


def test_train_imports_nothing_from_analysis():
    """What training and the tools share (the evaluation suite, one item's run) lives below both."""
    train = [m for m in MODULES if _within(m, "spec_core.train")]
    assert train
    bad = {m: sorted(i for i in _imports(m) if _within(i, "spec_core.analysis")) for m in train}
    assert not {m: i for m, i in bad.items() if i}


def test_visuals_draw_and_run_nothing():
    """Views draw events and tables: no tool that runs the engine (spec_core.analysis), no Gradio (ui/ wires it)."""
    views = [m for m in MODULES if _within(m, "visuals")]
    assert views
    bad = {m: sorted(i for i in _imports(m) if _within(i, "spec_core.analysis") or _within(i, "gradio")) for m in views}
    assert not {m: i for m, i in bad.items() if i}


def test_one_cost_model():
    """Every speed prediction prices rounds with spec_core.cost_model: no second copy of the formula elsewhere."""
    users = [m for m in MODULES if "spec_core.cost_model" in _imports(m)]
    for module in ("spec_core.lane_speed", "spec_core.replay", "spec_core.analysis.costs", "spec_core.precision"):
        assert module in users, module


def test_live_takes_nothing_from_the_benchmark():
    assert not {i for i in _imports("spec_core.live") if _within(i, "spec_core.analysis.bench")}


def test_no_import_cycle_at_import_time():
    """The imports that run when a module is imported (not those inside functions) form no cycle among spec_core,
    visuals and app.py (a strongly connected component of more than one module)."""
    graph = {m: {i for i in _imports(m, import_time_only=True) if i in MODULES and i != m} for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    assert not cycles


def test_parsing_a_method_loads_no_weights(monkeypatch):
    import spec_core.assets as assets

    def refuse(*args, **kwargs):
        raise AssertionError("parsing a method name loaded an asset")

    monkeypatch.setattr(assets, "load_asset", refuse)
    for name in ["fixed:4", "heuristic", "confidence:0.4", "block:dpace", "fixed:2+lossless", *_learned_names()]:
        assert parse_method(name).kind == "speculative"


def _learned_names() -> list[str]:
    from spec_core.policies import POLICIES

    return [n for n, fam in (("pacer", POLICIES), ("diversed", VERIFIERS)) if n in fam]


def _example() -> str:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    match = re.search(r"<!-- example: add-a-verifier -->\s*```python\n(.*?)```", text, re.S)
    assert match, "the worked example is missing from docs/ARCHITECTURE.md"
    return match.group(1)


@pytest.fixture
def topk_registered():
    before = dict(VERIFIERS)
    exec(compile(_example(), "docs/ARCHITECTURE.md", "exec"), {})
    yield VERIFIERS["topk"]
    VERIFIERS.clear()
    VERIFIERS.update(before)


def test_the_add_a_verifier_example_runs(topk_registered):
    pair = make_tiny_pair(draft="feature")
    ar = generate(pair, "speculative decoding", "ar", max_new_tokens=30)
    strict = generate(pair, "speculative decoding", "fixed:3+topk:1", max_new_tokens=30)
    assert strict.token_ids == ar.token_ids  # K = 1 at temperature 0 is the greedy rule
    loose = generate(pair, "speculative decoding", "fixed:3+topk:8", max_new_tokens=30)
    assert loose.stats.acceptance_rate > strict.stats.acceptance_rate  # more of the target's top tokens pass
    with pytest.raises(Exception, match="topk:K"):
        parse_method("fixed:3+topk:0")
