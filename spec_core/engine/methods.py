"""Method names, the contract shared by the CLI, the app and the CSV files (docs/ARCHITECTURE.md, "Contracts").

``ar`` is plain decoding: the empty drafter (it proposes nothing) and the lossless rule. A speculative method is ``POLICY``, ``VERIFIER`` or ``POLICY+VERIFIER`` (e.g.
``fixed:4``, ``heuristic``, ``confidence:0.4``, ``fixed:4+lossless``); a missing policy is ``fixed:4`` and a
missing verifier ``lossless``. ``block:LOSS`` drafts with a parallel block drafter (one draft forward per
round) and combines with a verifier (``block:dpace+lossless``); ``tree:nodes=N,depth=D,topk=K`` drafts a token tree
(EAGLE-2), verified by the lossless rule only. Peers run transformers itself: ``hf-ar``,
``hf-assisted:K``, ``hf-assisted-heuristic``. Any name may end in ``@PRECISION`` (``pacer@int8``, ``ar@bfloat16``):
the benchmark and ``/generate`` then run it at that arithmetic (:mod:`spec_core.core.precision`).

A name is parsed once, where it enters (CLI, API, UI): :func:`parse_method` validates every part and loads
nothing; the engine builds the parts from the :class:`MethodSpec` with the loaded pair. Code that meets a name
again (views, tools) reads :func:`spec_of`'s cached spec (``heads``, ``is_lossy``, a peer's ``window``), never
splits the string itself (``tests/unit/test_method_parsing.py`` looks).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Literal

from spec_core.core import words
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import PartSpec
from spec_core.drafters import DRAFTERS, parse_drafter
from spec_core.policies import POLICIES, parse_policy
from spec_core.verifiers import VERIFIERS, parse_verifier

DEFAULT_POLICY = "fixed:4"
COSTED_POLICY = "cost"  # the length of a drafter that names no policy (lookup, hybrid): this machine's costs decide
DEFAULT_VERIFIER = "lossless"
PEERS = ("hf-ar", "hf-assisted", "hf-assisted-heuristic", "hf-lookup")
MethodKind = Literal["ar", "speculative", "peer"]


@dataclass(frozen=True)
class MethodSpec:
    name: str  # as written by the user
    kind: MethodKind
    policy: PartSpec | None = None  # with the pair's own draft only (block, tree and empty drafters set their length)
    verifier: PartSpec | None = None  # speculative and ar (the lossless rule); None for a peer
    drafter: PartSpec | None = None  # "default" (the pair's draft), "block:LOSS", "tree:...", "none" (ar); None: peer
    precision: str | None = None  # "METHOD@PRECISION" (e.g. pacer@int8); None: the run's default precision
    heads: tuple[str, ...] = ()  # the families of the parts the name writes, in its order ("fixed:4+diversed" →
    #   ("fixed", "diversed")): ("ar",) for ar, the peer's own head (("hf-assisted",)) for a peer; no filled-in default
    window: int | None = None  # a peer's K (hf-assisted:K, hf-lookup:K: tokens a round); None: no K written

    @property
    def is_lossy(self) -> bool:
        """Whether the verifier may change the target's output: its registry class's own ``lossless`` says; ar and
        the peers (transformers' generate) are lossless."""
        return self.kind == "speculative" and self.verifier is not None and not VERIFIERS[self.verifier.family].lossless

    @property
    def is_tree(self) -> bool:
        """Whether the drafter branches (a token tree, verified in one pass), as its registry class says."""
        return self.drafter is not None and bool(getattr(DRAFTERS[self.drafter.family], "drafts_trees", False))


PRECISION_NAMES = ("auto", "bfloat16", "float32", "float16", "int8")


def split_precision(name: str) -> tuple[str, str | None]:
    """``"pacer@int8"`` → ``("pacer", "int8")``; a name without ``@`` keeps the run's default (None)."""
    base, at, precision = name.rpartition("@")
    if not at:
        return name, None
    precision = precision.strip()
    if precision not in PRECISION_NAMES:
        raise SpecScopeError(f"unknown precision {precision!r} in {name!r}; use one of {', '.join(PRECISION_NAMES)}")
    return base.strip(), precision


def parse_method(name: str) -> MethodSpec:
    """Validate and split a method name; raises :class:`SpecScopeError` with the known names otherwise."""
    name = (name or "").strip() if isinstance(name, str) else ""
    if not name:
        raise SpecScopeError("the method is empty; try 'ar', 'fixed:4' or 'heuristic'")
    if "@" in name:
        base, precision = split_precision(name)
        return replace(parse_method(base), name=name, precision=precision)
    if name == "ar":
        return MethodSpec(name, "ar", None, parse_verifier(DEFAULT_VERIFIER), parse_drafter("none"), heads=("ar",))
    if name.startswith("hf-"):
        head, _, arg = name.partition(":")
        if head not in PEERS or (head in ("hf-assisted", "hf-lookup")) != bool(arg):  # K: tokens a round
            raise SpecScopeError(
                f"unknown peer {name!r}; use hf-ar, hf-assisted:K, hf-assisted-heuristic or hf-lookup:K "
                "(K tokens a round, 1..64)"
            )
        if arg and not (arg.isdigit() and 1 <= int(arg) <= 64):
            raise SpecScopeError(f"{head}:K needs an integer 1 <= K <= 64, got {arg!r}")
        return MethodSpec(name, "peer", heads=(head,), window=int(arg) if arg else None)
    policy, verifier, drafter = None, None, None
    heads = []
    for part in name.split("+"):
        head = part.partition(":")[0]
        heads.append(head)
        if head in DRAFTERS and DRAFTERS[head].named and drafter is None:
            drafter = parse_drafter(part)  # validates its settings now (a tree's shape, a block's loss)
        elif head in POLICIES and policy is None:
            policy = parse_policy(part)
        elif head in VERIFIERS and verifier is None:
            verifier = parse_verifier(part)
        else:
            drafters = [f"{p}:LOSS" if p == "block" else p for p, cls in DRAFTERS.items() if cls.named]
            known = ["ar", *sorted(POLICIES), *sorted(VERIFIERS), *drafters, *PEERS]
            raise SpecScopeError(
                f"unknown method part {part!r} (or one given twice) in {name!r}; known: {', '.join(known)}"
            )
    if drafter is not None and policy is not None and DRAFTERS[drafter.family].own_length:
        raise SpecScopeError(f"{name!r}: a {drafter.family} drafter sets its own length; drop {policy.text!r}")
    verifier = verifier or parse_verifier(DEFAULT_VERIFIER)
    if drafter is not None and not DRAFTERS[drafter.family].reads_draft_states:
        for given, registry in ((policy, POLICIES), (verifier, VERIFIERS)):
            if given is not None and getattr(registry[given.family], "reads_draft_states", False):
                raise SpecScopeError(
                    f"{name!r}: {given.family} reads a draft network's hidden states, and a {drafter.family} "
                    f"draft copies tokens without one; try {drafter.text}, {drafter.text}+fixed:4 or "
                    f"{drafter.text}+confidence:0.4"
                )
    if drafter is not None and DRAFTERS[drafter.family].drafts_trees:
        if not getattr(VERIFIERS[verifier.family], "verifies_trees", False):
            raise SpecScopeError(
                f"{name!r}: a token tree is verified losslessly (multi-candidate); drop {verifier.text!r}"
            )
    if (
        drafter is not None
        and getattr(drafter.params, "branch", False)
        and (policy is not None or not getattr(VERIFIERS[verifier.family], "verifies_trees", False))
    ):  # a branched round is a tree with the hybrid's own lengths: a named policy or another verifier has chains
        drafter = replace(drafter, params=replace(drafter.params, branch=False))
    if drafter is None:
        drafter, policy = parse_drafter("default"), policy or parse_policy(DEFAULT_POLICY)
    elif not DRAFTERS[drafter.family].own_length:
        policy = policy or parse_policy(COSTED_POLICY)
    if verifier.family == "diversed":  # its head reads the drafter's states: the build checks it was trained on them
        verifier = replace(verifier, params=replace(verifier.params, drafter=drafter.text))
    return MethodSpec(name, "speculative", policy, verifier, drafter, heads=tuple(heads))


@functools.lru_cache(maxsize=1024)
def spec_of(name: str) -> MethodSpec:
    """:func:`parse_method`, cached: what the views and tools that meet a name many times read (its ``heads``,
    ``is_lossy``, ...) instead of splitting it again. A name that does not parse raises :class:`SpecScopeError` (it
    is neither lossy nor lossless); a caller that must live with junk (a lane showing why its name fails) catches
    it. Parts registered or removed later (tests, plug-ins) are not seen by a name already cached."""
    return parse_method(name)


def is_fixed_window(name: str) -> bool:
    """Whether ``name`` is a plain fixed window (``fixed:K`` on the pair's draft, verified losslessly): the
    baseline rows of the replay tables. A row label that is no method (``oracle``) is not one."""
    try:
        spec = spec_of(name)
    except SpecScopeError:
        return False
    return spec.heads == ("fixed",)


def is_plain(name: str) -> bool:
    """Whether ``name`` decodes with the target alone (``ar``, at any precision): its drafter drafts nothing, as the
    registry class says (``drafts``). A name that does not parse is not."""
    try:
        spec = spec_of(name)
    except SpecScopeError:
        return False
    return spec.drafter is not None and not getattr(DRAFTERS[spec.drafter.family], "drafts", True)


def is_lossy(name: str) -> bool:
    """Whether method ``name``'s verifier may change the target's output (:attr:`MethodSpec.is_lossy`)."""
    return spec_of(name).is_lossy


def split_methods(text: str) -> list[str]:
    """A comma-separated list of method names, where a name's own settings may contain commas:
    ``"ar,pacer:b=2,t=0.5,tree:nodes=16,depth=5"`` → ``["ar", "pacer:b=2,t=0.5", "tree:nodes=16,depth=5"]``
    (a ``key=value`` piece with no ``:`` continues the name before it)."""
    names: list[str] = []
    for piece in (p.strip() for p in (text or "").split(",")):
        if not piece:
            continue
        if names and "=" in piece and ":" not in piece.split("=")[0] and ":" in names[-1]:
            names[-1] += "," + piece
        else:
            names.append(piece)
    return names


def known_methods() -> list[str]:
    """Examples of every family, for help texts and the UI: the registries' own ``examples`` (policies, then
    verifiers, then named drafters), and the peers."""
    parts = [*POLICIES.values(), *VERIFIERS.values(), *DRAFTERS.values()]
    names = [name for cls in parts for name in getattr(cls, "examples", ())]
    ar = [n for n in names if n == "ar"]
    return [*ar, *[n for n in names if n != "ar"], *PEERS[:1], "hf-assisted:4"]


def families() -> dict[str, str]:
    """Method-part head → what that family does, in a sentence (the glossary's and the lane headers' text), from
    the registries; ``ar`` is the empty drafter's."""
    out = {"ar": DRAFTERS["none"].about}
    for registry in (POLICIES, DRAFTERS, VERIFIERS):
        for prefix, cls in registry.items():
            if prefix not in ("none", "default", "lossless") and words.about(cls):
                out.setdefault(prefix, words.about(cls))  # a verifier that writes none: lossy or lossless
    return out
