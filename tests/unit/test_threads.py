"""Threads that fit the cores (spec_core/core/threads.py): decided from the cores and the runs at once, never the load."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from spec_core.core import threads


@pytest.mark.parametrize("cores,at_once,want", [(2, 1, 2), (2, 2, 1), (2, 3, 1), (16, 4, 4), (1, 1, 1)])
def test_threads_share_the_cores_among_the_runs_at_once(cores, at_once, want):
    assert threads.threads_for(at_once, cores) == want


def test_threads_refuse_nonsense():
    with pytest.raises(ValueError):
        threads.threads_for(0, 2)


def test_the_usable_cores_are_the_affinity(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert threads.usable_cores() == 3 and threads.threads_for(1) == 3


def test_apply_threads_sets_torch_and_honours_a_given_count():
    before = torch.get_num_threads()
    try:
        assert threads.apply_threads(1) == 1 and torch.get_num_threads() == 1
        assert threads.apply_threads(None, at_once=1) == threads.threads_for(1)
    finally:
        torch.set_num_threads(before)


def test_the_package_shortens_openmp_spins_unless_the_user_chose():
    """``import spec_core`` sets GOMP_SPINCOUNT=1000 before torch loads (libgomp's long default spin beside
    another such process ran a 48-token generation 6-13 s against 0.64 s quiet: docs/LOG.md, "Threads beside
    another job"); a user's own spin or wait policy is left as it is."""
    code = "import os, spec_core, torch; print(os.environ.get('GOMP_SPINCOUNT'))"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    run = lambda e: subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)  # noqa: E731
    assert run(env).stdout.strip() == threads.SPIN
    assert run({**env, "GOMP_SPINCOUNT": "50"}).stdout.strip() == "50"
    assert run({**env, "OMP_WAIT_POLICY": "ACTIVE"}).stdout.strip() == "None"
