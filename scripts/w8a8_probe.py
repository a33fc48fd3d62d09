"""A probe, not a precision: the int8 target's linears as W8A8 (activations rounded to int8 per token, the product
in integers by ``torch._int_mm``), against the shipped weight-only int8 (``_weight_int8pack_mm``).

Usage: ``PYTHONPATH=. .venv/bin/python scripts/w8a8_probe.py`` (one thread; run it on a quiet core).

It prints the target's passes over 1, 2, 3, 4 and 8 tokens in both arithmetics (medians of 20, the two interleaved
call by call, so both see the same machine) and, on
three prompts, how far W8A8's greedy text follows weight-only int8's and whether ``fixed:2`` still writes W8A8's
own ``ar`` text. q/k/v and gate/up read one input each, which is rounded once. An integer product is exact whatever the kernel's blocking and each row has its own scale, so each
linear gives a row the same output in a pass of any width (the rest of the pass keeps the pair's batch-invariant
kernels). docs/LOG.md (2026-12-07, ninth session) has what it measured on a Zen 4.
"""

import torch
from torch import nn

from spec_core.engine.loop import generate
from spec_core.model.int8 import Int8Linear
from spec_core.model.models import load_pair
from spec_core.model.pass_timing import interleaved_median_ms, target_calls

torch.set_num_threads(1)


_LAST: list = []  # (the input, its rounding): q/k/v and gate/up read one input, rounded once


def rounded(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x's rows as int8 and their scales, reusing the last call's when x is the same tensor (held here, so its id is
    not reused; inference tensors keep no version counter, and nothing writes into a layer's input in place)."""
    if _LAST and _LAST[0] is x:
        return _LAST[1]
    flat = x.reshape(-1, x.shape[-1]).float()
    s = flat.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127.0
    out = (torch.round(flat / s).clamp(-127, 127).to(torch.int8), s)
    _LAST[:] = [x, out]
    return out


class W8A8Linear(nn.Module):
    """``y = (q(x) @ W_q) · s_x · s_w``: x rounded to int8 with one scale per row, the int8 weights of an
    :class:`Int8Linear` (one scale per output channel), the product in int32."""

    def __init__(self, lin: Int8Linear):
        super().__init__()
        self.wt = lin.weight_int8.t().contiguous()  # [K, N]
        self.ws = lin.scales.float()
        self.bias = lin.bias
        self.out_features = lin.out_features
        self._lin = [lin]

    @property
    def weight(self):
        return self._lin[0].weight

    def forward(self, x):
        shape = x.shape
        q, s = rounded(x)
        y = torch._int_mm(q, self.wt).float() * s * self.ws
        y = y.to(torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.view(*shape[:-1], self.out_features)


WIDTHS = (1, 2, 3, 4, 8)


def main() -> None:
    weight_only = load_pair("embedded", "cpu", "int8", cached=False)
    integer = load_pair("embedded", "cpu", "int8", cached=False)
    for module in list(integer.target.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Int8Linear):
                setattr(module, name, W8A8Linear(child))
    calls = {("int8", n): fn for n, fn in target_calls(weight_only, WIDTHS).items()}
    calls |= {("w8a8", n): fn for n, fn in target_calls(integer, WIDTHS).items()}
    ms = interleaved_median_ms(calls, repeats=20)  # the two arithmetics interleaved: one machine state for both
    for kind in ("int8", "w8a8"):
        row = {n: ms[(kind, n)] for n in WIDTHS}
        print(
            f"{kind}: ms",
            {n: round(v, 1) for n, v in row.items()},
            "in its steps",
            {n: round(v / row[1], 2) for n, v in row.items()},
        )
    print("w8a8 step / int8 step:", round(ms[("w8a8", 1)] / ms[("int8", 1)], 3))
    prompts = [
        "Write a Python function that returns the list of prime numbers below n.",
        "Explain what a Python list comprehension is, with two short examples.",
        "Give me three tips for sleeping better.",
    ]
    for p in prompts:
        ref = generate(weight_only, p, "ar", 48).token_ids
        out = generate(integer, p, "ar", 48).token_ids
        same = next((i for i, (a, b) in enumerate(zip(out, ref)) if a != b), len(ref))
        f2 = generate(integer, p, "fixed:2", 48).token_ids
        print(f"W8A8's ar follows int8's for {same}/{len(ref)} tokens; fixed:2 writes W8A8's ar text: {f2 == out}")


if __name__ == "__main__":
    main()
