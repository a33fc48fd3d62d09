"""Issue #44, item 3: each part's words live on its class, and the views read them from the registries.

A drafter, policy or verifier class carries its rule text (``rule``), its tooltip sentence (a verifier's
``reason``) and its glossary rows (``glossary``; :mod:`spec_core.core.words`). Two promises, read from the sources
and from the page's words:

- no module under ``visuals/`` or ``ui/`` (nor ``app.py``) tests a method family by name or a draft's source by
  its tag: no ``== "lookup"``, ``startswith("pacer")``, ``"diversed" in name`` or ``source == ...`` against a
  registered family's prefix (a view's prefixes come from the part's class: ``PacerLength.prefix``);
- a verifier defined only here (one class, one registry line) that says ``lossless = False`` is explained as
  lossy in the token's tooltip, the lane's header, the rule in force and the glossary, with no other edit.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import ClassVar

import pytest
from test_visuals import ev

from spec_core import verifiers
from spec_core.core import words
from spec_core.drafters import DRAFTERS
from spec_core.drafters.lookup import LookupDraft
from spec_core.engine.methods import PEERS, is_lossy
from spec_core.policies import POLICIES
from spec_core.verifiers import VERIFIERS
from visuals import glossary, tokens, views

ROOT = Path(__file__).resolve().parents[2]
TESTS_BY_NAME = ("startswith", "endswith", "count", "removeprefix", "index", "find")


def _family_names() -> set[str]:
    """Every name a part registers (and ``ar``, the peers), and the draft sources their drafters write."""
    sources = {str(getattr(cls, "source", "")) for cls in DRAFTERS.values()} - {""}
    return {*DRAFTERS, *POLICIES, *VERIFIERS, "ar", *PEERS, *sources}


def _names_a_family(node: ast.AST, names: set[str]) -> bool:
    """A string literal that is a family's name, or a method written from one (``"fixed:4"``, ``"pacer+x"``), or
    a tuple / list / set holding one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        head = node.value.partition(":")[0].partition("+")[0].partition("@")[0]
        return node.value in names or (head in names and head != node.value)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_family(e, names) for e in node.elts)
    return False


def family_tests(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of each comparison or string test of a method family (or a draft source) by its name."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found = any(_names_a_family(x, names) for x in (node.left, *node.comparators))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TESTS_BY_NAME:
            found = any(_names_a_family(a, names) for a in node.args)
        else:
            found = False
        if found:
            hits.append((node.lineno, ast.unparse(node)))
    return hits


def test_the_scan_finds_every_way_of_testing_a_family_by_name():
    names = _family_names()
    caught = [
        'ok = method.startswith("pacer")',
        'ok = head == "lookup"',
        'ok = "diversed" in name',
        'ok = span.source == "lookup"',
        'ok = m != "ar"',
        'ok = family in ("static", "lenient")',
        'ok = name == "fixed:4"',
        'ok = sources.count("lookup")',
        'ok = heads[:1] == ("fixed",)',
    ]
    for line in caught:
        assert family_tests(line, names), line
    fine = ["ok = family == PacerLength.prefix", 'ok = kind == "accepted"', "ok = is_copied(span.source)", 'x = "ar"']
    for line in fine:
        assert not family_tests(line, names), line


def test_no_view_or_ui_module_tests_a_family_by_name():
    names = _family_names()
    files = sorted([*ROOT.glob("visuals/**/*.py"), *ROOT.glob("ui/**/*.py"), ROOT / "app.py"])
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {code}"
        for path in files
        for line, code in family_tests(path.read_text(), names)
    ]
    assert not bad, "read the part's class (its words, its prefix) instead of its name:\n" + "\n".join(bad)


# -- every registered part has its words ------------------------------------------------------------------


def test_every_part_carries_its_own_words():
    for registry in (POLICIES, VERIFIERS):
        for prefix, cls in registry.items():
            assert "rule" in vars(cls) or any("rule" in vars(b) for b in cls.__mro__[1:-1]), prefix
            assert words.rule(cls, 0.0) and words.rule(cls, 0.7), prefix
            assert words.glossary(cls), prefix
    for prefix, cls in DRAFTERS.items():
        if getattr(cls, "named", False):
            assert words.rule(cls, 0.0) and words.glossary(cls), prefix
    rows = dict(glossary.glossary_entries())
    for registry in (DRAFTERS, POLICIES, VERIFIERS):  # the glossary is the classes' rows, not a hand-kept copy
        for cls in registry.values():
            for term, text in words.glossary(cls):
                assert rows[term] == text


