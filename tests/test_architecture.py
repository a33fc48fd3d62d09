"""The layout's promises: the runtime never imports the training package, validating a method loads nothing,
and the "add a verifier" example of docs/ARCHITECTURE.md works as written."""

from __future__ import annotations

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
RUNTIME = ["spec_core.engine", "spec_core.models", "spec_core.policies", "spec_core.verifiers",
           "spec_core.drafters", "spec_core.heads", "spec_core.methods", "spec_core.analysis.bench", "visuals.views"]  # fmt: skip


def test_the_runtime_imports_nothing_from_train():
    code = (f"import sys, importlib; [importlib.import_module(m) for m in {RUNTIME!r}]; "
            "import spec_core.drafters.block.runtime, spec_core.drafters.feature, spec_core.drafters.standalone; "
            "bad = sorted(m for m in sys.modules if m.startswith('spec_core.train')); print(bad); sys.exit(bool(bad))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


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
