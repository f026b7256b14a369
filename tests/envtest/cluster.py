"""The real API server as the cluster a test runs against.

``EnvtestCluster`` is the kubernetes side of ``tests.reconcile.clusters.
ClusterUnderTest``: Berth's ``KubernetesBackend`` speaks as Berth's
ServiceAccount (so every call is checked against the shipped role), while the
test acts as the admin — someone with kubectl, or Kueue writing Workload
status with its own field manager. ``reset`` puts the server back as the
session started it, so each test starts with no Kueue objects, no jobs and no
namespaces but the system ones.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client.rest import ApiException

from queues.backends.base import TYPES, ResourceType
from queues.backends.kubernetes import KubernetesBackend
from tests.envtest.controlplane import BERTH_USER, SYSTEM_NAMESPACES, ControlPlane, is_write

APPLY = "application/apply-patch+yaml"
# The user agent of requests a test makes as Berth to show they are refused.
PROBE_AGENT = "berth-rbac-probe"
MERGE = "application/merge-patch+json"
# Everything a test may leave behind, by (group, version, plural, namespaced).
LEFTOVERS = (
    ("kueue.x-k8s.io", "v1beta2", "workloads", True),
    ("kueue.x-k8s.io", "v1beta2", "localqueues", True),
    ("batch", "v1", "jobs", True),
    ("jobset.x-k8s.io", "v1alpha2", "jobsets", True),
    ("kubeflow.org", "v1", "pytorchjobs", True),
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs", True),
    ("", "v1", "services", True),
    ("", "v1", "configmaps", True),
    ("kueue.x-k8s.io", "v1beta2", "clusterqueues", False),
    ("kueue.x-k8s.io", "v1beta2", "cohorts", False),
    ("kueue.x-k8s.io", "v1beta2", "resourceflavors", False),
    # After the flavors that name them, as reconcile prunes.
    ("kueue.x-k8s.io", "v1beta2", "topologies", False),
    ("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", False),
    ("kueue.x-k8s.io", "v1beta2", "admissionchecks", False),
    ("", "v1", "nodes", False),
)


def _path(group: str, version: str, plural: str, namespace: str | None, name: str = "") -> str:
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{where}/{plural}" + (f"/{name}" if name else "")


def _rtype_path(rtype: ResourceType, name: str, namespace: str | None) -> str:
    return _path(rtype.group, rtype.version, rtype.plural, namespace, name)


class EnvtestCluster:
    """Berth as its ServiceAccount; the test as the cluster's admin."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._berth_api = plane.berth_client()
        self.backend = KubernetesBackend(self._berth_api, request_timeout=30)
        self.admin_api = plane.api_client()
        self.since = plane.audit.offset()

    def close(self) -> None:
        self._berth_api.close()
        self.admin_api.close()

    # ---------------------------------------------------------- admin calls

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: list[tuple[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """One request as the admin; the answer as a dict (ApiException on an error)."""
        serialized = self.admin_api.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.admin_api.call_api(*serialized)
        data = response.read()
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response, body=data.decode(errors="replace"))
        return dict(json.loads(data)) if data else {}

    def objects(self, kind: str) -> list[dict[str, Any]]:
        rtype = TYPES[kind]
        answer = self.call("GET", _path(rtype.group, rtype.version, rtype.plural, None))
        items = answer.get("items", [])
        for item in items:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", rtype.api_version)
        return sorted(
            items,
            key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]),
        )

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        rtype = TYPES[kind]
        try:
            found = self.call("GET", _rtype_path(rtype, name, namespace or None))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        found.setdefault("kind", kind)
        found.setdefault("apiVersion", rtype.api_version)
        return found

    def edit(
        self, kind: str, name: str, change: Callable[[dict[str, Any]], None], namespace: str = ""
    ) -> None:
        """What ``kubectl edit`` does: read, change, replace (an update)."""
        obj = self.get(kind, name, namespace)
        assert obj is not None, (kind, name)
        obj = copy.deepcopy(obj)
        change(obj)
        self.call(
            "PUT",
            _rtype_path(TYPES[kind], name, namespace or None),
            obj,
            query=[("fieldManager", "kubectl-edit")],
        )

    def add_foreign(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An object Berth did not create (``kubectl create``). A Node keeps its
        status (the API server takes a Node's status on create, as a kubelet
        registering it sends it); other kinds get theirs with ``set_status``."""
        rtype = TYPES[obj["kind"]]
        namespace = obj["metadata"].get("namespace")
        return self.call(
            "POST",
            _path(rtype.group, rtype.version, rtype.plural, namespace),
            copy.deepcopy(obj),
            query=[("fieldManager", "kubectl-create")],
        )

    def remove(self, kind: str, name: str, namespace: str = "") -> None:
        """Someone (or a controller) deletes an object."""
        self.call(
            "DELETE",
            _rtype_path(TYPES[kind], name, namespace or None),
            query=[("propagationPolicy", "Background")],
        )

    def set_status(
        self,
        kind: str,
        name: str,
        status: dict[str, Any],
        namespace: str = "",
        manager: str = "kueue-controller",
    ) -> dict[str, Any]:
        """Replace the status the way a controller does (a merge patch of the
        status subresource as ``manager``): fields left out are left as they were,
        so every field of a fresh status is named."""
        obj = self.get(kind, name, namespace)
        assert obj is not None, (kind, name)
        old = obj.get("status") or {}
        body = {"status": {key: None for key in old if key not in status} | status}
        return self.call(
            "PATCH",
            _rtype_path(TYPES[kind], name, namespace or None) + "/status",
            body,
            content_type=MERGE,
            query=[("fieldManager", manager)],
        )

    # -------------------------------------------------------------- audit

    def berth_requests(self) -> list[dict[str, Any]]:
        """What Berth's ServiceAccount asked of the server since this cluster was
        handed to the test (the audit log, stage RequestReceived)."""
        return self.plane.audit.requests(self.since, user=BERTH_USER)

    def forbidden(self) -> list[str]:
        """Berth's requests the server refused for want of permission (403), but
        for those a test makes on purpose (user agent ``PROBE_AGENT``)."""
        return [
            f"{e['verb']} {e['requestURI']}: {e['responseStatus'].get('message', '')}"
            for e in self.plane.audit.events(self.since, user=BERTH_USER)
            if e.get("responseStatus", {}).get("code") == 403
            and PROBE_AGENT not in e.get("userAgent", "")
        ]

    def writes(self) -> int:
        """Write requests Berth made (server-side dry runs persist nothing)."""
        return sum(1 for event in self.berth_requests() if is_write(event))

    # -------------------------------------------------------------- history

    def expire_history(self) -> None:
        """Compact etcd: resourceVersions before now are gone. From here on Berth
        talks to the API server without a watch cache, whose watches come from
        etcd itself and so answer 410 Gone for a compacted version."""
        url = self.plane.etcd_watch_server()
        self.plane.compact_etcd()
        self._berth_api.close()
        self._berth_api = self.plane.berth_client(url)
        self.backend = KubernetesBackend(self._berth_api, request_timeout=30)

    # --------------------------------------------------------------- reset

    def reset(self) -> None:
        """Delete what the test left: Kueue objects, jobs, Services, Nodes and
        every namespace but the system ones. No namespace controller runs, so a
        namespace's objects are deleted first and the namespace is finalized by
        hand, as that controller would."""
        namespaces = [
            n["metadata"]["name"]
            for n in self.call("GET", "/api/v1/namespaces").get("items", [])
            if n["metadata"]["name"] not in SYSTEM_NAMESPACES
        ]
        for group, version, plural, namespaced in LEFTOVERS:
            for namespace in namespaces if namespaced else [None]:
                self._delete_all(group, version, plural, namespace)
        for name in namespaces:
            with contextlib.suppress(ApiException):
                self.call("DELETE", f"/api/v1/namespaces/{name}")
            with contextlib.suppress(ApiException):
                self.call(
                    "PUT",
                    f"/api/v1/namespaces/{name}/finalize",
                    {"metadata": {"name": name}, "spec": {"finalizers": []}},
                )
        deadline = time.monotonic() + 30
        while any(
            n["metadata"]["name"] not in SYSTEM_NAMESPACES
            for n in self.call("GET", "/api/v1/namespaces").get("items", [])
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("namespaces left by the test would not go away")
            time.sleep(0.05)

    def _delete_all(self, group: str, version: str, plural: str, namespace: str | None) -> None:
        path = _path(group, version, plural, namespace)
        items = self.call("GET", path).get("items", [])
        for item in items:
            if item["metadata"].get("finalizers"):
                # No controller is left to remove them.
                self.call(
                    "PATCH",
                    f"{path}/{item['metadata']['name']}",
                    {"metadata": {"finalizers": None}},
                    content_type=MERGE,
                )
        if not items:
            return
        # Background: no ``orphan`` finalizer that only a garbage collector removes.
        background = [("propagationPolicy", "Background")]
        if plural == "services":  # no deletecollection for Services
            for item in items:
                self.call("DELETE", f"{path}/{item['metadata']['name']}", query=background)
            return
        self.call("DELETE", path, query=background)
