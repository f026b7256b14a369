"""The one narrow interface between Berth and a cluster.

Reconcile, sync and approvals talk to ``ClusterBackend`` only; the kubernetes
implementation speaks to a real API server, the simulated one is Berth's own
in-process cluster. Objects are plain dicts in Kubernetes' JSON shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from queues.kueue.render import KIND_ORDER, KUEUE_GROUP, KUEUE_VERSION

FIELD_MANAGER = "berth"


@dataclass(frozen=True)
class ResourceType:
    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool
    status_subresource: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def kueue_type(kind: str, plural: str, namespaced: bool = False) -> ResourceType:
    return ResourceType(kind, KUEUE_GROUP, KUEUE_VERSION, plural, namespaced, True)


TYPES: dict[str, ResourceType] = {
    t.kind: t
    for t in (
        ResourceType("Namespace", "", "v1", "namespaces", False),
        ResourceType("Node", "", "v1", "nodes", False),
        kueue_type("ResourceFlavor", "resourceflavors"),
        kueue_type("WorkloadPriorityClass", "workloadpriorityclasses"),
        kueue_type("AdmissionCheck", "admissionchecks"),
        kueue_type("Cohort", "cohorts"),
        kueue_type("Topology", "topologies"),
        kueue_type("ClusterQueue", "clusterqueues"),
        kueue_type("LocalQueue", "localqueues", namespaced=True),
        kueue_type("Workload", "workloads", namespaced=True),
        ResourceType("Service", "", "v1", "services", True, True),
        # Kueue's manager configuration: written on the simulated cluster only.
        ResourceType("ConfigMap", "", "v1", "configmaps", True),
        # The job kinds Berth creates (jobs.manifests) and the simulated cluster runs.
        ResourceType("Job", "batch", "v1", "jobs", True, True),
        ResourceType("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", True, True),
        ResourceType("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", True, True),
        ResourceType("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", True, True),
    )
}

# What reconcile lists, renders and may prune, in apply order (deletes go in
# reverse: a Topology only after the flavors that name it). Kueue's manager
# ConfigMap is not among them: reconcile reads that one object by name, and only
# where it writes it (``ClusterBackend.writes_kueue_manager_config``).
POLICY_KINDS = tuple(kind for kind in KIND_ORDER if kind != "ConfigMap")


class BackendError(Exception):
    """A cluster call failed. ``transient`` errors are worth retrying (409, 429,
    5xx, timeouts, refused connections); others (a 4xx validation error) are not."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        transient: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.transient = transient
        # Seconds the server asked the client to wait (Retry-After on a 429/503).
        self.retry_after = retry_after


class KueueNotInstalled(BackendError):
    """The cluster serves no kueue.x-k8s.io API the reconciler can use."""


class WatchExpired(BackendError):
    """410 Gone: the resourceVersion is too old; relist and watch again."""


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str(self.object.get("metadata", {}).get("resourceVersion", ""))


class ClusterBackend(Protocol):
    name: str
    # Whether reconcile applies Kueue's manager ConfigMap
    # (kueue-system/kueue-manager-config) here. Only the embedded cluster does:
    # on a real cluster that ConfigMap holds settings Berth does not own and
    # Kueue reads it only at start-up, so it is a manual step there
    # (queues.kueue.manager_config).
    writes_kueue_manager_config: bool

    def kueue_versions(self) -> list[str]:
        """Kueue API versions served, preferred first; KueueNotInstalled if none."""

    def list(
        self, rtype: ResourceType, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object of a type (all namespaces) and the list's resourceVersion."""

    def get(
        self, rtype: ResourceType, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None: ...

    def apply(
        self, obj: Mapping[str, Any], *, force: bool, dry_run: bool = False
    ) -> dict[str, Any]:
        """Server-side apply as field manager ``berth``; creates if missing."""

    def delete(self, rtype: ResourceType, name: str, namespace: str | None = None) -> None: ...

    def watch(
        self, rtype: ResourceType, resource_version: str, *, timeout_seconds: int
    ) -> Iterator[WatchEvent]:
        """Changes after ``resource_version``; WatchExpired when it is too old."""

    def patch_status(
        self,
        rtype: ResourceType,
        name: str,
        namespace: str | None,
        status: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of ``status`` (field manager ``berth``, forced); with
        ``resource_version``, a 409 (transient) if the object changed since."""


def type_of(obj: Mapping[str, Any]) -> ResourceType:
    return TYPES[obj["kind"]]
