"""The repository stands alone (docs/STYLE.md §12): every document it cites is inside it, and the README is a manual.

Fast and model-free. It fails when
- a ``.md`` file named in a ``.py`` or ``.md`` file (``docs/ALGORITHMS.md §3``, ``docs/PACER.md``, ``README.md``)
  is not in the repository, resolved from the repository root or from the citing file's folder (so code must
  write ``docs/ALGORITHMS.md``, not a bare ``ALGORITHMS.md``);
- a ``§N`` after ``ALGORITHMS.md`` or ``STYLE.md`` names a section that file does not have;
- a section cited by its heading in quotes (``docs/LOG.md, "Token trees"``, ``docs/LOG.md's "This machine"``, also
  across a line break or a comment's ``#``) is in no heading, nor bold or italic lead, of the cited file;
- a source or documentation file names a path outside the repository (the machine's work folders, the shared
  notes the docs were first written from). Trained weights' JSON cards are records of a run and are not scanned;
- ``README.md`` is longer than :data:`README_MAX_LINES` lines;
- a relative link in ``README.md`` or ``docs/**/*.md`` points at a file that does not exist (or leaves the
  repository), or at an ``#anchor`` that no heading of its target makes (GitHub's rule: lower case, punctuation
  dropped, spaces as hyphens).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

SELF = Path(__file__).resolve()
ROOT = SELF.parents[2]
README_MAX_LINES = 300

SKIP_DIRS = {"node_modules", "__pycache__", "runs", "data"}  # plus every hidden folder (.venv, .git, caches)
SOURCE_SUFFIXES = {".py", ".md", ".sh", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".css", ".js"}
SOURCE_NAMES = {"Makefile", "Dockerfile"}

# A path-like name ending in .md: README.md, docs/PACER.md, ../docs/X.md (not ".md" alone, not a glob). A name that
# opens a string literal is code building a path (ROOT / "docs" / "X.md"), not a citation: its test reads the file.
MD_NAME = re.compile(r"(?<![\w/.*'\"-])((?:\.\.?/)*(?:[\w-]+/)*[\w-]+\.md)\b")
SECTION = re.compile(r"((?:[\w.-]+/)*(?:ALGORITHMS|STYLE)\.md)`{0,2}\s*§\s*(\d+)")
HEADING_NUMBER = re.compile(r"^#{2,4}\s+(\d+)\.\s", re.M)
# Paths that exist only on the machines the project was written on.
OUTSIDE = re.compile(r"/work/|\.\./shared|shared/docs|shared/seeds")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
# A document, then its section's heading in quotes: `docs/LOG.md, "Token trees"`, `[docs/LOG.md](docs/LOG.md), "X"`.
QUOTED_SECTION = re.compile(r"(?<![\w/.*'\"-])((?:[\w.-]+/)*[\w-]+\.md)\)?`?(?:,\s*|\s+|'s\s+)\"([^\"]{3,120}?)\"")
JOIN_LINES = re.compile(r"[ \t]*\n[ \t]*(?:#+[ \t]*|\*[ \t]+)?")  # a citation wrapped in prose, a list or a comment
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*$", re.M)
LEAD = re.compile(r"\*\*([^*]+)\*\*|(?<![*\w])\*([^*\n]+)\*(?![*\w])")


def walk(root: Path, suffixes: set[str], names: frozenset[str] | set[str] = frozenset()) -> Iterator[Path]:
    """Files under ``root`` with one of ``suffixes`` (or one of ``names``), hidden and build folders skipped.

    This file is skipped too: it holds the bad examples its own last test feeds to the checks."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS and not d.endswith(".egg-info")
        )
        for name in sorted(files):
            path = Path(folder) / name
            if (path.suffix in suffixes or name in names) and path.resolve() != SELF:
                yield path


def _inside(root: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def missing_citations(root: Path) -> list[str]:
    """``file:line: name`` for each cited .md file that is in neither the root nor the citing file's folder."""
    problems = []
    for path in walk(root, {".py", ".md"}):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in MD_NAME.findall(line):
                candidates = [root / name, path.parent / name]
                if not any(c.is_file() and _inside(root, c) for c in candidates):
                    problems.append(f"{path.relative_to(root)}:{n}: cites {name}, which is not in the repository")
    return problems


def missing_sections(root: Path) -> list[str]:
    """``file:line: name §N`` for each section number that the cited ALGORITHMS.md / STYLE.md does not have."""
    problems, sections = [], {}
    for path in walk(root, {".py", ".md"}):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name, number in SECTION.findall(line):
                target = next((c for c in (root / name, path.parent / name) if c.is_file()), None)
                if target is None:
                    continue  # reported by missing_citations
                if target not in sections:
                    sections[target] = set(HEADING_NUMBER.findall(target.read_text(encoding="utf-8")))
                if number not in sections[target]:
                    problems.append(f"{path.relative_to(root)}:{n}: {name} has no section §{number}")
    return problems


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "").replace("*", "")).strip().lower()


