"""Which shipped DIVERSED head ``diversed`` verifies with at a temperature: one head per band of training
temperatures, each read from its card (``spec_core.heads.ensemble.head_for``); no model pair."""

from __future__ import annotations

import json

import pytest

from spec_core.core.assets import HEADS_DIR
from spec_core.heads import ensemble
from spec_core.heads.ensemble import DEFAULT_HEAD, ShippedHead, card_head, diversed_heads, head_for


def write_card(directory, name: str, grid: list[float] | None, drafter: str = "default", **extra) -> None:
    training = {"temperature_grid": grid} if grid is not None else {"temperature": 0.0}
    card = {"kind": "diversed-ensemble-head", "name": name, "drafter": drafter, "training": training, **extra}
    (directory / f"{name}.json").write_text(json.dumps(card))


@pytest.fixture
def bands(tmp_path):
    """The greedy head (its card predates the grid: training.temperature 0), a band-wide sampled head, a
    low-band one, a head for a block drafter and a PACER card, which is no DIVERSED head."""
    write_card(tmp_path, "diversed", None)
    write_card(tmp_path, "diversed-sampled", [0.1, 0.4, 0.7, 1.0], rule="sampled")
    write_card(tmp_path, "diversed-sampled-low", [0.1, 0.4], rule="sampled")
    write_card(tmp_path, "diversed-dpace", [0.7], drafter="block:dpace", rule="sampled")
    (tmp_path / "pacer-feature.json").write_text(json.dumps({"kind": "pacer-head", "name": "pacer-feature"}))
    return diversed_heads(tmp_path)


def test_the_heads_and_their_bands_come_from_the_cards(bands):
    by_name = {h.name: h for h in bands}
    assert set(by_name) == {"diversed", "diversed-sampled", "diversed-sampled-low", "diversed-dpace"}
    assert by_name["diversed"] == ShippedHead("diversed", "default", "argmax", 0.0, 0.0)
    assert by_name["diversed-sampled-low"].serves == "temperatures 0.1–0.4"
    assert by_name["diversed"].serves == "temperature 0" and by_name["diversed-dpace"].serves == "temperature 0.7"


@pytest.mark.parametrize(
    ("temperature", "name"),
    [
        (0.0, "diversed"),  # greedy: the head trained under the argmax rule
        (0.1, "diversed-sampled-low"),  # both bands cover it: the narrower, the band's own head
        (0.25, "diversed-sampled-low"),
        (0.4, "diversed-sampled-low"),
        (0.7, "diversed-sampled"),  # only the wide band covers it
        (1.0, "diversed-sampled"),
        (0.05, "diversed-sampled-low"),  # below every band: the nearest (a tie, so the narrower)
        (1.5, "diversed-sampled"),  # above every band: the nearest
    ],
)
def test_diversed_picks_the_head_whose_band_covers_the_temperature(bands, temperature, name):
    assert head_for(temperature, heads=bands).name == name


def test_a_drafter_only_sees_its_own_heads(bands):
    assert head_for(0.1, "block:dpace", bands).name == "diversed-dpace"
    assert head_for(0.0, "block:dpace", bands).name == DEFAULT_HEAD  # none of its own: refused when built
    assert head_for(0.7, heads=[h for h in bands if h.rule != "sampled"]).name == DEFAULT_HEAD  # no sampled head


def test_a_card_without_a_grid_or_rule_gets_them_from_its_temperature():
    assert card_head("x", {"training": {"temperature": 0.7}}) == ShippedHead("x", "default", "sampled", 0.7, 0.7)
    assert card_head("y", {}).rule == "argmax"


def test_the_shipped_cards():
    """The heads in assets/heads: the greedy one at T = 0, a sampled one for every T > 0, each inside its band
    (or the nearest one)."""
    heads = diversed_heads(HEADS_DIR)
    assert head_for(0.0, heads=heads).name == DEFAULT_HEAD
    for t in (0.1, 0.4, 0.7, 1.0):
        chosen = head_for(t, heads=heads)
        assert chosen.rule == "sampled" and chosen.low <= t <= chosen.high, (t, chosen)
    assert ensemble.shipped_head(1.0) == "diversed-sampled"
