"""Costs are data (spec_core/core/cost_tables.py): a run's choices follow the profile it is handed, never a clock.

The same pair, precision, profile, sampling settings and seed give the same rounds however slow the machine is;
the profile is recorded in the run's first event, its JSON-lines export and the bench's CSV; nothing on a
request's path times anything; the table in force is read at once and named honestly.
"""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import make_tiny_pair

from spec_core.analysis import machine
from spec_core.analysis.bench import run_bench
from spec_core.core import cost_tables, precision
from spec_core.core.cost_model import CostProfile
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.engine.session import event_from_record, event_record
from spec_core.model import pass_timing

FLAT = CostProfile(widths=(1, 8, 16), target_ms=(20.0, 21.0, 22.0), draft_ms=1.0, name="flat")  # wide passes free
STEEP = CostProfile(widths=(1, 2, 8), target_ms=(20.0, 40.0, 160.0), draft_ms=15.0, name="steep")  # dear passes
PRICED = ["hybrid", "lookup", "fixed:2", "cost", "hybrid:min=1,max=3,k=8", "lookup+cost:max=4"]
PROMPT = "abcdefgabcdefgabcdxyzabcdefg"


def _rounds(run: Generation) -> list[tuple]:
    return [(e.draft_tokens, e.accepted, e.next_token, e.draft_sources, e.stop_reason) for e in run.rounds()]


@pytest.fixture
def no_timing_anywhere(monkeypatch):
    """Every way this project times a pass or measures a table fails the test if it is called."""

    def refuse(*args, **kwargs):
        raise AssertionError("a request's path timed the machine")

    for module, name in (
        (pass_timing, "target_forward_ms"),
        (pass_timing, "interleaved_median_ms"),
        (machine, "measure_profile"),
        (machine, "machine_costs"),
    ):
        monkeypatch.setattr(module, name, refuse)


@pytest.mark.parametrize("method", PRICED)
def test_the_rounds_follow_the_profile_not_the_clock(method, one_thread, monkeypatch, no_timing_anywhere):
    """A clock that runs 50× slow and jumps at random (a busy machine) changes no round of a priced method."""
    pair = make_tiny_pair(vocab=16, draft="feature")
    quiet = _rounds(Generation(pair, PROMPT, method, 48, SamplingConfig(), costs=STEEP))

    ticks = itertools.count()
    jumps = itertools.cycle([0.0, 3.0, 0.5, 40.0, 0.01])
    monkeypatch.setattr("time.perf_counter", lambda: next(ticks) * 50.0 + next(jumps))
    busy = _rounds(Generation(pair, PROMPT, method, 48, SamplingConfig(), costs=STEEP))
    assert busy == quiet


def test_the_profile_is_what_decides(one_thread, no_timing_anywhere):
    """The ``cost`` policy drafts longer when wide passes are free than when they are dear: the profile handed to
    the run is the input its lengths follow."""
    pair = make_tiny_pair(vocab=16, draft="copy")  # the target drafting for itself: every draft is kept
    lengths = {}
    for profile in (FLAT, STEEP):
        run = Generation(pair, PROMPT, "cost", 40, SamplingConfig(), costs=profile)
        lengths[profile.name] = max(e.draft_len for e in run.rounds())
    assert lengths["flat"] > lengths["steep"], lengths


def test_the_profile_is_recorded_and_read_back(one_thread):
    """Round 0 carries the profile (CostProfile's fields); the JSON-lines record keeps it; later rounds do not."""
    pair = make_tiny_pair(vocab=16, draft="feature")
    run = Generation(pair, PROMPT, "hybrid", 24, SamplingConfig(), costs=STEEP)
    events = list(run.rounds())
    assert CostProfile.from_dict(events[0].costs) == STEEP
    assert all(e.costs is None for e in events[1:])
    line = json.loads(json.dumps(event_record(events[0], prompt_id="p")))
    assert CostProfile.from_dict(event_from_record(line).costs) == STEEP
    assert cost_tables.recorded_costs({"hybrid": events}) == STEEP


def test_the_bench_csv_names_the_table_and_repeats_its_rounds(one_thread, monkeypatch, no_timing_anywhere):
    """Two bench runs, the second under a slowed clock: identical rounds and outputs, and the table in the CSV."""
    pair = make_tiny_pair(vocab=16, draft="feature")
    prompts = [{"id": "a", "prompt": PROMPT, "category": ""}, {"id": "b", "prompt": "xyzxyzxyzab", "category": ""}]
    cols = ["method", "prompt_id", "target_forwards", "drafted_tokens", "accepted_tokens", "output_sha"]
    quiet = run_bench(pair, prompts, ["hybrid"], 32, repeats=1, progress=False)
    ticks = itertools.count()
    monkeypatch.setattr("time.perf_counter", lambda: next(ticks) * 7.0)
    busy = run_bench(pair, prompts, ["hybrid"], 32, repeats=1, progress=False)
    assert quiet[cols].equals(busy[cols])
    assert set(quiet["costs"]) == {cost_tables.table_for("cpu").label}