@pytest.mark.parametrize("prefix", sorted(VERIFIERS))
def test_a_recovered_tokens_header_says_lossy_exactly_for_a_lossy_verifier(prefix):
    cls = VERIFIERS[prefix]
    assert ("lossy" in words.recovered_title(cls)) == (not cls.lossless)
    assert ("keeps the output exactly the target's" in words.recovers(cls)) == cls.lossless


def test_lookup_and_hybrid_are_explained_by_the_cost_policy_not_a_fixed_window():
    for method in ("lookup", "hybrid"):
        rule = views.explain(method, 0.0)
        assert "cost policy" in rule and "fixed window" not in rule, rule
        assert "prompt lookup" in rule
    assert "fixed window" in views.explain("fixed:4", 0.0) and "Plain decoding" == views.explain("ar", 0.0)[:14]


def test_a_copied_token_is_said_so_by_its_drafter():
    span = tokens.TokenSpan("x", "accepted", 0, 1, p=0.4, q=1.0, source=LookupDraft.source)
    assert any(text == LookupDraft.source_note for _, text in tokens.hover_lines(span))
    assert "tok-copied" in tokens.span_html(span)
    model = tokens.TokenSpan("x", "accepted", 0, 1, p=0.4, q=0.5, source="model")
    assert "tok-copied" not in tokens.span_html(model)


# -- a toy lossy verifier, defined only here --------------------------------------------------------------


class KeepAllVerifier:
    """``keepall``: keeps every draft (a toy; it writes none of its own words)."""

    prefix: ClassVar[str] = "keepall"
    examples: ClassVar[tuple[str, ...]] = ()
    lossless = False
    needs_target_hidden = False

    @classmethod
    def parse(cls, arg):
        return None

    @classmethod
    def build(cls, params, pair=None):
        return cls()

    def verify(self, inputs, sampling, generator):  # pragma: no cover - the views never run it
        raise NotImplementedError


@pytest.fixture
def with_keepall(monkeypatch):
    monkeypatch.setitem(verifiers.VERIFIERS, "keepall", KeepAllVerifier)  # the one registry line
    yield


def test_a_toy_lossy_verifier_is_explained_as_lossy_everywhere(with_keepall):
    method = "fixed:2+keepall"
    assert is_lossy(method)
    lane = [
        ev(0, ["The", " sky"], 2, " is", method=method),  # both kept, then the bonus token
        ev(1, [" blue", " ."], 0, " grey", method=method),  # the first rejected: a recovered token
    ]
    for temperature in (0.0, 0.7):
        spans = tokens.token_spans(lane, temperature)
        kept = next(s for s in spans if s.kind == "accepted")
        assert "lossy" in kept.why and "keepall" in kept.why and "greedy rule" not in kept.why, kept.why
        recovered = next(s for s in spans if s.kind == "recovered")
        assert recovered.why.startswith("Lossy verifier") and "exactly the target's" not in recovered.why
        assert "lossy" in recovered.title and recovered.title != words.LOSSLESS_RECOVERED_TITLE
    tip = tokens.tokens_html(lane, temperature=0.0)
    assert "(lossy)" in tip and "the target's own, at the first rejection" not in tip

    header = glossary.lane_header(method)
    assert "spec-badge-lossy" in header and "lossy: the keepall verifier" in header

    rule = views.explain(method, 0.7)
    assert "keepall" in rule and "lossy" in rule and "min(1, p(x)/q(x))" not in rule

    rows = dict(glossary.glossary_entries())
    assert rows["keepall"].startswith("lossy") and "keepall" in rows["lossy"]
    assert "<dt>keepall</dt>" in glossary.glossary_html()


def test_a_toy_lossless_verifier_is_not_called_lossy(monkeypatch):
    class Exact(KeepAllVerifier):
        prefix: ClassVar[str] = "exactly"
        lossless = True

    monkeypatch.setitem(verifiers.VERIFIERS, "exactly", Exact)
    method = "fixed:2+exactly"
    spans = tokens.token_spans([ev(0, ["a", "b"], 1, "c", method=method)], 0.0)
    assert "greedy rule" in spans[0].why and "lossy" not in spans[1].title
    assert "spec-badge-lossy" not in glossary.lane_header(method)
    assert "exactly" not in dict(glossary.glossary_entries())["lossy"]
