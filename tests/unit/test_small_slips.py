"""Issue #36, "smaller slips" a new user met at 1400×900: rejected drafts that spilled into the next lane, a
step-through card that stayed on the old step while its radio showed the new one, and Pareto labels piled on top
of each other. The HTML, the style sheet and the figure asserted as data; tests/browser/test_browser.py and
tests/browser/test_browser_tabs.py check the same three on the page.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_visuals import LANE, ev, frame_with

from visuals import menus, stepthrough, tokens

ROOT = Path(__file__).resolve().parents[2]


# -- 1. rejected drafts stay in their lane ---------------------------------------------------------------------


def test_a_run_of_rejected_drafts_can_wrap_inside_its_lane():
    """A rejected draft shows its spaces as "·", so a run of them is one long word: it needs break opportunities
    at its tokens' edges, and a token longer than the lane must break anywhere rather than overflow."""
    e = ev(0, [" the", " quick", " brown", " fox"], 0, " a")
    shown = tokens.tokens_html([e], show_rejected=True)
    assert shown.count("<wbr>") == 2 * 4 and "·quick" in shown
    assert "<wbr>" not in tokens.tokens_html([e])  # emitted text keeps its own spaces as break opportunities
    css = (ROOT / "assets" / "app.css").read_text()
    lane_text = css.split(".spec-tokens {", 1)[1].split("}", 1)[0]
    assert "overflow-wrap: anywhere" in lane_text and "max-width: 100%" in lane_text


# -- 2. the step-through card follows its radio in the browser --------------------------------------------------


def test_the_card_holds_every_step_and_shows_the_one_asked():
    frame = frame_with({"fixed:4": LANE})
    card = stepthrough.frame_card(frame, "fixed:4", 0, "accept")
    assert card.startswith('<div class="spec-steps" data-shown="accept">')
    assert [card.count(f'data-step="{s}"') for s in stepthrough.STEPS] == [1, 1, 1, 1]
    assert stepthrough.round_steps_html(LANE[0], 1).startswith('<div class="spec-steps" data-shown="verify">')
    with pytest.raises(ValueError):
        stepthrough.round_steps_html(LANE[0], "bonus")


def test_the_style_sheet_shows_the_radios_step_without_a_handler():
    css = menus.launch_kwargs()["css"]
    radio = f"#{stepthrough.STEP_RADIO_ID}"
    assert ".spec-steps > .spec-step { display: none; }" in css
    for s in stepthrough.STEPS:
        assert f':root:has({radio} input[value="{s}"]:checked) .spec-steps > .spec-step[data-step="{s}"]' in css
        assert f'.spec-steps[data-shown="{s}"] > .spec-step[data-step="{s}"]' in css  # a browser without :has()
