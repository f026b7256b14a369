"""Sync runs against both clusters, like reconcile."""

from tests.reconcile.conftest import cluster

__all__ = ["cluster"]
