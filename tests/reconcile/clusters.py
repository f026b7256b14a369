"""The clusters reconcile and sync tests run against, behind one small interface:
Berth's simulated backend, and a real kube-apiserver that Berth reaches with the
official client as its ServiceAccount (tests/envtest/cluster.py). ``backend`` is
Berth; the other methods are someone else acting on the cluster."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Protocol

from queues.backends.base import TYPES, ClusterBackend
from queues.backends.simulated import SimulatedBackend
from queues.models import SimulatedEvent


class ClusterUnderTest(Protocol):
    backend: ClusterBackend

    def objects(self, kind: str) -> list[dict[str, Any]]: ...

    def edit(
        self, kind: str, name: str, change: Callable[[dict[str, Any]], None], namespace: str = ""
    ) -> None:
        """Change an object behind Berth's back (someone with kubectl)."""

    def add_foreign(self, obj: dict[str, Any]) -> Any:
        """An object Berth did not create."""

    def remove(self, kind: str, name: str, namespace: str = "") -> None:
        """Someone else (a controller, kubectl) deletes an object."""

    def set_status(
        self, kind: str, name: str, status: dict[str, Any], namespace: str = ""
    ) -> Any: ...

    def writes(self) -> int:
        """Write calls seen so far."""

    def expire_history(self) -> None:
        """Forget past resourceVersions: older watches get 410 Gone."""


class SimulatedCluster:
    def __init__(self) -> None:
        self.backend = SimulatedBackend()
        self._baseline = 0

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return self.backend.list(TYPES[kind])[0]

    def edit(
        self, kind: str, name: str, change: Callable[[dict[str, Any]], None], namespace: str = ""
    ) -> None:
        obj = copy.deepcopy(self.backend.get(TYPES[kind], name, namespace or None))
        assert obj is not None
        change(obj)
        self.backend.replace(obj)

    def add_foreign(self, obj: dict[str, Any]) -> Any:
        return self.backend.create(obj)

    def remove(self, kind: str, name: str, namespace: str = "") -> None:
        self.backend.delete(TYPES[kind], name, namespace or None)

    def set_status(self, kind: str, name: str, status: dict[str, Any], namespace: str = "") -> None:
        self.backend.patch_status(TYPES[kind], name, namespace or None, status)

    def writes(self) -> int:
        # Every write of the simulated backend appends exactly one change-log entry.
        return SimulatedEvent.objects.count()

    def expire_history(self) -> None:
        self.backend.prune_log(keep=1)
