"""The palette: Okabe & Ito's eight colours, safe for the common colour-vision deficiencies.

Colour is never the only cue: rejected drafts are also struck through (and drawn as text, where every other
kind is a tinted background), recovered tokens have a dashed underline, bonus tokens a double one; plot series
also differ by dash and marker. Rejected (vermillion) and recovered (reddish purple) were once vermillion and
orange, too close to tell apart at a glance.
Okabe, M. & Ito, K. (2008), "Color Universal Design (CUD): how to make figures and presentations that are
friendly to colorblind people", https://jfly.uni-koeln.de/color/.
"""

from __future__ import annotations

from typing import Literal

OKABE_ITO = {
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "black": "#000000",
    "grey": "#999999",  # not one of the eight; neutral, for plain target tokens
}

TokenKind = Literal["accepted", "rejected", "recovered", "bonus", "target"]

# token origin → (colour, label shown in the legend, underline style)
TOKEN_STYLE: dict[str, tuple[str, str, str]] = {
    "accepted": (OKABE_ITO["green"], "accepted draft", "solid"),
    "rejected": (OKABE_ITO["vermillion"], "rejected draft (struck through)", "none"),
    "recovered": (OKABE_ITO["purple"], "recovered token (target's, at the first rejection)", "dashed"),
    "bonus": (OKABE_ITO["blue"], "bonus token (target's, every draft accepted)", "double"),
    "target": (OKABE_ITO["grey"], "plain target token (no draft)", "dotted"),
}

# plot series, in lane order: colour, dash, marker symbol (three cues per series)
SERIES = [
    (OKABE_ITO["blue"], "solid", "circle"),
    (OKABE_ITO["orange"], "dash", "square"),
    (OKABE_ITO["purple"], "dot", "diamond"),
    (OKABE_ITO["black"], "dashdot", "triangle-up"),
    (OKABE_ITO["sky"], "longdash", "x"),
]

# the lens's three weighting schemes
SCHEME_COLOURS = {"uniform": OKABE_ITO["grey"], "decay": OKABE_ITO["orange"], "dpace": OKABE_ITO["blue"]}


def series_style(i: int) -> tuple[str, str, str]:
    """(colour, dash, marker) of the i-th series."""
    return SERIES[i % len(SERIES)]


def tint(hex_colour: str, alpha: float = 0.22) -> str:
    """``#RRGGBB`` → ``rgba(r, g, b, alpha)`` (a light background that keeps black text readable)."""
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def token_css() -> str:
    """The page's token styles, one rule per kind, from :data:`TOKEN_STYLE` (the one place colours are defined)."""
    rules = []
    for kind, (colour, _, underline) in TOKEN_STYLE.items():
        if kind == "rejected":
            rules.append(
                f".tok-{kind} {{ color: {colour}; text-decoration: line-through 2px; background: {tint(colour, 0.1)}; }}"
            )
        else:
            rules.append(f".tok-{kind} {{ background: {tint(colour)}; border-bottom: 2px {underline} {colour}; }}")
    rules.append(".tok-special { font-size: 0.75em; color: #555; border: 1px solid #999; border-radius: 3px; }")
    # a draft copied from the text (prompt lookup) rather than drafted by a network: a sky overline, on any kind
    rules.append(f".tok-copied {{ box-shadow: inset 0 3px 0 {OKABE_ITO['sky']}; }}")
    rules.append(f".tok-diverge {{ outline: 2px solid {OKABE_ITO['black']}; outline-offset: 1px; }}")
    rules.append(".tok-diverge::before { content: '◆'; font-size: 0.7em; vertical-align: super; }")
    return "\n".join(rules) + "\n"
