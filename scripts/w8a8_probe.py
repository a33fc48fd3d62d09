"""A probe, not a precision: the int8 target's linears as W8A8 (activations rounded to int8 per token, the product
in integers by ``torch._int_mm``), against the shipped weight-only int8 (``_weight_int8pack_mm``).

Usage: ``PYTHONPATH=. .venv/bin/python scripts/w8a8_probe.py`` (one thread; run it on a quiet core).

It prints the target's passes over 1, 2, 3, 4 and 8 tokens in both arithmetics (medians of 15, interleaved) and, on
three prompts, how far W8A8's greedy text follows weight-only int8's and whether ``fixed:2`` still writes W8A8's
own ``ar`` text. An integer product is exact whatever the kernel's blocking and each row has its own scale, so each
linear gives a row the same output in a pass of any width (the rest of the pass keeps the pair's batch-invariant
kernels). docs/LOG.md (2026-12-07, ninth session) has what it measured on a Zen 4.
"""

import torch
from torch import nn

from spec_core.engine.loop import generate
from spec_core.model.int8 import Int8Linear
from spec_core.model.models import load_pair
from spec_core.model.pass_timing import target_forward_ms

torch.set_num_threads(1)


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
        flat = x.reshape(-1, shape[-1]).float()
        s = flat.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127.0
        q = torch.round(flat / s).clamp(-127, 127).to(torch.int8)
        y = torch._int_mm(q, self.wt).float() * s * self.ws
        y = y.to(torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.view(*shape[:-1], self.out_features)


def main() -> None:
    pair = load_pair("embedded", "cpu", "int8", cached=False)
    base = target_forward_ms(pair, widths=(1, 2, 3, 4, 8), repeats=15)
    print(
        "int8 (weight-only) ms:",
        {k: round(v, 1) for k, v in base.items()},
        "ratios",
        {k: round(v / base[1], 2) for k, v in base.items()},
    )
    prompts = [
        "Write a Python function that returns the list of prime numbers below n.",
        "Explain what a Python list comprehension is, with two short examples.",
        "Give me three tips for sleeping better.",
    ]
    ref = [generate(pair, p, "ar", 48).token_ids for p in prompts]
    q = pair.target
    for module in list(q.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Int8Linear):
                setattr(module, name, W8A8Linear(child))
    w = target_forward_ms(pair, widths=(1, 2, 3, 4, 8), repeats=15)
    print("w8a8 ms:", {k: round(v, 1) for k, v in w.items()}, "ratios", {k: round(v / w[1], 2) for k, v in w.items()})
    print("w8a8 step / int8 step:", round(w[1] / base[1], 3))
    for p, r in zip(prompts, ref):
        out = generate(pair, p, "ar", 48).token_ids
        same = next((i for i, (a, b) in enumerate(zip(out, r)) if a != b), len(r))
        f2 = generate(pair, p, "fixed:2", 48).token_ids
        print(f"W8A8's ar follows int8's for {same}/{len(r)} tokens; fixed:2 writes W8A8's ar text: {f2 == out}")


if __name__ == "__main__":
    main()
