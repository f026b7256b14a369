"""The resource registry of the loopback API-server double, and how it answers errors.

Every other part of the double needs the same vocabulary: the ``Obj``/``Path``/``Key``
aliases, ``ApiError`` and the ``Status`` body it becomes, the served ``ResourceType`` list
(built-in kinds plus the Kueue, JobSet and Kubeflow CRDs), the patch media types, the
discovery documents and ``Target`` (what one request addresses). They live here, below the
store, so that selectors, patches, field ownership, watches and the HTTP layer can share
them without depending on the store or on each other's internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Path = tuple[str, ...]
Key = tuple[str, str, str, str]  # group, plural, namespace ("" when cluster-scoped), name

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int, message: str, reason: str | None = None, details: Obj | None = None
) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class ApiError(Exception):
    """A refused request, answered as a ``Status`` with ``code`` as the HTTP status."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, details: Obj | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.reason, self.details = code, message, reason, details

    def status(self) -> Obj:
        return status_body(self.code, self.message, self.reason, self.details)


@dataclass(frozen=True)
class ResourceType:
    """One served resource. ``versions`` lists the preferred version first."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = True
    short_names: tuple[str, ...] = ()
    field_labels: tuple[str, ...] = ()

    @property
    def custom(self) -> bool:
        return self.group not in ("", "batch")

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str | None = None) -> str:
        version = version or self.versions[0]
        return f"{self.group}/{version}" if self.group else version

    def not_found(self, name: str) -> ApiError:
        details = {"name": name, "group": self.group, "kind": self.plural}
        return ApiError(404, f'{self.qualified} "{name}" not found', "NotFound", details)


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_RESOURCES = tuple(
    ResourceType(KUEUE_GROUP, ("v1beta2", "v1beta1"), plural, kind, namespaced, status, short)
    for plural, kind, namespaced, status, short in (
        ("resourceflavors", "ResourceFlavor", False, False, ("flavor", "flavors", "rf")),
        ("clusterqueues", "ClusterQueue", False, True, ("cq",)),
        ("cohorts", "Cohort", False, True, ()),
        ("workloadpriorityclasses", "WorkloadPriorityClass", False, False, ()),
        ("admissionchecks", "AdmissionCheck", False, True, ()),
        ("topologies", "Topology", False, False, ()),
        ("localqueues", "LocalQueue", True, True, ("queue", "queues", "lq")),
        ("workloads", "Workload", True, True, ("wl",)),
    )
)
JOBSET_RESOURCES = (ResourceType("jobset.x-k8s.io", ("v1alpha2",), "jobsets", "JobSet", True),)
KUBEFLOW_RESOURCES = (
    ResourceType("kubeflow.org", ("v1",), "pytorchjobs", "PyTorchJob", True),
    ResourceType("trainer.kubeflow.org", ("v1alpha1",), "trainjobs", "TrainJob", True),
    ResourceType(
        "trainer.kubeflow.org",
        ("v1alpha1",),
        "clustertrainingruntimes",
        "ClusterTrainingRuntime",
        False,
        status_subresource=False,
    ),
)
DEFAULT_CRDS = KUEUE_RESOURCES + JOBSET_RESOURCES + KUBEFLOW_RESOURCES
BUILTIN_RESOURCES = (
    ResourceType("", ("v1",), "namespaces", "Namespace", False, True, ("ns",), ("status.phase",)),
    ResourceType("", ("v1",), "nodes", "Node", False, True, ("no",), ("spec.unschedulable",)),
    ResourceType(
        "", ("v1",), "pods", "Pod", True, True, ("po",), ("spec.nodeName", "status.phase")
    ),
    ResourceType("", ("v1",), "services", "Service", True, True, ("svc",)),
    ResourceType("batch", ("v1",), "jobs", "Job", True),
)
INITIAL_STATUS = {"Namespace": {"phase": "Active"}, "Pod": {"phase": "Pending"}}
SEED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
VERSION_INFO = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.1",
    "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828",
    "gitTreeState": "clean",
    "buildDate": "2025-05-15T08:19:08Z",
    "goVersion": "go1.24.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def group_doc(group: str, versions: Sequence[str]) -> Obj:
    """The body of ``GET /apis/{group}`` (without kind), also an entry of ``GET /apis``."""
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def resource_list(group: str, version: str, served: Sequence[ResourceType]) -> Obj:
    """The body of ``GET /apis/{group}/{version}`` (or ``/api/v1``)."""
    resources: list[Obj] = []
    for r in served:
        entry = {"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced}
        resources.append(entry | {"kind": r.kind, "verbs": VERBS})
        if r.short_names:
            resources[-1]["shortNames"] = list(r.short_names)
        if r.status_subresource:
            status = {"name": f"{r.plural}/status", "singularName": "", "kind": r.kind}
            resources.append(
                status | {"namespaced": r.namespaced, "verbs": ["get", "patch", "update"]}
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


@dataclass(frozen=True)
class Target:
    """The resource a request addresses: its type, the version in the URL, the namespace
    (``None`` for cluster-wide), the name (``None`` for the collection) and subresource."""

    rtype: ResourceType
    version: str
    namespace: str | None
    name: str | None
    subresource: str

    def present(self, obj: Obj) -> Obj:
        """``obj`` as this request sees it: in the URL's version."""
        return obj | {"apiVersion": self.rtype.api_version(self.version)}
