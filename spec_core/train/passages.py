"""Copy-heavy training prompts built from real passages that this machine already holds (no network).

Summaries, RAG answers and code edits copy their input: names, numbers and identifiers a draft can only propose
if it saw such copying in training. These prompts give the target a real passage and a task whose answer quotes
it: summarize, quote, answer from the passage, rewrite, extract, edit code.

Passages, read as text (``ast``, never imported, so nothing runs), with their licences:

- ``stdlib``: docstrings and short functions of the Python standard library's own ``.py`` files (the PSF
  License Agreement, Python-2.0; the same files every CPython install ships);
- ``packages``: the long descriptions (their READMEs) of the installed distributions whose metadata declares a
  permissive licence (MIT, BSD, Apache-2.0, PSF, ISC: :data:`PERMISSIVE`) and no copyleft one
  (:data:`COPYLEFT`); :func:`package_licences` lists the licence each one declares.

The list depends on the Python version and the installed packages, so a clone regenerates other prompts: the
committed token pack (``spec_core.train.pack``) is what reproduces the data. Prompts that share a 13-word run
with Spec-Bench or the held-out sets are dropped (:func:`spec_core.train.prompts.overlaps_heldout`).
"""

from __future__ import annotations

import ast
import functools
import random
import re
import sysconfig
import textwrap
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from spec_core.train.prompts import overlaps_heldout

PASSAGE_SOURCES = ("stdlib", "packages")
STDLIB_LICENCE = "Python-2.0 (PSF License Agreement)"
PERMISSIVE = ("MIT", "BSD", "Apache", "PSF", "Python Software Foundation", "ISC")  # licence names we accept
COPYLEFT = ("GPL", "MPL", "EPL", "CDDL")  # refused even beside a permissive one ("MPL-2.0 AND MIT")
SKIP_STDLIB = ("test", "tests", "idlelib", "lib2to3", "turtledemo", "site-packages", "ensurepip", "pydoc_data")
MIN_WORDS, MAX_WORDS = 40, 220  # a passage: enough to summarize, short enough for a 192-token answer
MAX_CODE_LINES = 30
PASSES = 4  # tasks drawn per passage at most (distinct prompts only)
CODE_SHARE = 1 / 3  # of the functions met in a pass, the share given a task: keeps code near half the prompts

PASSAGE_FORMS = {  # kind -> forms; {text} is the passage, {name} what it documents
    "summarize": [
        "Summarize the following text in two sentences:\n\n{text}",
        "Give a short summary of this documentation:\n\n{text}",
        "What is the main point of this passage?\n\n{text}",
    ],
    "quote": [
        "Quote the first sentence of this text exactly, then explain it in simple words.\n\n{text}",
        "Which sentence of this text is the most important? Quote it word for word and say why.\n\n{text}",
    ],
    "answer": [
        "Using only the text below, explain what `{name}` does.\n\n{text}",
        "Read this documentation and answer: what is `{name}` for, and how is it used?\n\n{text}",
        "{text}\n\nBased on the text above, what should a user know about `{name}`?",
    ],
    "rewrite": [
        "Rewrite this text in plain English for a beginner:\n\n{text}",
        "Turn the following text into a bulleted list of its key points:\n\n{text}",
        "Rewrite this documentation as a short FAQ with two questions and their answers:\n\n{text}",
    ],
    "extract": [
        "List every function, class, option or number mentioned in this text:\n\n{text}",
        "Extract the technical terms of this passage and define each in one line:\n\n{text}",
    ],
}
CODE_FORMS = [  # {code} is a function's source, {name} its name, {new} another name
    "Add a docstring to this Python function and return the whole function:\n\n```python\n{code}\n```",
    "Add type hints to this function:\n\n```python\n{code}\n```",
    "Rename the function `{name}` to `{new}` and show the full code:\n\n```python\n{code}\n```",
    "Explain what this code does, line by line:\n\n```python\n{code}\n```",
    "Add comments to this code to make it easier to read:\n\n```python\n{code}\n```",
    "Write a unit test for this function:\n\n```python\n{code}\n```",
    "Rewrite this function with clearer variable names:\n\n```python\n{code}\n```",
]
NEW_NAMES = ["process", "run_step", "handle_item", "compute", "apply_change", "helper", "do_work", "transform"]


@dataclass(frozen=True)
class Passage:
    source: str  # "stdlib" or "packages"
    origin: str  # the module or distribution it comes from
    name: str  # what it documents (a module, class, function or distribution)
    text: str  # prose, or a function's source when ``code``
    code: bool = False


