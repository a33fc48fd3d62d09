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
import torch
from conftest import make_tiny_pair

from spec_core.engine.loop import generate
from spec_core.engine.methods import parse_method
from spec_core.verifiers import VERIFIERS

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = [
    "spec_core.engine.loop",
    "spec_core.model.models",
    "spec_core.policies",
    "spec_core.verifiers",
    "spec_core.drafters",
    "spec_core.heads",
    "spec_core.engine.methods",
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
    """Every module of spec_core, visuals, ui and app.py, by dotted name."""
    files = [f for top in ("spec_core", "visuals", "ui") for f in ROOT.glob(f"{top}/**/*.py")] + [ROOT / "app.py"]
    names = {}
    for path in files:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


MODULES = _module_files()


def _imports(name: str, import_time_only: bool = False) -> set[str]:
    """The modules ``name`` imports (a ``from a import b`` of a module ``a.b`` counts as ``a.b``, not as the
    package ``a``), third-party ones included, inside functions too; imports under ``if TYPE_CHECKING:`` never run
    and are left out; ``import_time_only`` also leaves out the imports inside functions, which run on a call."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            type_only = isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)  # never runs
            if type_only or (
                import_time_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            ):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: from the package up
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([child.module] if child.module else []))
                submodules = {f"{base}.{alias.name}" for alias in child.names} & MODULES.keys()
                if len(submodules) < len(child.names):  # a name that is not a submodule: the package itself
                    found.add(base)
                found.update(submodules)
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
    assert "spec_core.engine.loop" in runtime and "visuals.views" in runtime and "app" in runtime
    bad = {m: sorted(i for i in _imports(m) if _within(i, "spec_core.train")) for m in runtime}
    assert not {m: i for m, i in bad.items() if i}


def test_the_engine_holds_one_loop():
    """One loop, by structure: ``Generation._rounds`` is the only loop; no subclass anywhere overrides it (or the
    ``rounds`` that drives it); the engine reaches the parts only through their registries and protocols (it
    imports no family's module), and no registered family's name appears in its code as a string or a name."""
    from spec_core.drafters import DRAFTERS
    from spec_core.engine.loop import Generation
    from spec_core.policies import POLICIES

    subclasses = [m for m in MODULES if MODULES[m].read_text().count("(Generation)")]
    for module in subclasses:
        for node in ast.walk(ast.parse(MODULES[module].read_text())):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Generation" for b in node.bases):
                overridden = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                assert not overridden & {"_rounds", "rounds", "run"}, f"{module}.{node.name} replaces the loop"
    assert "_rounds" in vars(Generation)
    allowed = {"spec_core.drafters", "spec_core.policies", "spec_core.verifiers"}  # the registries and protocols
    families = [m for m in MODULES if any(m.startswith(p + ".") for p in allowed) and not m.endswith(".base")]
    assert families and not _imports("spec_core.engine.loop") & set(families)
    tree = ast.parse((ROOT / "spec_core" / "engine" / "loop.py").read_text())
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body and isinstance(n.body[0], ast.Expr)
    }
    words = {n.value.lower() for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)} | {
        n.id.lower() for n in ast.walk(tree) if isinstance(n, ast.Name)
    }
    words -= {n.value.lower() for n in ast.walk(tree) if id(n) in docstrings}
    prefixes = {p for p in (*DRAFTERS, *POLICIES, *VERIFIERS) if p not in ("default", "ar")}
    assert not words & prefixes, sorted(words & prefixes)


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


def test_one_cost_model(monkeypatch):
    """Every price comes from ``CostProfile.round_ms``: double it, and every consumer's number moves (a second
    copy of the formula anywhere would leave its number where it was)."""
    from spec_core.core import precision
    from spec_core.core.cost_model import CostProfile
    from spec_core.core.lane_speed import breakeven
    from spec_core.policies.pacer_rule import PacerParams
    from spec_core.policies.pacer_tuning import best_threshold

    profile = CostProfile(widths=(1, 2, 4, 8), target_ms=(50.0, 54.0, 60.0, 86.0), draft_ms=4.0, engine_ms=1.0)
    profile = CostProfile(**{**profile.__dict__, "extra": {"acceptance": 0.6}})
    pair = make_tiny_pair(draft="feature")
    events = generate(pair, "speculative decoding", "fixed:3", max_new_tokens=24).events
    per_round = torch.rand(40, 8, generator=torch.Generator().manual_seed(0))
    gamma, accepted = torch.full((40,), 8), torch.randint(0, 8, (40,), generator=torch.Generator().manual_seed(1))

    def numbers() -> dict[str, float]:
        t, best = best_threshold(per_round, gamma, accepted, PacerParams(), profile)
        return {
            "precision.predicted_tokens_per_s": precision.predicted_tokens_per_s(profile)[0],
            "CostProfile.replay (policy replays, pacer t=auto, analyze preverifier)": best["speedup"],
            "lane_speed.breakeven": breakeven(events, profile)[0],
            "CostProfile.events_speedup (a lane's predicted speedup)": profile.events_speedup(events),
            "CostProfile.best_window (auto, the lens)": profile.best_window(0.6)[1],
        }

    before = numbers()
    real = CostProfile.round_ms
    monkeypatch.setattr(CostProfile, "round_ms", lambda self, *a, **k: 2 * real(self, *a, **k))
    after = numbers()
    unmoved = [k for k in before if before[k] == pytest.approx(after[k])]
    assert not unmoved, f"these numbers do not come from CostProfile.round_ms: {unmoved}"


def test_live_takes_nothing_from_the_benchmark():
    assert not {i for i in _imports("spec_core.serve.live") if _within(i, "spec_core.analysis.bench")}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return cycles


def test_no_import_cycle_at_import_time():
    """The imports that run when a module is imported (not those inside functions) form no cycle among spec_core,
    visuals, ui and app.py (a strongly connected component of more than one module)."""
    graph = {m: {i for i in _imports(m, import_time_only=True) if i in MODULES and i != m} for m in MODULES}
    assert not _cycles(graph)


def test_parsing_a_method_loads_no_weights(monkeypatch):
    import spec_core.core.assets as assets

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


# -- every package on a floor of docs/ARCHITECTURE.md ------------------------------------------------------------


def _floors() -> dict[str, int]:
    """Package → floor, read from the floors table of docs/ARCHITECTURE.md."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text.split("<!-- floors:", 1)[1].split("-->", 1)[1].strip().split("\n\n", 1)[0]
    floors: dict[str, int] = {}
    for line in table.splitlines()[2:]:  # after the header and its rule
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for package in re.findall(r"`([^`]+)`", cells[2]):
            assert package not in floors, f"{package} is on two floors"
            floors[package] = int(cells[0])
    assert floors, "the floors table is missing from docs/ARCHITECTURE.md"
    return floors


def _package(module: str) -> str:
    """A module's package: ``spec_core.X`` for everything under ``spec_core/X/``; a module at the top of
    ``spec_core`` (its ``__init__`` and ``__main__``), ``visuals``, ``ui`` and ``app`` are their own."""
    parts = module.split(".")
    return parts[0] if parts[0] != "spec_core" else ".".join(parts[:2])


def _package_graph() -> dict[str, dict[str, list[str]]]:
    """Package → the packages it imports → the module imports behind each arrow (inside functions too)."""
    graph: dict[str, dict[str, list[str]]] = {_package(m): {} for m in MODULES}
    for m in MODULES:
        for i in _imports(m):
            if i in MODULES and _package(i) != _package(m):
                graph[_package(m)].setdefault(_package(i), []).append(f"{m} → {i}")
    return graph


def test_spec_core_keeps_two_modules_at_its_top():
    """Every module lives in the package of its floor; the top holds the front door and the command line."""
    assert sorted(p.name for p in (ROOT / "spec_core").glob("*.py")) == ["__init__.py", "__main__.py"]


def test_every_package_has_a_floor_and_no_arrow_climbs():
    """Counting the imports inside functions (type-only ones excepted): no package imports one on a higher floor."""
    floors = _floors()
    graph = _package_graph()
    assert not sorted(set(graph) - set(floors)), "packages without a floor in docs/ARCHITECTURE.md"
    assert not sorted(set(floors) - set(graph)), "floors table names a package that does not exist"
    climbs = {
        f"{a} (floor {floors[a]}) → {b} (floor {floors[b]})": why
        for a, arrows in graph.items()
        for b, why in arrows.items()
        if floors[b] > floors[a]
    }
    assert not climbs


def test_no_import_cycle_between_packages():
    graph = {a: set(arrows) for a, arrows in _package_graph().items()}
    assert not _cycles(graph)


def test_no_import_cycle_counting_imports_inside_functions():
    """The same search among modules as at import time, with every import that can run (type-only ones excepted)."""
    graph = {m: {i for i in _imports(m) if i in MODULES and i != m} for m in MODULES}
    assert not _cycles(graph)


def test_the_app_reaches_the_engine_through_serve_not_the_tools():
    """``spec_core.analysis`` is the command line's tools only: the app, its tabs and the views import the app's
    backend (``spec_core.serve``) and the floors below it, never a tool."""
    front = [m for m in MODULES if _package(m) in ("app", "ui", "visuals")]
    bad = {m: sorted(i for i in _imports(m) if _within(i, "spec_core.analysis")) for m in front}
    assert not {m: i for m, i in bad.items() if i}


def test_spec_core_imports_no_view_no_plot_and_no_gradio():
    core = [m for m in MODULES if _within(m, "spec_core")]
    bad = {
        m: sorted(i for i in _imports(m) if any(_within(i, p) for p in ("visuals", "ui", "plotly", "gradio")))
        for m in core
    }
    assert not {m: i for m, i in bad.items() if i}


# -- imports at the top ----------------------------------------------------------------------------------------------

MAX_FUNCTION_IMPORTS = 40


def _function_imports() -> list[tuple[str, int, str]]:
    """(file, line, source line) of every import in ``spec_core/`` below the module's top level (inside a function,
    a class or an ``if``), except those under ``if TYPE_CHECKING:``, which never run."""
    found = []
    for path in sorted(ROOT.glob("spec_core/**/*.py")):
        rel, lines = path.relative_to(ROOT).as_posix(), path.read_text().splitlines()

        def visit(node: ast.AST, top: bool, rel: str = rel, lines: list[str] = lines) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)) and not top:
                    found.append((rel, child.lineno, " ".join(lines[child.lineno - 1 : child.end_lineno])))
                visit(child, False)

        visit(ast.parse("\n".join(lines)), True)
    return found


def test_imports_sit_at_the_top_unless_they_keep_a_heavy_dependency_off_start_up():
    """The import graph reads from the modules' tops. An import stays in a function only to keep a heavy or
    optional dependency off start-up (transformers' modeling code, gradio_client, ZeroGPU's ``spaces``, …), and
    says so in a comment on its line; at most :data:`MAX_FUNCTION_IMPORTS` of them."""
    found = _function_imports()
    assert len(found) <= MAX_FUNCTION_IMPORTS, "\n".join(f"{f}:{n}: {s}" for f, n, s in found)
    silent = [f"{f}:{n}: {s}" for f, n, s in found if "#" not in s]
    assert not silent, "a function-level import without its reason on the line:\n" + "\n".join(silent)
