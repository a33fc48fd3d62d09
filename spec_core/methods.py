"""Method names, the contract shared by the CLI, the app and the CSV files (ARCHITECTURE.md).

``ar`` is plain decoding. A speculative method is ``POLICY``, ``VERIFIER`` or ``POLICY+VERIFIER`` (e.g.
``fixed:4``, ``heuristic``, ``confidence:0.4``, ``fixed:4+lossless``); a missing policy is ``fixed:4`` and a
missing verifier ``lossless``. ``block:LOSS`` drafts with a parallel block drafter (one draft forward per
round). Peers run transformers itself: ``hf-ar``, ``hf-assisted:K``, ``hf-assisted-heuristic``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spec_core.draft_length import POLICIES, make_policy
from spec_core.errors import SpecScopeError
from spec_core.verifiers import VERIFIERS, make_verifier

DEFAULT_POLICY = "fixed:4"
PEERS = ("hf-ar", "hf-assisted", "hf-assisted-heuristic")
BLOCK_LOSSES = ("uniform", "decay", "dpace", "dpace-cumulative", "dpace-continuation")


@dataclass(frozen=True)
class MethodSpec:
    name: str  # as written by the user
    kind: Literal["ar", "speculative", "peer"]
    policy: str = ""  # e.g. "fixed:4" (speculative only)
    verifier: str = "lossless"
    drafter: str = "default"  # "default" (the pair's draft) or "block:LOSS"


def parse_method(name: str) -> MethodSpec:
    """Validate and split a method name; raises :class:`SpecScopeError` with the known names otherwise."""
    name = (name or "").strip()
    if not name:
        raise SpecScopeError("the method is empty; try 'ar', 'fixed:4' or 'heuristic'")
    if name == "ar":
        return MethodSpec(name, "ar")
    if name.startswith("hf-"):
        head, _, arg = name.partition(":")
        if head not in PEERS or (head == "hf-assisted") != bool(arg):
            raise SpecScopeError(f"unknown peer {name!r}; use hf-ar, hf-assisted:K or hf-assisted-heuristic")
        if arg and not (arg.isdigit() and 1 <= int(arg) <= 64):
            raise SpecScopeError(f"hf-assisted:K needs 1 <= K <= 64, got {arg!r}")
        return MethodSpec(name, "peer")
    policy, verifier, drafter = None, None, "default"
    for part in name.split("+"):
        head, _, arg = part.partition(":")
        if head == "block":
            if arg not in BLOCK_LOSSES:
                raise SpecScopeError(f"block drafters: block:{{{','.join(BLOCK_LOSSES)}}}, got {part!r}")
            drafter = part
        elif head in POLICIES and policy is None:
            make_policy(part)  # validates the parameter now, not mid-generation
            policy = part
        elif head in VERIFIERS and verifier is None:
            make_verifier(part)
            verifier = part
        else:
            known = ["ar", *sorted(POLICIES), *sorted(VERIFIERS), "block:LOSS", *PEERS]
            raise SpecScopeError(f"unknown method part {part!r} in {name!r}; known: {', '.join(known)}")
    if drafter != "default" and policy is not None:
        raise SpecScopeError(f"{name!r}: a block drafter sets its own length (one block a round); drop {policy!r}")
    return MethodSpec(name, "speculative", policy or ("" if drafter != "default" else DEFAULT_POLICY),
                      verifier or "lossless", drafter)  # fmt: skip


def known_methods() -> list[str]:
    """Examples of every family, for help texts and the UI."""
    blocks = [f"block:{loss}" for loss in BLOCK_LOSSES[:3]]
    return ["ar", "fixed:2", "fixed:4", "fixed:6", "heuristic", "confidence:0.4", *blocks, *PEERS[:1], "hf-assisted:4"]
