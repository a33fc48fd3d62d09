"""Threads that fit the cores: torch's intra-op threads from the cores this process may use and from the runs that
share them, so that one visit never oversubscribes the machine.

A CPU forward of the embedded target splits its matrix products over torch's intra-op threads. Two processes with
two threads each on a 2-core machine are four threads on two cores: each waits for its slowest thread, and an
OpenMP thread that spins while it waits burns the core another one needs (docs/LOG.md, "Threads beside
another job"). So:

- the thread count comes from ``os.sched_getaffinity`` (the cores a container or ``taskset`` leaves us), divided
  among the requests this process runs at once (:func:`threads_for`);
- OpenMP's waiting threads spin only briefly before they sleep (``GOMP_SPINCOUNT=1000``, set by the package
  before torch loads its OpenMP runtime, unless the user set it or ``OMP_WAIT_POLICY``). Measured on this
  project's 2-core Zen 5 EPYC, a 48-token ``fixed:2`` (int8, 2 threads): libgomp's default spin 0.64 s quiet and
  6-13 s beside a second such process; ``PASSIVE`` 1.2 s quiet; a 1,000-iteration spin 0.72 s quiet and 1.6-1.9 s
  beside a second one (docs/LOG.md, "Threads beside another job").

The count is decided from these inputs alone, never from the load of the moment, so the same request runs the
same arithmetic on a quiet or a busy machine.
"""

from __future__ import annotations

import os

WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
SPIN_ENV = "GOMP_SPINCOUNT"  # libgomp (torch's OpenMP on Linux): iterations a waiting thread spins before it sleeps
SPIN = "1000"


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity; all of ``os.cpu_count()`` where affinity is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_for(at_once: int = 1, cores: int | None = None) -> int:
    """Intra-op threads for each of ``at_once`` runs sharing this process's cores (at least one)."""
    if at_once < 1:
        raise ValueError(f"at_once must be >= 1, got {at_once}")
    return max(1, (cores if cores is not None else usable_cores()) // at_once)


def apply_threads(threads: int | None = None, at_once: int = 1) -> int:
    """Set torch's intra-op threads: ``threads`` when given (``--threads``), else :func:`threads_for`; returns it."""
    import torch  # kept off this module's import: spec_core/__init__ sets the wait policy before torch loads

    n = int(threads) if threads else threads_for(at_once)
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def quiet_waits() -> None:
    """Make OpenMP's idle threads spin briefly, then sleep (``GOMP_SPINCOUNT=1000``), unless the user chose a
    spin or a wait policy; it takes effect only if set before torch loads its OpenMP runtime."""
    if WAIT_POLICY_ENV not in os.environ:
        os.environ.setdefault(SPIN_ENV, SPIN)
