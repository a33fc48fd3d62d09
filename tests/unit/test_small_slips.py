"""Issue #36, "smaller slips" a new user met at 1400×900: rejected drafts that spilled into the next lane, a
step-through card that stayed on the old step while its radio showed the new one, and Pareto labels piled on top
of each other. The HTML, the style sheet and the figure asserted as data; tests/browser/test_browser.py and
tests/browser/test_browser_tabs.py check the same three on the page.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest
from test_visuals import LANE, ev, frame_with

from spec_core.serve import sweeps
from visuals import diversed, menus, stepthrough, tokens

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


# -- 3. Pareto labels that do not overlap -------------------------------------------------------------------------

SWEEPS = sorted((ROOT / "assets" / "results").glob("pareto_t*.csv"))
CHAR_PX, LINE_PX = 6.0, 13.0  # a label character's width and a line's height at font size 10, in pixels


def label_boxes(fig, width_px: float = 600.0, height_px: float = 262.0) -> list[tuple[str, tuple]]:
    """Every drawn label's box in pixels (y up) on a plot area of the given size, by its textposition."""
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    boxes = []
    for trace in fig.data:
        if "text" not in (trace.mode or ""):
            continue
        r = trace.marker.size / 2 / 0.8 + 1
        for x, y, text, where in zip(trace.x, trace.y, trace.text, trace.textposition):
            if not text:
                continue
            cx, cy = (x - x0) / (x1 - x0) * width_px, (y - y0) / (y1 - y0) * height_px
            w = CHAR_PX * len(text)
            vertical, horizontal = where.split()
            left = {"right": cx + r, "left": cx - r - w, "center": cx - w / 2}[horizontal]
            low = {"top": cy + r, "bottom": cy - r - LINE_PX, "middle": cy - LINE_PX / 2}[vertical]
            boxes.append((text, (left, low, left + w, low + LINE_PX)))
    return boxes


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_the_pareto_labels_do_not_overlap_and_every_point_is_named_on_hover(path):
    df = sweeps.read_sweep(path)
    fig = diversed.pareto_figure(df)
    boxes = label_boxes(fig)
    piled = [
        (a, b)
        for (a, p), (b, q) in itertools.combinations(boxes, 2)
        if p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]
    ]
    assert not piled, piled
    shown = {text for text, _ in boxes}
    assert (
        "lossless" in shown
        and {diversed.point_label("diversed", p) for p in df[df.method == "diversed"].param} <= shown
    )
    assert "W=0" in shown  # the draft alone, the static line's far end
    named = [name for trace in fig.data if "text" in trace.mode for name in trace.customdata]
    expected = [diversed.point_name(m, str(p)) for m, p in zip(df.method, df.param) if m != diversed.TASK_STATIC]
    assert sorted(named) == sorted(expected)  # each point, labelled or not, is named in its hover
    assert all("%{customdata}" in (t.hovertemplate or "") for t in fig.data)


def test_a_crowded_corner_keeps_its_names_on_hover():
    """Five points a few pixels apart: the first (most important) is labelled, the rest only named on hover."""
    df = pd.DataFrame(
        {
            "method": ["lossless", "static", "static", "static", "static", "static"],
            "param": ["", "1", "0.9", "0.8", "0.7", "0"],
            "acceptance_rate": [0.150, 0.150, 0.152, 0.154, 0.156, 1.0],
            "quality": [0.60, 0.60, 0.599, 0.598, 0.597, 0.0],
            "items": [57] * 6,
        }
    )
    fig = diversed.pareto_figure(df)
    shown = [text for text, _ in label_boxes(fig)]
    assert "lossless" in shown and "W=0" in shown and len(shown) < len(df)
    static = next(t for t in fig.data if t.name.startswith("static W"))
    assert list(static.customdata) == ["W=1", "W=0.9", "W=0.8", "W=0.7", "W=0"]
