"""Always-on point labels that do not overlap: a greedy placer for a scatter's ``text``.

Plotly draws a trace's text at the ``textposition`` it is given and never moves it, so the labels of close points
pile up (the Pareto figure's top-left corner, where W = 0.9, W = 1, lossless and the lenient points sit within
a few pixels). :func:`place_labels` estimates each label's box in pixels (the axes' fixed ranges on an assumed
plot area, a mean character width) and, in the order given (most important first), gives each point the first
position of :data:`POSITIONS` whose box stays inside the plot and clear of every label placed so far and of every
marker (a point may list its own order: one on a line keeps its label off the line). A point with no free
position gets no label: its hover still names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# tried in this order: beside the marker first (reads as its name), then above / below, then the left side
POSITIONS = (
    "middle right",
    "top right",
    "bottom right",
    "top center",
    "bottom center",
    "middle left",
    "top left",
    "bottom left",
)
CHAR_PX = 6.0  # mean advance of a label character at font size 10 (Plotly's Open Sans ≈ 0.55 em; a margin on it)
LINE_PX = 13.0  # a label's line height at font size 10
GAP_PX = 2.0  # clear space kept around each label box

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels, y up


@dataclass(frozen=True)
class Canvas:
    """The plot area the labels are placed on. Its size is an assumption (the figure is responsive): a narrow
    one, so that a wider page (the Analyzer at 1400 px is about twice as wide) only spreads the labels out."""

    x_range: tuple[float, float]
    y_range: tuple[float, float]
    width_px: float = 600.0
    height_px: float = 262.0  # visuals.plots.HEIGHT (360) less the top and bottom margins (58 + 40)

    def px(self, x: float, y: float) -> tuple[float, float]:
        (x0, x1), (y0, y1) = self.x_range, self.y_range
        return (x - x0) / (x1 - x0) * self.width_px, (y - y0) / (y1 - y0) * self.height_px


@dataclass(frozen=True)
class Point:
    """A marker on the canvas, and the label it would carry ("" for a marker that only takes room)."""

    x: float
    y: float
    size: float  # marker diameter in pixels (Plotly's marker.size)
    label: str = ""
    positions: tuple[str, ...] = POSITIONS  # where its label may go, in order of preference


def label_box(point: Point, position: str, canvas: Canvas) -> Box:
    """The label's estimated box at ``position``, offset from the marker as Plotly offsets it (its radius / 0.8
    + 1 px in each direction the position names)."""
    cx, cy = canvas.px(point.x, point.y)
    r = point.size / 2 / 0.8 + 1
    w, h = CHAR_PX * len(point.label), LINE_PX
    vertical, horizontal = position.split()
    x0 = {"right": cx + r, "left": cx - r - w, "center": cx - w / 2}[horizontal]
    y0 = {"top": cy + r, "bottom": cy - r - h, "middle": cy - h / 2}[vertical]
    return x0, y0, x0 + w, y0 + h


def marker_box(point: Point, canvas: Canvas) -> Box:
    cx, cy = canvas.px(point.x, point.y)
    r = point.size / 2
    return cx - r, cy - r, cx + r, cy + r


def overlap(a: Box, b: Box, gap: float = GAP_PX) -> bool:
    return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap


def inside(box: Box, canvas: Canvas) -> bool:
    return box[0] >= 0 and box[1] >= 0 and box[2] <= canvas.width_px and box[3] <= canvas.height_px


def place_labels(
    points: Sequence[Point], markers: Sequence[Point], canvas: Canvas, shapes: Sequence[Box] = ()
) -> list[str | None]:
    """Each point's ``textposition`` (``None``: no label), most important point first. ``markers``: every
    marker drawn (the labelled points' own included: a label never covers a marker); ``shapes``: other marks'
    boxes in pixels (bars: :func:`bar_box`), which no label covers either."""
    dots = [marker_box(m, canvas) for m in markers] + list(shapes)  # a label may touch its own marker, never cover one
    placed: list[Box] = []
    out: list[str | None] = []
    for point in points:
        where = None
        for position in point.positions if point.label else ():
            box = label_box(point, position, canvas)
            free = not any(overlap(box, d, gap=0) for d in dots) and not any(overlap(box, b) for b in placed)
            if inside(box, canvas) and free:
                where = position
                placed.append(box)
                break
        out.append(where)
    return out


def bar_box(x: float, width: float, top: float, canvas: Canvas, bottom: float = 0.0) -> Box:
    """A vertical bar's box in pixels: centred on ``x``, ``width`` in x units, from ``bottom`` to ``top``."""
    x0, y0 = canvas.px(x - width / 2, min(bottom, top))
    x1, y1 = canvas.px(x + width / 2, max(bottom, top))
    return x0, y0, x1, y1


def line_label(
    x: float, label: str, markers: Sequence[Point], canvas: Canvas, shapes: Sequence[Box] = (), steps: int = 8
) -> tuple[float, str] | None:
    """Where the label of a vertical line at ``x`` goes: ``(y, "middle right" | "middle left")``, the highest
    height on the line (top first, ``steps`` heights down to the bottom) where its box beside the line is inside the
    plot and clear of every marker and shape; None when nowhere is free (say it elsewhere: the note)."""
    (y0, y1) = canvas.y_range
    pad = (LINE_PX / 2 + GAP_PX) / canvas.height_px * (y1 - y0)  # the box's half height, in y units
    for k in range(steps):
        y = y1 - pad - k * (y1 - y0 - 2 * pad) / max(steps - 1, 1)
        spot = Point(x, y, 0.0, label, ("middle right", "middle left"))
        where = place_labels([spot], markers, canvas, shapes)[0]
        if where is not None:
            return y, where
    return None


# -- a horizontal bar chart's value labels ------------------------------------------------------------------------

BAR_PLOT_PX = 360.0  # the plot area of a bar chart beside its 200–230 px name margin, in half a 1400-px page


def row_label_x(ends: Sequence[Sequence[float]]) -> list[float]:
    """Where each row's value label starts: right of everything drawn in its row (the bar's end, its whisker's,
    a ◆ and its whisker). Drawn at a bar's end, a label ran into the row's name when the bar pointed left
    ("fixed:40.60×") and under the whiskers when it pointed right."""
    return [max(row) for row in ends]


def row_label_top(starts: Sequence[float], texts: Sequence[str], low: float, width_px: float = BAR_PLOT_PX) -> float:
    """The x-axis top at which every label (``texts``, starting at ``starts``) ends inside a ``width_px`` plot
    whose axis starts at ``low``: a label of w px takes w / width_px of the axis's span, so the span must be at
    least (start − low) / (1 − w / width_px)."""
    span = 0.0
    for x, text in zip(starts, texts):
        share = min((CHAR_PX * len(text) + 2 * GAP_PX) / width_px, 0.8)  # a label longer than that is cut off
        span = max(span, (x - low) / (1 - share))
    return low + span
