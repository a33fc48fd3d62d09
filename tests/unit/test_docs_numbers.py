"""Docs numbers that reproduce from a clone: every table in docs/ marked ``<!-- docs-numbers: COMMAND -->`` is
printed again by COMMAND (``python -m spec_core ...``, from shipped assets) and compared cell by cell. A number may
drift by at most one unit of its last decimal (the precision the docs state); any other text must match."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"<!-- docs-numbers: python -m spec_core (.+?) -->\n((?:\|.*\|\n?)+)")
NUMBER = re.compile(r"^-?\d+(?:\.(\d+))?$")


def marked_tables() -> list[tuple[str, str, str]]:
    """(doc, command, table) for every marked table in docs/."""
    found = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for m in MARK.finditer(doc.read_text(encoding="utf-8")):
            found.append((doc.name, m.group(1), m.group(2).strip()))
    return found


def cells(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()]


def run(command: str) -> str:
    """The command's printed table, run in this process (``analyze NAME`` → its module's ``main``)."""
    from spec_core.__main__ import DELEGATED

    words = shlex.split(command)
    module = DELEGATED[(words[0], words[1])]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert importlib.import_module(module).main(words[2:]) == 0
    return out.getvalue().strip()


def same_cell(doc: str, now: str) -> bool:
    parts_doc, parts_now = doc.split(), now.split()
    if len(parts_doc) != len(parts_now):
        return False
    for a, b in zip(parts_doc, parts_now):
        m = NUMBER.match(a)
        if m and NUMBER.match(b):
            if abs(float(a) - float(b)) > 10.0 ** -len(m.group(1) or "") + 1e-12:
                return False
        elif a != b:
            return False
    return True


def test_the_docs_mark_tables_to_reproduce():
    assert any(doc == "PACER.md" for doc, _, _ in marked_tables())


@pytest.mark.parametrize("doc, command, table", marked_tables(), ids=lambda v: str(v)[:60])
def test_a_marked_docs_table_reproduces(doc, command, table, monkeypatch):
    monkeypatch.chdir(ROOT)  # the commands name assets by their path in the repository
    written, printed = cells(table), cells(run(command))
    assert len(written) == len(printed), f"{doc}: `{command}` prints {len(printed)} lines, the docs have {len(written)}"
    drifted = [
        f"{row[0]} / {header}: docs {a!r}, now {b!r}"
        for row, now in zip(written, printed)
        for header, a, b in zip(written[0], row, now)
        if not same_cell(a, b)
    ]
    assert not drifted, f"{doc}: `{command}` no longer prints what the docs say: {drifted}"


def test_the_check_catches_a_drift():
    assert same_cell("1.241", "1.242") and not same_cell("1.241", "1.243")
    assert same_cell("0.01 … 0.15", "0.02 … 0.15") and not same_cell("0.01 … 0.15", "0.04 … 0.15")
    assert not same_cell("paper head", "hybrid head")