def missing_quoted_sections(root: Path) -> list[str]:
    """``file: name "section"`` for each section cited by its heading in quotes that the cited file has neither as
    (part of) a heading nor as a bold or italic lead."""
    problems, sections = [], {}
    for path in walk(root, {".py", ".md"}):
        text = JOIN_LINES.sub(" ", path.read_text(encoding="utf-8"))
        for name, quoted in QUOTED_SECTION.findall(text):
            target = next((c for c in (root / name, path.parent / name) if c.is_file()), None)
            if target is None:
                continue  # reported by missing_citations
            if target not in sections:
                body = target.read_text(encoding="utf-8")
                sections[target] = [_plain(h) for h in HEADING.findall(body)] + [
                    _plain(a or b) for a, b in LEAD.findall(body)
                ]
            if not any(_plain(quoted) in s for s in sections[target]):
                problems.append(f'{path.relative_to(root)}: {name} has no section "{quoted}"')
    return problems


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("**", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor the headings of a markdown file make (a repeated heading's as ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        s = slug(heading)
        seen[s] = seen.get(s, -1) + 1
        if seen[s]:
            seen[f"{s}-{seen[s]}"] = 0
    return set(seen)


def outside_paths(root: Path) -> list[str]:
    """``file:line: text`` for each mention of a path outside the repository in a source or documentation file."""
    problems = []
    for path in walk(root, SOURCE_SUFFIXES, SOURCE_NAMES):
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                problems.append(f"{path.relative_to(root)}:{n}: names a path outside the repository: {line.strip()}")
    return problems


def broken_links(root: Path, path: Path) -> list[str]:
    """``file: target`` for each relative link of a markdown file that does not resolve to a file or folder inside
    the repository (web links, mail links and in-page anchors are not checked)."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    problems = []
    for target in LINK.findall(text) + REF_LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        file_part = target.split("#", 1)[0].split("?", 1)[0]
        resolved = (root / file_part.lstrip("/")) if file_part.startswith("/") else (path.parent / file_part)
        if not resolved.exists() or not _inside(root, resolved):
            problems.append(f"{path.relative_to(root)}: link to {target} does not resolve inside the repository")
    for target in LINK.findall(text) + REF_LINK.findall(text):  # the #anchor of a link to a markdown file
        if "#" not in target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue
        file_part, anchor = target.split("#", 1)
        resolved = path if not file_part else path.parent / file_part
        if resolved.suffix == ".md" and resolved.is_file() and anchor not in anchors(resolved):
            problems.append(f"{path.relative_to(root)}: link to {target}: no heading makes #{anchor}")
    return problems


def markdown_manuals(root: Path) -> list[Path]:
    docs = root / "docs"
    return [root / "README.md", *(walk(docs, {".md"}) if docs.is_dir() else [])]


# ----------------------------------------------------------------------------------------------------------
# The repository


def test_every_cited_document_is_in_the_repository():
    problems = missing_citations(ROOT)
    assert not problems, "\n".join(problems)


def test_every_cited_section_exists():
    problems = missing_sections(ROOT)
    assert not problems, "\n".join(problems)


def test_every_section_cited_by_its_heading_exists():
    problems = missing_quoted_sections(ROOT)
    assert not problems, "\n".join(problems)


def test_no_file_names_a_path_outside_the_repository():
    problems = outside_paths(ROOT)
    assert not problems, "\n".join(problems)


def test_the_readme_is_a_manual_of_at_most_300_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move results to docs/"


def test_relative_links_in_the_readme_and_docs_resolve():
    problems = [p for path in markdown_manuals(ROOT) for p in broken_links(ROOT, path)]
    assert not problems, "\n".join(problems)


def test_the_algorithm_and_style_notes_have_their_numbered_sections():
    algorithms = set(HEADING_NUMBER.findall((ROOT / "docs" / "ALGORITHMS.md").read_text(encoding="utf-8")))
    style = set(HEADING_NUMBER.findall((ROOT / "docs" / "STYLE.md").read_text(encoding="utf-8")))
    assert {"0", "1", "2", "3", "4"} <= algorithms
    assert {str(n) for n in range(1, 12)} <= style


# ----------------------------------------------------------------------------------------------------------
# The checks themselves, on a small made-up repository: each one catches what it is for


def test_the_checks_catch_each_kind_of_problem(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ALGORITHMS.md").write_text("# A\n\n## 0. Zero\n\n## 1. One\n")
    (tmp_path / "docs" / "PACER.md").write_text(
        "See [the notes](ALGORITHMS.md) and [gone](GONE.md).\n\n## Which head? (`t=auto`)\n\n**A lead.** Text.\n"
        "[here](#which-head-tauto), [there](ALGORITHMS.md#1-one), [lost](ALGORITHMS.md#9-nine), [no](#nowhere)\n"
        'Cited: docs/ALGORITHMS.md, "Zero"; ALGORITHMS.md\'s "One"; docs/PACER.md, "A lead"; docs/PACER.md, "Gone away"\n'
    )
    (tmp_path / "README.md").write_text(
        "[ok](docs/PACER.md) ![img](assets/x.png) [web](https://example.org)\n"
        "[up](../elsewhere.md)\n```\nnot a [link](nowhere.md)\n```\n"
    )
    (tmp_path / "mod.py").write_text(
        '"""Rule (docs/ALGORITHMS.md §1), bad section (docs/ALGORITHMS.md §7), bare (ALGORITHMS.md §0)."""\n'
        "# from /work/main/notes and ../shared/docs/STYLE.md\n"
    )

    cited = missing_citations(tmp_path)
    assert any("mod.py:1: cites ALGORITHMS.md" in p for p in cited)  # bare name in code: not at the root
    assert any("docs/PACER.md:1: cites GONE.md" in p for p in cited)
    assert not any("docs/ALGORITHMS.md," in p or "docs/PACER.md," in p for p in cited)

    sections = missing_sections(tmp_path)
    assert sections == ["mod.py:1: docs/ALGORITHMS.md has no section §7"]

    outside = outside_paths(tmp_path)
    assert [p.split(":")[:2] for p in outside] == [["mod.py", "2"]]

    links = broken_links(tmp_path, tmp_path / "README.md")
    assert any("assets/x.png" in p for p in links) and any("../elsewhere.md" in p for p in links)
    assert not any("docs/PACER.md" in p or "example.org" in p or "nowhere.md" in p for p in links)
    pacer_links = broken_links(tmp_path, tmp_path / "docs" / "PACER.md")
    assert any("GONE.md" in p for p in pacer_links)
    assert sorted(p.split("no heading makes ")[1] for p in pacer_links if "no heading" in p) == ["#9-nine", "#nowhere"]

    assert missing_quoted_sections(tmp_path) == ['docs/PACER.md: docs/PACER.md has no section "Gone away"']
    assert (
        slug("Where a round's time goes (`python -m spec_core costs`)")
        == "where-a-rounds-time-goes-python--m-spec_core-costs"
    )


def test_fmt_skip_only_where_a_table_reads_better():
    """The formatter lays the code out; ``# fmt: skip`` stays for the rare table that truly reads better."""
    import subprocess

    files = subprocess.run(["git", "ls-files", "*.py"], capture_output=True, text=True, cwd=ROOT).stdout.split()
    count = sum((ROOT / f).read_text(encoding="utf-8").count("# fmt: " + "skip") for f in files if (ROOT / f).exists())
    assert count <= 20, count


# A path into the repository's code, tests, docs or scripts, as the README and docs/ cite it (a glob's ``*`` allowed).
CITED_PATH = re.compile(r"(?<![\w/.-])((?:tests|docs|spec_core|scripts)/[\w./*-]*[\w*/])")


def missing_paths(root: Path) -> list[str]:
    """``FILE:LINE: PATH`` for every cited path in README.md and docs/*.md that names nothing in ``root``."""
    missing = []
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for m in CITED_PATH.finditer(line):
                path = m.group(1).rstrip(".")
                found = any(root.glob(path)) if "*" in path else (root / path).exists()
                if not found:
                    missing.append(f"{doc.relative_to(root)}:{n}: {path}")
    return missing


def test_every_path_the_readme_and_docs_cite_exists():
    """A newcomer can follow every ``tests/…``, ``docs/…``, ``spec_core/…`` and ``scripts/…`` path they read."""
    assert not missing_paths(ROOT)


def test_the_path_check_catches_a_missing_path(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    (tmp_path / "README.md").write_text("see `tests/test_a.py`, `tests/test_*.py` and `tests/test_gone.py`.\n")
    assert missing_paths(tmp_path) == ["README.md:1: tests/test_gone.py"]
