"""Figures from a tool's table, outside the app: ``python -m visuals pareto runs/pareto.csv --out pareto.html``.

The tools of :mod:`spec_core.analysis` write tables and draw nothing (no plotly below ``visuals``); this command
draws the figure the app shows from such a table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m visuals", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="figure", required=True)
    pareto = sub.add_parser("pareto", help="acceptance vs quality from a `python -m spec_core pareto` CSV")
    pareto.add_argument("csv")
    pareto.add_argument("--out", required=True, help="the HTML file to write")
    pareto.add_argument("--title", default="Acceptance vs quality (eval split)")
    a = ap.parse_args(argv)
    import pandas as pd

    from visuals.diversed import pareto_figure

    try:
        df = pd.read_csv(a.csv, dtype={"param": str})
    except (OSError, ValueError) as err:
        print(f"error: cannot read {a.csv}: {err}")
        return 2
    missing = {"method", "param", "acceptance_rate", "quality"} - set(df.columns)
    if missing:
        print(f"error: {a.csv} is not a pareto table (missing columns: {', '.join(sorted(missing))})")
        return 2
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pareto_figure(df, a.title).write_html(a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
