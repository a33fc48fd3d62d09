"""Faults a public demo must survive: out-of-memory during a request, weights that are missing or broken.

- **Out of memory.** :func:`oom_guarded` wraps a generation's round iterator. An allocation failure inside a
  round (``torch.OutOfMemoryError`` on CUDA, ``MemoryError`` or the CPU allocator's ``RuntimeError``) ends that
  request with a :class:`~spec_core.core.errors.SpecScopeError`; the failed request's KV caches are released before
  the message leaves (the new exception carries no traceback of the old one, which would keep every tensor of
  the failed frames alive), so the next request finds the memory free.
- **Oversized or broken input.** :func:`check_text` refuses text a visitor sent that is too long to be worth
  tokenizing (a 5 MB prompt took 45 s to tokenize before its refusal on a 2-core machine) or that is not
  encodable as UTF-8 (unpaired surrogates, which crash the tokenizer); :func:`check_upload` refuses files over
  :data:`MAX_UPLOAD_BYTES` before a byte is parsed.
- **Many visitors.** :func:`serving_limits` gives the app's queue settings: how many requests run at once
  (one on a CPU, where a second request would only split the same cores and slow both; a few on a GPU), how
  many may wait (past that, Gradio answers at once with a "queue is full" message instead of a long wait),
  and the largest upload; the operator overrides each through an environment variable.
- **Broken weights.** :func:`weights_problem` says, for a weights file, what is wrong with it and which command
  fixes it: missing, a Git LFS pointer left by a clone without ``git-lfs``, or a file whose safetensors header
  or size does not hold together (an interrupted copy or download).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from safetensors import safe_open

from spec_core.core.errors import SpecScopeError

T = TypeVar("T")

LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
LFS_FIX = "run `git lfs install && git lfs pull` in the checkout (or reinstall from a clone made with git-lfs)"
MAX_PROMPT_CHARS = 20_000  # ≈ 5 k tokens: past any prompt the embedded target (8 k context) can answer at length
MAX_UPLOAD_BYTES = 32 * 2**20  # prompt sets and saved events files (an analyzer run of 200 prompts writes MBs)
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "not enough memory")


CONCURRENCY_ENV = "SPECSCOPE_CONCURRENCY"  # requests decoded at once (default: 1 on CPU / MPS, 4 on CUDA)
QUEUE_SIZE_ENV = "SPECSCOPE_QUEUE_SIZE"  # requests that may wait beyond those (default: 16)


@dataclass(frozen=True)
class ServingLimits:
    """The app's queue and upload limits (``demo.queue(...)`` and ``launch(max_file_size=...)``)."""

    concurrency: int  # requests that run at once
    queue_size: int  # requests that may wait; one more gets Gradio's "queue is full" at once
    max_file_size: int  # bytes per upload (prompt sets, saved events)


def _env_int(name: str, default: int, low: int, high: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise SpecScopeError(f"${name} must be an integer in [{low}, {high}], got {raw!r}")
    return int(raw)


def serving_limits(device: torch.device | str | None = None) -> ServingLimits:
    """Limits matched to the device the pair will run on (CUDA > MPS > CPU when ``device`` is None)."""
    kind = torch.device(device).type if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
    return ServingLimits(
        concurrency=_env_int(CONCURRENCY_ENV, 4 if kind == "cuda" else 1, 1, 64),
        queue_size=_env_int(QUEUE_SIZE_ENV, 16, 1, 10_000),
        max_file_size=MAX_UPLOAD_BYTES,
    )


def is_oom(err: BaseException) -> bool:
    """An allocation failure: CUDA / MPS out-of-memory, Python's MemoryError, or the CPU allocator's message."""
    if isinstance(err, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError))):
        return True
    return isinstance(err, RuntimeError) and any(s in str(err).lower() for s in _OOM_TEXT)


