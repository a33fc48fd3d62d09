"""A ``pareto`` sweep read back: the measured sweeps shipped with the app, one CSV checked, and the static frontier
each row is compared with. The sweep itself is run by :mod:`spec_core.analysis.pareto`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from spec_core.core.assets import ASSETS_DIR
from spec_core.core.errors import SpecScopeError

RESULTS_DIR = ASSETS_DIR / "results"  # measured sweeps the app shows
REQUIRED = ("method", "param", "acceptance_rate", "quality")


def shipped_sweeps(directory: Path = RESULTS_DIR) -> dict[str, Path]:
    """The measured sweeps shipped with the app (``pareto_t<T>.csv``), labelled by temperature."""
    found = sorted(directory.glob("pareto_t*.csv"))
    return {f"temperature {p.stem.removeprefix('pareto_t')}": p for p in found}


def read_sweep(path: str | Path) -> pd.DataFrame:
    """A ``pareto`` CSV, checked: the required columns, numbers where numbers belong, a static sweep to compare
    with; the frontier columns are (re)computed."""
    try:
        df = pd.read_csv(path, dtype={"param": str}, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise SpecScopeError(f"could not read the sweep {Path(str(path)).name}: {e}") from e
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise SpecScopeError(
            f"not a pareto table: missing column(s) {', '.join(missing)} "
            "(write one with `python -m spec_core pareto --out FILE.csv`)"
        )
    for column in ("acceptance_rate", "quality"):
        df[column] = pd.to_numeric(df[column], errors="coerce")
    numeric = df.dropna(subset=["acceptance_rate", "quality"])
    if (numeric["method"] == "static").sum() < 2:
        dropped = len(df) - len(numeric)
        why = f" ({dropped} row(s) dropped: acceptance_rate and quality must be numbers)" if dropped else ""
        raise SpecScopeError(f"the sweep needs at least two static:W rows to draw the frontier{why}")
    df = numeric
    return with_frontier(df)


def interpolate_frontier(static: pd.DataFrame, acceptance: float) -> float:
    """Quality of the static frontier at ``acceptance``, linear between sweep points (NaN outside the sweep)."""
    pts = static.sort_values("acceptance_rate")
    xs, ys = pts["acceptance_rate"].tolist(), pts["quality"].tolist()
    if not xs or acceptance < xs[0] or acceptance > xs[-1]:
        return float("nan")
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x0 <= acceptance <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (acceptance - x0) / (x1 - x0)
    return ys[-1]


def with_frontier(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``frontier_quality`` (the static sweep interpolated at each row's acceptance), ``above_frontier``
    (quality − frontier) and ``acceptance_vs_lossless`` (acceptance / the lossless row's)."""
    static = df[df["method"] == "static"]
    lossless = df.loc[df["method"] == "lossless", "acceptance_rate"]
    out = df.copy()
    out["frontier_quality"] = [interpolate_frontier(static, a) for a in out["acceptance_rate"]]
    out["above_frontier"] = out["quality"] - out["frontier_quality"]
    out["acceptance_vs_lossless"] = out["acceptance_rate"] / float(lossless.iloc[0]) if len(lossless) else float("nan")
    return out
