"""Issue #36, "smaller slips" a new user met at 1400×900: rejected drafts that spilled into the next lane, a
step-through card that stayed on the old step while its radio showed the new one, and Pareto labels piled on top
of each other. The HTML, the style sheet and the figure asserted as data; tests/browser/test_browser.py and
tests/browser/test_browser_tabs.py check the same three on the page.
"""

from __future__ import annotations

from pathlib import Path

from test_visuals import ev

from visuals import tokens

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