def free_memory(device: torch.device | str | None = None) -> None:
    """Collect unreachable tensors now and hand cached CUDA blocks back to the driver."""
    gc.collect()
    dev = torch.device(device) if device is not None else None
    if (dev is None or dev.type == "cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


def oom_guarded(
    rounds: Iterator[T],
    device: torch.device | str | None = None,
    what: str = "this request",
    release: Callable[[], None] | None = None,
) -> Iterator[T]:
    """Yield from ``rounds``; an out-of-memory error ends it with a :class:`SpecScopeError` after freeing memory.

    The message is built inside the ``except`` block but raised outside it, so the new error has no
    ``__context__``: the failed generator's frames (and the KV caches they hold) become garbage at once.
    ``release`` drops what the caller itself still holds (e.g. a generation's caches kept for inspection).
    """
    failure = ""
    try:
        yield from rounds
    except BaseException as err:  # noqa: B036 — only allocation failures are handled; the rest re-raised as is
        if not is_oom(err):
            raise
        failure = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:160] if str(err).strip() else ''}"
    if not failure:
        return
    close = getattr(rounds, "close", None)
    if close is not None:
        close()
    del rounds
    if release is not None:
        release()
    del release  # a bound method would keep its owner (and its caches) alive through this frame's traceback
    free_memory(device)
    raise SpecScopeError(
        f"out of memory on {device or 'the device'} during {what} ({failure}); it was stopped and its memory "
        "freed. Try fewer new tokens or a shorter prompt, or try again when fewer people are generating."
    )


def check_text(text: str, what: str = "the prompt", max_chars: int = MAX_PROMPT_CHARS) -> str:
    """``text`` unchanged when it is at most ``max_chars`` long and valid UTF-8; else a clear refusal."""
    if len(text) > max_chars:
        raise SpecScopeError(f"{what} is {len(text):,} characters long; this server takes at most {max_chars:,}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise SpecScopeError(
            f"{what} is not valid UTF-8 text (character {err.start} is an unpaired surrogate); paste it again as "
            "plain text"
        ) from None
    return text


def check_upload(
    path: str | Path, what: str = "the upload", max_bytes: int = MAX_UPLOAD_BYTES, text: bool = True
) -> Path:
    """``path`` when the file exists, is at most ``max_bytes`` long (checked before anything reads it) and, with
    ``text``, is UTF-8 text (every file the app loads is: a binary or UTF-16 file gets one plain message here,
    not a parser's complaint about its third line)."""
    path = Path(path)
    if not path.is_file():
        raise SpecScopeError(f"{what} did not arrive (no file {path.name!r})")
    size = path.stat().st_size
    if size > max_bytes:
        raise SpecScopeError(
            f"{what} is {size / 2**20:.1f} MiB; this server takes files up to {max_bytes / 2**20:.0f} MiB"
        )
    if text:
        check_text_file(path, what)
    return path


def check_text_file(path: Path, what: str) -> None:
    """Refuse a file that is empty, binary, UTF-16 or otherwise not UTF-8, naming the file and the fix."""
    data = path.read_bytes()
    if not data.strip():
        raise SpecScopeError(f"{what} ({path.name}) is empty")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise SpecScopeError(f"{what} ({path.name}) is UTF-16 text; save it as UTF-8 and load it again")
    if b"\x00" in data:
        raise SpecScopeError(f"{what} ({path.name}) is a binary file, not text")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecScopeError(
            f"{what} ({path.name}) is not UTF-8 text (byte {data[err.start]:#04x} at position {err.start}); save it "
            "as UTF-8 and load it again"
        ) from None


def weights_problem(path: str | Path) -> str:
    """What is wrong with a safetensors weights file ('' when its header and size hold together), with the fix."""
    path = Path(path)
    if not path.is_file():
        return f"{path} is missing"
    with path.open("rb") as f:
        head = f.read(len(LFS_POINTER_PREFIX))
    if head == LFS_POINTER_PREFIX:
        return f"{path} is a Git LFS pointer, not the weights (the clone was made without git-lfs): {LFS_FIX}"
    try:
        with safe_open(str(path), framework="pt") as f:  # reads the header; checks it against the file size
            f.keys()
    except Exception as err:  # safetensors raises its own SafetensorError (not an OSError) for a bad header
        return f"{path} is not a readable safetensors file ({str(err).strip()[:160] or type(err).__name__})"
    return ""
