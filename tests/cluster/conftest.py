"""Sync runs against both clusters, like reconcile; the cluster app's other
tests use the jobs tests' demo organisation."""

from tests.jobs.conftest import org
from tests.reconcile.conftest import cluster

__all__ = ["cluster", "org"]
