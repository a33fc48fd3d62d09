"""scripts/priced_rounds.py and scripts/hybrid_rules.py: a user's wrong file or setting is one line and exit 2,
said before the pair loads (no model is touched here), and a table named by ``--table`` is called that."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from spec_core.core import cost_tables
from spec_core.core.errors import SpecScopeError

ROOT = Path(__file__).resolve().parents[2]
TABLE = str(cost_tables.SHIPPED_DIR / "epyc-zen4-avx512-1thread.json")


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def no_model(monkeypatch):
    """Any attempt to load the pair fails the test: every refusal below must come first."""
    import spec_core.model.models as models

    def refuse(*args, **kwargs):
        raise AssertionError("the pair was loaded before the input was checked")

    monkeypatch.setattr(models, "load_pair", refuse)


@pytest.fixture
def files(tmp_path):
    prompts = tmp_path / "mine.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Name three rivers."}\n{"id": "b", "prompt": "Say hello."}\n')
    not_json = tmp_path / "notes.txt"
    not_json.write_text("these are my notes\nnot a table\n")
    not_table = tmp_path / "other.json"
    not_table.write_text('{"a": 1}')
    return {"prompts": str(prompts), "not_json": str(not_json), "not_table": str(not_table), "dir": tmp_path}


@pytest.mark.parametrize(
    "args,says",
    [
        (["--methods", "ar", "--prompts", "{dir}/none.jsonl"], "does not exist"),
        (["--methods", "ar", "--prompts", "{prompts}", "--table", "{dir}/none.json"], "--table names"),
        (["--methods", "ar", "--prompts", "{prompts}", "--table", "{not_json}"], "is not a cost table"),
        (["--methods", "ar", "--prompts", "{prompts}", "--table", "{not_table}"], "is not a cost table"),
        (["--methods", "ar", "--prompts", "{not_json}"], "prompt file"),
        (["--methods", "ar,bogus", "--prompts", "{prompts}"], "unknown method part 'bogus'"),
        (["--methods", ",", "--prompts", "{prompts}"], "--methods is empty"),
        (["--methods", "ar", "--prompts", "{prompts}", "--max-new-tokens", "100000"], "--max-new-tokens must be"),
        (["--methods", "ar", "--prompts", "{prompts}", "--head-ms", "nan"], "--head-ms must be"),
    ],
)
def test_priced_rounds_refuses_bad_input_in_one_line(args, says, files, no_model, capsys):
    code = _script("priced_rounds").main([a.format(**files) for a in args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and says in err and len(err.splitlines()) == 1


def test_hybrid_rules_names_its_flag_for_a_missing_table(files, capsys):
    code = _script("hybrid_rules").main(
        ["replay", "--fit", files["prompts"], "--on", files["prompts"], "--table", f"{files['dir']}/none.json"]
    )
    out = capsys.readouterr().out.strip()
    assert code == 2 and "--table names" in out and len(out.splitlines()) == 1


def test_a_given_table_that_is_not_json_is_a_one_line_error(files, monkeypatch):
    with pytest.raises(SpecScopeError, match="is not a cost table"):
        cost_tables.given_table(files["not_json"])
    monkeypatch.setenv(cost_tables.COSTS_ENV, files["not_json"])
    with pytest.raises(SpecScopeError, match="is not a cost table"):
        cost_tables.table_for("cpu")
    assert cost_tables.given_table(TABLE, "--table").label == "given in --table (epyc-zen4-avx512-1thread.json)"


@pytest.mark.parametrize("which,says", [("not_json", "is not JSON"), ("not_table", "was not written by `record`")])
def test_hybrid_rules_refuses_a_file_record_did_not_write(which, says, files, capsys):
    code = _script("hybrid_rules").main(["replay", "--fit", files[which], "--on", files[which], "--table", TABLE])
    out = capsys.readouterr().out.strip()
    assert code == 2 and says in out and len(out.splitlines()) == 1
