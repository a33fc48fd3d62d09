"""The row plan of batch-invariant linears (spec_core/model/invariance.py), probed on the CPU the tests run on.

A linear switched to :class:`RowInvariantLinear` must give a row the same bits whatever the width of the pass:
its plan is probed per CPU, because GEMM libraries break row invariance at other widths on other CPUs (an Intel
Xeon with AMX: bfloat16 above 32 rows; an AMD EPYC with AVX2: one row, bfloat16 with 1,536 inputs and float32).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from spec_core.model.invariance import WIDEST, RowInvariantLinear, cancelling_rows, row_plan

WIDTHS = [1, 2, 3, 4, 5, 8, 15, 16, 17, 32, 33, 64, WIDEST]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("in_features", [576, 1536])  # the embedded target's two reduction lengths
def test_a_row_has_the_same_bits_at_every_width(dtype, in_features):
    generator = torch.Generator().manual_seed(1)  # not the probe's seed: other rows than it saw
    x = torch.randn(WIDEST, in_features, generator=generator).to(dtype)
    linear = nn.Linear(in_features, 96, bias=False).to(dtype)
    linear.weight.data = cancelling_rows(x, 96, generator).to(dtype)  # sums that show a change of order
    linear.__class__ = RowInvariantLinear
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = torch.cat([linear(x[r : r + 1]) for r in range(WIDEST)])
        for width in WIDTHS:
            rows = linear(x[:width])
            bad = [r for r in range(width) if not torch.equal(rows[r], alone[r])]
            assert not bad, f"{dtype}, {in_features} inputs, width {width}: rows {bad[:5]} differ from the row alone"
    finally:
        torch.set_num_threads(before)


def test_a_plain_linear_breaks_where_the_plan_says():
    """The probe is not vacuous: where its plan pads or chunks, a plain linear's rows do differ (on this CPU)."""
    generator = torch.Generator().manual_seed(2)
    for dtype in (torch.bfloat16, torch.float32):
        for in_features in (576, 1536):
            x = torch.randn(WIDEST, in_features, generator=generator).to(dtype)
            weight = cancelling_rows(x, 96, generator).to(dtype)
            low, chunk = row_plan(dtype, in_features, 96, 1)
            if low == 1 and chunk == WIDEST:
                continue
            before = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                alone = torch.cat(
                    [torch.nn.functional.linear(x[r : r + 1].expand(low, -1), weight)[:1] for r in range(WIDEST)]
                )
                outside = [w for w in range(1, WIDEST + 1) if w < low or w > chunk]
                assert any(
                    not torch.equal(torch.nn.functional.linear(x[:w], weight)[: min(w, 40)], alone[: min(w, 40)])
                    for w in outside
                ), f"{dtype} {in_features}: plan ({low}, {chunk}) pads or chunks widths that agree anyway"
            finally:
                torch.set_num_threads(before)


def test_the_plan_is_a_range_of_widths():
    low, chunk = row_plan(torch.float32, 576, 576, 1)
    assert 1 <= low <= chunk <= WIDEST
