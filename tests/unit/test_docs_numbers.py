"""Docs numbers that reproduce from a clone: every table in docs/ marked ``<!-- docs-numbers: COMMAND -->`` is
printed again by COMMAND, from committed files, and compared with what the docs say.

- ``python -m spec_core ...`` prints the markdown table itself: compared cell by cell, a number drifting by at most
  one unit of its last decimal (the precision the docs state), any other text equal.
- ``PYTHONPATH=. python scripts/NAME.py ...`` prints a plain-text table (its first block of lines, a header then
  one line a row): each docs row's numbers after its first cell are found, in order, in the script's row of the
  same index, each within one unit of the docs' last decimal; the rows are as many.

docs/RESULTS.md holds such tables (and says where the others are); docs/LOG.md, the dated log, holds none."""

from __future__ import annotations

import contextlib
import glob
import importlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(
    r"<!-- docs-numbers: ((?:PYTHONPATH=\. )?python (?:-m spec_core|scripts/[\w-]+\.py) .+?) -->\n((?:\|.*\|\n?)+)"
)
NUMBER = re.compile(r"^-?\d+(?:\.(\d+))?$")
NUMBER_IN_TEXT = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
SPEC_CORE = "python -m spec_core "


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

    words = shlex.split(command.removeprefix(SPEC_CORE))
    module = DELEGATED[(words[0], words[1])]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert importlib.import_module(module).main(words[2:]) == 0
    return out.getvalue().strip()


def run_script(command: str) -> str:
    """A ``scripts/NAME.py`` command's output, its ``main(argv)`` run in this process (globs expanded as a shell
    would, from the working folder)."""
    words = shlex.split(command.removeprefix("PYTHONPATH=. ").removeprefix("python "))
    spec = importlib.util.spec_from_file_location("docs_numbers_script", ROOT / words[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = [m for w in words[1:] for m in (sorted(glob.glob(w)) if any(c in w for c in "*?[") else [w])]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert module.main(argv) == 0
    return out.getvalue().strip()


def numbers(text: str) -> list[str]:
    """The numbers of a piece of text, as written (thousands' commas dropped)."""
    return [n.replace(",", "") for n in NUMBER_IN_TEXT.findall(text.replace("*", ""))]


def close(doc: str, now: str) -> bool:
    """``now`` equals the docs' number ``doc`` within one unit of the docs' last decimal."""
    decimals = doc.split(".")[1] if "." in doc else ""
    return abs(float(doc) - float(now)) <= 10.0 ** -len(decimals) + 1e-12


def row_found(doc_row: list[str], printed_line: str) -> bool:
    """Each number of the docs row after its first cell (the row's label) appears, in order, in the printed line."""
    printed = numbers(printed_line)
    i = 0
    for n in numbers(" | ".join(doc_row[1:])):
        while i < len(printed) and not close(n, printed[i]):
            i += 1
        if i == len(printed):
            return False
        i += 1
    return True


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
    docs = {doc for doc, _, _ in marked_tables()}
    assert {"PACER.md", "RESULTS.md"} <= docs and "LOG.md" not in docs


SCRIPT_TABLES = [t for t in marked_tables() if not t[1].startswith(SPEC_CORE)]


@pytest.mark.parametrize("doc, command, table", SCRIPT_TABLES, ids=lambda v: str(v)[:60])
def test_a_marked_script_table_reproduces(doc, command, table, monkeypatch):
    monkeypatch.chdir(ROOT)  # the commands name files by their path in the repository
    written = cells(table)[2:]  # the rows, without the header and the |---| line
    printed = run_script(command).split("\n\n")[0].splitlines()[1:]  # the first block's rows, without its header
    assert len(written) == len(printed), f"{doc}: `{command}` prints {len(printed)} rows, the docs have {len(written)}"
    drifted = [row[0] for row, line in zip(written, printed) if not row_found(row, line)]
    assert not drifted, f"{doc}: `{command}` no longer prints the numbers of these rows: {drifted}"


@pytest.mark.parametrize(
    "doc, command, table", [t for t in marked_tables() if t not in SCRIPT_TABLES], ids=lambda v: str(v)[:60]
)
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


def test_the_script_check_catches_a_drift():
    row = ["1/4", "93,723", "0.426 / 0.353 / 0.338"]
    assert row_found(row, "frac0.25  0.2500  93723  0.4261  0.3525  0.3381  1600")
    assert not row_found(row, "frac0.25  0.2500  93723  0.4261  0.3505  0.3381  1600")  # 0.353 drifted to 0.351
    assert not row_found(row, "frac0.25  0.2500  93723  0.3525  0.4261  0.3381  1600")  # out of order
    assert numbers("**0.475** / 1,629 rounds, -2.5") == ["0.475", "1629", "-2.5"]
