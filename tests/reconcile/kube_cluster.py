"""The kubernetes backend — the official client over HTTP — against the
loopback API-server double."""

from __future__ import annotations

import copy
from collections.abc import Callable
from types import TracebackType
from typing import Any

from queues.backends.base import TYPES
from queues.backends.kubernetes import KubernetesBackend
from tests.kube.apiserver import FakeApiServer


class KubeCluster:
    def __init__(self, **server_options: Any) -> None:
        self.server = FakeApiServer(**server_options)

    def __enter__(self) -> KubeCluster:
        self.server.start()
        self.backend = KubernetesBackend(self.server.api_client(), request_timeout=5)
        return self

    def __exit__(
        self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
    ) -> None:
        self.server.stop()

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return self.backend.list(TYPES[kind])[0]

    def _stored(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        rtype = TYPES[kind]
        obj = self.server.get_object(rtype.group or None, rtype.plural, name, namespace or None)
        assert obj is not None, (kind, name)
        return copy.deepcopy(obj)

    def edit(
        self, kind: str, name: str, change: Callable[[dict[str, Any]], None], namespace: str = ""
    ) -> None:
        obj = self._stored(kind, name, namespace)
        change(obj)
        self.server.put_object(obj, field_manager="kubectl-edit")

    def add_foreign(self, obj: dict[str, Any]) -> None:
        self.server.put_object(copy.deepcopy(obj), field_manager="kubectl-create")

    def set_status(self, kind: str, name: str, status: dict[str, Any], namespace: str = "") -> None:
        obj = self._stored(kind, name, namespace)
        obj["status"] = status
        self.server.put_object(obj, field_manager="kueue-controller")

    def writes(self) -> int:
        # A server-side dry run is a PATCH that persists nothing: not a write.
        return len([c for c in self.server.write_calls() if c.query.get("dryRun") != "All"])

    def expire_history(self) -> None:
        self.server.expire_watches()
