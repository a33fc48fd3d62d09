"""A method name is parsed once (spec_core/engine/methods.py): everything else reads the :class:`MethodSpec`.

Two promises: no module outside ``methods.py`` splits a method name or checks its prefix by hand (read from the
sources), and the spec says what its readers ask of it (``heads``, ``is_lossy``, a peer's ``window``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spec_core.core.errors import SpecScopeError
from spec_core.engine.methods import is_lossy, parse_method, spec_of

ROOT = Path(__file__).resolve().parents[2]

# What splitting a method name by hand looks like: by its "+" parts, a part's ":" argument, or a family's prefix.
PATTERNS = {
    'split("+")': re.compile(r"""\.split\(\s*["']\+["']"""),
    'split(":")': re.compile(r"""\.split\(\s*["']:["']"""),
    'partition(":")': re.compile(r"""\.r?partition\(\s*["']:["']\s*\)"""),
    "startswith(family)": re.compile(
        r"""\.startswith\(\s*\(?\s*["'](hf-|block|tree|pacer|fixed|lookup|hybrid|cost|static|lenient|diversed|confidence|heuristic)"""
    ),
}

# (file, pattern) → why that use is not about a method name. Keep it tiny; each entry must still be needed.
ALLOWED = {
    ("spec_core/core/types.py", 'partition(":")'): "PartSpec.parse: every part's own FAMILY[:ARG] parse, under methods",
    ("spec_core/core/precision.py", 'split(":")'): "a /proc/cpuinfo line ('model name : ...'), not a method",
    ("spec_core/serve/spec_bench.py", 'partition(":")'): "a suite name (spec-bench:N), not a method",
    ("spec_core/train/copy_gate.py", 'partition(":")'): "a slice of shards (108:), not a method",
}


def _sources() -> list[Path]:
    files = [*ROOT.glob("spec_core/**/*.py"), *ROOT.glob("visuals/**/*.py"), *ROOT.glob("ui/**/*.py"), ROOT / "app.py"]
    return sorted(p for p in files if p != ROOT / "spec_core" / "engine" / "methods.py")


def test_no_module_splits_a_method_name_by_hand():
    found: dict[tuple[str, str], list[str]] = {}
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for what, pattern in PATTERNS.items():
                if pattern.search(line):
                    found.setdefault((rel, what), []).append(f"{rel}:{n}: {line.strip()}")
    bad = [hit for key, hits in found.items() if key not in ALLOWED for hit in hits]
    assert not bad, "read spec_of(name) (spec_core/engine/methods.py) instead of splitting the name:\n" + "\n".join(bad)
    assert not set(ALLOWED) - set(found), f"allow-list entries no longer needed: {sorted(set(ALLOWED) - set(found))}"


NAMES = [  # name, heads, is_lossy
    ("ar", ("ar",), False),
    ("fixed:4", ("fixed",), False),
    ("pacer:b=2,t=0.5", ("pacer",), False),
    ("fixed:4+diversed", ("fixed", "diversed"), True),
    ("static:0.7", ("static",), True),
    ("lenient:0.5", ("lenient",), True),  # (lenient:2 does not parse: L is in (0, 1]; it is among the junk below)
    ("block:dpace", ("block",), False),
    ("tree:nodes=8,depth=3", ("tree",), False),
    ("lookup", ("lookup",), False),
    ("hybrid+fixed:3", ("hybrid", "fixed"), False),
    ("hf-assisted:4", ("hf-assisted",), False),
    ("hf-lookup:10", ("hf-lookup",), False),
    ("pacer@int8", ("pacer",), False),
]


@pytest.mark.parametrize(("name", "heads", "lossy"), NAMES)
def test_the_spec_says_what_its_readers_ask(name, heads, lossy):
    spec = parse_method(name)
    assert spec.heads == heads  # the parts written, in their order; filled-in defaults are not named
    assert spec.is_lossy is lossy and is_lossy(name) is lossy
    assert spec_of(name) == spec and spec_of(name) is spec_of(name)  # cached, the same spec


def test_peer_window_tree_and_precision():
    assert spec_of("hf-assisted:4").window == 4 and spec_of("hf-lookup:10").window == 10
    assert spec_of("hf-ar").window is None and spec_of("fixed:4").window is None
    assert spec_of("tree:nodes=8,depth=3").is_tree and not spec_of("block:dpace").is_tree
    assert spec_of("pacer@int8").precision == "int8" and spec_of("pacer@int8").policy.family == "pacer"
    assert spec_of("fixed:4+static:0.7").verifier.arg == "0.7" and spec_of("fixed:4").verifier.arg == ""


@pytest.mark.parametrize("junk", ["warp:9", "", "fixed:4+warp", "hf-nope", "lenient:2", "pacer@int9"])
def test_a_name_that_does_not_parse_is_neither_lossy_nor_lossless(junk):
    with pytest.raises(SpecScopeError):
        is_lossy(junk)
    with pytest.raises(SpecScopeError):
        spec_of(junk)