def _prose(text: str) -> list[str]:
    """Runs of paragraphs of ``text`` that read as prose, each MIN_WORDS..MAX_WORDS words."""
    out: list[str] = []
    run: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        code_like = para.startswith((">>>", "..", "|", "-", "*", "#", "=", "$", "[!", "<", "![")) or "::" in para
        code_like |= len(re.findall(r"[()=\[\]{}<>_#]", para)) > 0.03 * len(para) or "import " in para
        if code_like or len(re.findall(r"[A-Za-z]", para)) < 0.7 * len(para) or "http" in para:
            run = []
            continue
        run.append(para)
        words = sum(len(p.split()) for p in run)
        if words > MAX_WORDS:
            run = [para] if len(para.split()) <= MAX_WORDS else []
        elif words >= MIN_WORDS:
            out.append("\n\n".join(run))
            run = []
    return out


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.rglob("*.py"))
    return [f for f in files if not set(f.relative_to(root).parts[:-1]) & set(SKIP_STDLIB) and "test" not in f.stem]


@functools.lru_cache(maxsize=1)
def stdlib_passages() -> tuple[Passage, ...]:
    """Docstring prose and short functions of the standard library (PSF licence), in file order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[Passage] = []
    for path in _stdlib_files():
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]
        for node in nodes:
            name = module if isinstance(node, ast.Module) else f"{module}.{node.name}"
            doc = ast.get_docstring(node) or ""
            out += [Passage("stdlib", module, name, p) for p in _prose(doc)]
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                code = " " * node.col_offset + (ast.get_source_segment(source, node) or "")  # a method: indented
                lines = code.count("\n") + 1
                if 5 <= lines <= MAX_CODE_LINES and "\t" not in code:
                    out.append(Passage("stdlib", module, node.name, textwrap.dedent(code), code=True))
    return tuple(out)


def _licence(meta: Any) -> str:  # an email.message.Message underneath PackageMetadata
    text = meta.get("License-Expression") or ""
    if not text or len(text) > 60:  # some put the whole licence text here
        text = " ".join(c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::"))
    return text or (meta.get("License") or "")[:60]


@functools.lru_cache(maxsize=1)
def package_licences() -> dict[str, str]:
    """Installed distribution -> the licence its metadata declares (permissive ones only)."""
    out = {}
    for dist in metadata.distributions():
        meta: Any = dist.metadata
        name = meta.get("Name") or ""
        licence = _licence(meta)
        permissive = any(p.lower() in licence.lower() for p in PERMISSIVE)
        if name and permissive and not any(c in licence.upper() for c in COPYLEFT):
            out[name.lower()] = licence
    return dict(sorted(out.items()))


@functools.lru_cache(maxsize=1)
def package_passages() -> tuple[Passage, ...]:
    """README prose of the installed, permissively licensed distributions, by name."""
    out: list[Passage] = []
    for name in package_licences():
        try:
            meta: Any = metadata.metadata(name)
            body = meta.get_payload() or meta.get("Description") or ""
        except metadata.PackageNotFoundError:
            continue
        out += [Passage("packages", name, name, p) for p in _prose(str(body))]
    return tuple(out)


def passage_prompts(n: int, seed: int = 1234) -> list[tuple[str, str]]:
    """Up to ``n`` distinct (kind, prompt) pairs, deterministic for ``seed`` on one install: a passage and a
    copy-heavy task on it. The kind reads ``SOURCE-TASK`` (``stdlib-summarize``, ``packages-answer``,
    ``stdlib-code``). Each pass over the passages gives every prose passage a task and a third of the functions
    one (there are twice as many short functions as prose passages); later passes draw other tasks."""
    rng = random.Random(seed)
    passages = list(stdlib_passages() + package_passages())
    order = [p for _ in range(PASSES) for p in rng.sample(passages, len(passages))]
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for p in order:
        if p.code and rng.random() > CODE_SHARE:
            continue
        if p.code:
            task = "code"
            text = rng.choice(CODE_FORMS).format(code=p.text.rstrip(), name=p.name, new=rng.choice(NEW_NAMES))
        else:
            task = rng.choice(sorted(PASSAGE_FORMS))
            text = rng.choice(PASSAGE_FORMS[task]).format(text=p.text, name=p.name.rsplit(".", 1)[-1])
        if text in seen or overlaps_heldout(text):
            continue
        seen.add(text)
        out.append((f"{p.source}-{task}", text))
        if len(out) == n:
            break
    return out