def test_the_table_in_force_is_chosen_at_once_and_named(tmp_path, monkeypatch, no_timing_anywhere):
    """No table measured here: the one shipped for this CPU's kind (or the nearest) answers, and the line says so
    with how to measure; a table this machine measured wins; ``$SPECSCOPE_COSTS`` wins over both."""
    monkeypatch.setenv("SPECSCOPE_CACHE", str(tmp_path))
    monkeypatch.delenv(cost_tables.COSTS_ENV, raising=False)
    table = cost_tables.table_for("cpu")
    assert table.origin == "shipped" and "shipped for" in table.label
    assert cost_tables.MEASURE_HINT in table.sentence("int8", True)
    mine = {p: CostProfile(widths=(1, 4), target_ms=(30.0, 33.0), draft_ms=2.0) for p in precision.CPU_PRECISIONS}
    precision.save_table(mine)
    table = cost_tables.table_for("cpu")
    assert table.origin == "measured" and "measured on this machine on" in table.label
    assert cost_tables.MEASURE_HINT not in table.sentence("int8", True)
    monkeypatch.setenv(cost_tables.COSTS_ENV, str(cost_tables.SHIPPED_DIR / "xeon-amx-1thread.json"))
    assert cost_tables.table_for("cpu").origin == "given"
    monkeypatch.setenv(cost_tables.COSTS_ENV, str(tmp_path / "none.json"))
    with pytest.raises(Exception, match="not a file"):
        cost_tables.table_for("cpu")


@pytest.mark.parametrize(
    "flags,kind",
    [
        ({"avx2", "avx512f", "amx_bf16", "amx_tile"}, "amx"),
        ({"avx2", "avx512f", "avx512_bf16"}, "avx512"),
        ({"avx2", "fma"}, "avx2"),
        ({"neon"}, "other"),
    ],
)
def test_cpu_kinds_from_flags(flags, kind):
    assert cost_tables.cpu_kind(frozenset(flags)) == kind


def test_every_cpu_kind_finds_a_shipped_table_and_says_when_it_is_another_kinds():
    shipped = cost_tables.shipped_tables()
    assert {"amx", "avx512"} <= set(shipped)
    for kind in cost_tables.CPU_KINDS:
        table = cost_tables.shipped_table(kind)
        assert table is not None and set(precision.CPU_PRECISIONS) <= set(table.profiles)
        assert bool(table.notes) == (kind not in shipped)
        assert all(p.source == "reference" and "reference" in p.name for p in table.profiles.values())


def test_a_shipped_table_is_matched_to_the_cpus_family_where_one_was_measured_on_it():
    """Zen 4 and Zen 5 both have AVX-512, but Zen 4 runs it on 256-bit halves: its int8 pass over 2 tokens costs
    1.26 plain steps, Zen 5's one. Each gets the table measured on its family; another family gets the kind's
    first table and is told so."""
    zen4 = cost_tables.shipped_table("avx512", family="AuthenticAMD family 25")
    zen5 = cost_tables.shipped_table("avx512", family="AuthenticAMD family 26")
    other = cost_tables.shipped_table("avx512", family="GenuineIntel family 6")
    assert zen4.path.endswith("epyc-zen4-avx512-1thread.json") and zen5.path.endswith("epyc-avx512-1thread.json")
    assert zen4.profile("int8").verify_ratio(2) > 1.2 > 1.05 > zen5.profile("int8").verify_ratio(2)
    assert other.path == zen5.path and "another family" in other.label
    assert "another family" not in zen4.label + zen5.label
    assert "AuthenticAMD family 25" in zen4.label and "AuthenticAMD family 26" in zen5.label  # which one answered
    assert cost_tables.shipped_table("avx512", family="").path == zen5.path  # family unknown: the kind's first


def test_a_gpu_is_priced_by_the_model_not_a_clock(no_timing_anywhere, monkeypatch):
    monkeypatch.delenv(cost_tables.COSTS_ENV, raising=False)
    table = cost_tables.table_for("cuda", draft_ratio=0.1)
    assert table.origin == "model" and table.profile("bfloat16").source == "model"
    assert table.profile("bfloat16").draft_ms == pytest.approx(0.1)


@pytest.mark.embedded
def test_a_fresh_machine_generates_at_once_and_says_which_table(embedded_f32, tmp_path):
    """``generate`` with a fresh cache (the converted target linked in, no cost table): it answers without timing
    the machine (no table is written), and one line names the precision, the shipped table and how to measure."""
    import os
    import subprocess
    import sys

    from spec_core.core.assets import cache_dir
    from spec_core.model.models import EMBEDDED_NAME

    converted = cache_dir() / EMBEDDED_NAME
    assert converted.exists()  # embedded_f32 converted it
    (tmp_path / EMBEDDED_NAME).symlink_to(converted, target_is_directory=True)  # as copied in, without 0.5 GB
    env = {k: v for k, v in os.environ.items() if k not in ("SPECSCOPE_PRECISION", cost_tables.COSTS_ENV)}
    env["SPECSCOPE_CACHE"] = str(tmp_path)
    command = [sys.executable, "-m", "spec_core", "generate", "--prompt", "Hi", "--method", "ar"]
    out = subprocess.run([*command, "--max-new-tokens", "4"], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "machine-costs").exists()  # nothing was measured
    said = [line for line in out.stderr.splitlines() if line.startswith("precision ")]
    assert len(said) == 1 and "chosen by auto" in said[0] and "shipped for" in said[0], out.stderr
    assert cost_tables.MEASURE_HINT in said[0] and "4 tokens" in out.stderr
