"""The kubernetes backend: the official client against a real API server.

Server-side apply with field manager ``berth`` (``application/apply-patch+yaml``;
JSON is valid YAML), list + watch with resourceVersions and bookmarks, the
status subresource, and discovery of which Kueue API versions the cluster
serves. Client and HTTP errors become ``BackendError`` with ``transient`` set
for what is worth retrying.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from queues.backends.base import (
    FIELD_MANAGER,
    TYPES,
    BackendError,
    KueueNotInstalled,
    ResourceType,
    WatchEvent,
    WatchExpired,
)
from queues.kueue.render import KUEUE_GROUP

APPLY = "application/apply-patch+yaml"
TRANSIENT_STATUS = {409, 429, 500, 502, 503, 504}
T = TypeVar("T")
# The core kinds Berth reads or writes on a real cluster (deploy/base/rbac.yaml
# grants no others): Kueue's manager ConfigMap is a manual step there.
CORE_KINDS = {"Namespace", "Node", "Service"}


def _served(rtype: ResourceType, what: str) -> None:
    if not rtype.group and rtype.kind not in CORE_KINDS:
        raise BackendError(
            f"{what}: Berth does not read or write {rtype.plural} on a kubernetes cluster"
        )


def _error(exc: Exception, what: str) -> BackendError:
    if isinstance(exc, ApiException):
        message = exc.reason or ""
        reason = ""
        try:
            body = json.loads(exc.body or "{}")
            message = body.get("message", message)
            reason = body.get("reason", "")
        except (ValueError, TypeError):
            pass
        status = exc.status
        error_type = WatchExpired if status == 410 else BackendError
        return error_type(
            f"{what}: {status} {message}",
            status=status,
            reason=reason,
            transient=status in TRANSIENT_STATUS,
            retry_after=_retry_after(exc),
        )
    return BackendError(f"{what}: {exc.__class__.__name__}: {exc}", transient=True)


def _retry_after(exc: ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare from an API server; the backoff applies


def _call(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise _error(exc, what) from exc


def _as_dict(obj: object) -> dict[str, Any]:
    """The custom-objects API answers with plain JSON objects, typed ``object``."""
    if not isinstance(obj, dict):
        raise BackendError(f"unexpected answer from the API server: {type(obj).__name__}")
    return obj


def _json(response: Any) -> dict[str, Any]:
    """A raw (``_preload_content=False``) response as a dict."""
    data = response.data if hasattr(response, "data") else response
    return dict(json.loads(data)) if data else {}


class KubernetesBackend:
    name = "kubernetes"
    # Kueue's manager ConfigMap holds settings Berth does not own, and Kueue reads
    # it only at start-up: the plan shows it as a manual step instead.
    writes_kueue_manager_config = False

    def __init__(self, api_client: client.ApiClient, *, request_timeout: float = 30.0) -> None:
        self.api = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.timeout = request_timeout

    @classmethod
    def from_settings(cls, context: str | None = None) -> KubernetesBackend:
        """In-cluster config when running in a pod, else kubeconfig (KUBECONFIG)."""
        try:
            if os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_incluster_config()
            else:
                config.load_kube_config(context=context or None)
        except (config.ConfigException, OSError, ValueError) as exc:
            raise BackendError(
                f"BERTH_CLUSTER=kubernetes, but no cluster configuration could be loaded ({exc}); "
                "point KUBECONFIG at a kubeconfig file (and BERTH_KUBE_CONTEXT at a context in "
                "it), or run Berth in a pod with a service account"
            ) from exc
        return cls(client.ApiClient())

    # ------------------------------------------------------------ discovery

    def kueue_versions(self) -> list[str]:
        groups = _json(
            _call(
                "discovery",
                lambda: client.ApisApi(self.api).get_api_versions(
                    _preload_content=False, _request_timeout=self.timeout
                ),
            )
        )
        for group in groups.get("groups", []):
            if group.get("name") == KUEUE_GROUP:
                preferred = group.get("preferredVersion", {}).get("version")
                versions = [v["version"] for v in group.get("versions", [])]
                return sorted(versions, key=lambda v: v != preferred)
        raise KueueNotInstalled(
            "Kueue is not installed on this cluster (no kueue.x-k8s.io API is served); install "
            "Kueue 0.16 or newer (kubectl apply --server-side -f "
            "https://github.com/kubernetes-sigs/kueue/releases/download/<version>/manifests.yaml)",
            status=404,
        )

    # ------------------------------------------------------------------ read

    def list(
        self, rtype: ResourceType, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        what = f"list {rtype.plural}"
        _served(rtype, what)
        kwargs: dict[str, Any] = {"_request_timeout": self.timeout}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if rtype.group:
            result = _as_dict(
                _call(
                    what,
                    lambda: self.custom.list_cluster_custom_object(
                        rtype.group, rtype.version, rtype.plural, **kwargs
                    ),
                )
            )
        else:
            listers: dict[str, Callable[..., Any]] = {
                "Namespace": self.core.list_namespace,
                "Node": self.core.list_node,
                "Service": self.core.list_service_for_all_namespaces,
            }
            lister = listers[rtype.kind]
            result = _json(_call(what, lambda: lister(_preload_content=False, **kwargs)))
        items = [self._complete(item, rtype) for item in result.get("items", [])]
        return items, str(result.get("metadata", {}).get("resourceVersion", ""))

    def get(
        self, rtype: ResourceType, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        _served(rtype, f"get {rtype.kind} {name}")
        try:
            if rtype.group:
                if rtype.namespaced:
                    obj = self.custom.get_namespaced_custom_object(
                        rtype.group,
                        rtype.version,
                        namespace or "",
                        rtype.plural,
                        name,
                        _request_timeout=self.timeout,
                    )
                else:
                    obj = self.custom.get_cluster_custom_object(
                        rtype.group,
                        rtype.version,
                        rtype.plural,
                        name,
                        _request_timeout=self.timeout,
                    )
            else:
                options: dict[str, Any] = {
                    "_preload_content": False,
                    "_request_timeout": self.timeout,
                }
                response: Any
                if rtype.namespaced:  # Service
                    response = self.core.read_namespaced_service(name, namespace or "", **options)
                else:
                    reader: dict[str, Callable[..., Any]] = {
                        "Namespace": self.core.read_namespace,
                        "Node": self.core.read_node,
                    }
                    response = reader[rtype.kind](name, **options)
                obj = _json(response)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _error(exc, f"get {rtype.kind} {name}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _error(exc, f"get {rtype.kind} {name}") from exc
        return self._complete(obj, rtype)

    @staticmethod
    def _complete(answer: object, rtype: ResourceType) -> dict[str, Any]:
        """List items come without kind/apiVersion; put them back."""
        obj = _as_dict(answer)
        obj.setdefault("kind", rtype.kind)
        obj.setdefault("apiVersion", rtype.api_version)
        return obj

    # ----------------------------------------------------------------- write

    def apply(
        self, obj: Mapping[str, Any], *, force: bool, dry_run: bool = False
    ) -> dict[str, Any]:
        rtype = TYPES[obj["kind"]]
        metadata = obj["metadata"]
        name, namespace = metadata["name"], metadata.get("namespace")
        what = f"apply {rtype.kind} {namespace + '/' if namespace else ''}{name}"
        _served(rtype, what)
        # Raw responses: the generated client only decodes a 200, and an apply
        # that creates the object answers 201 (it would return None).
        kwargs: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "force": force,
            "_content_type": APPLY,
            "_request_timeout": self.timeout,
            "_preload_content": False,
        }
        if dry_run:
            kwargs["dry_run"] = "All"
        body = dict(obj)
        try:
            if rtype.group and rtype.namespaced:
                response = _call(
                    what,
                    lambda: self.custom.patch_namespaced_custom_object(
                        rtype.group,
                        rtype.version,
                        namespace or "",
                        rtype.plural,
                        name,
                        body,
                        **kwargs,
                    ),
                )
            elif rtype.group:
                response = _call(
                    what,
                    lambda: self.custom.patch_cluster_custom_object(
                        rtype.group, rtype.version, rtype.plural, name, body, **kwargs
                    ),
                )
            elif rtype.namespaced:  # Service
                response = _call(
                    what,
                    lambda: self.core.patch_namespaced_service(
                        name, namespace or "", body, **kwargs
                    ),
                )
            else:
                response = _call(what, lambda: self.core.patch_namespace(name, body, **kwargs))
        except BackendError as exc:
            if exc.status == 409 and not force:
                # An unforced apply's 409 is a field another manager owns: retrying
                # changes nothing, the owner has to give the field up.
                exc.transient = False
            raise
        return self._complete(_json(response), rtype)

    def delete(self, rtype: ResourceType, name: str, namespace: str | None = None) -> None:
        """Delete an object and, through the garbage collector, what it owns. The
        API's default for a batch Job is to orphan its pods, which would leave a
        cancelled job's pods running on their GPUs: the policy is named."""
        what = f"delete {rtype.kind} {name}"
        _served(rtype, what)
        options: dict[str, Any] = {
            "propagation_policy": "Background",
            "_request_timeout": self.timeout,
        }
        try:
            if rtype.group and rtype.namespaced:
                self.custom.delete_namespaced_custom_object(
                    rtype.group, rtype.version, namespace or "", rtype.plural, name, **options
                )
            elif rtype.group:
                self.custom.delete_cluster_custom_object(
                    rtype.group, rtype.version, rtype.plural, name, **options
                )
            elif rtype.namespaced:  # Service
                self.core.delete_namespaced_service(
                    name, namespace or "", _preload_content=False, **options
                )
            else:
                self.core.delete_namespace(name, _preload_content=False, **options)
        except ApiException as exc:
            if exc.status == 404:
                return  # already gone: the goal is reached
            raise _error(exc, what) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _error(exc, what) from exc

    def patch_status(
        self,
        rtype: ResourceType,
        name: str,
        namespace: str | None,
        status: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name}
        if namespace:
            metadata["namespace"] = namespace
        if resource_version:
            # The API server refuses (409) an apply whose resourceVersion is stale.
            metadata["resourceVersion"] = resource_version
        body = {
            "apiVersion": rtype.api_version,
            "kind": rtype.kind,
            "metadata": metadata,
            "status": dict(status),
        }
        what = f"patch status of {rtype.kind} {name}"
        kwargs: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "force": True,
            "_content_type": APPLY,
            "_request_timeout": self.timeout,
            "_preload_content": False,
        }
        if rtype.namespaced:
            result = _call(
                what,
                lambda: self.custom.patch_namespaced_custom_object_status(
                    rtype.group, rtype.version, namespace or "", rtype.plural, name, body, **kwargs
                ),
            )
        else:
            result = _call(
                what,
                lambda: self.custom.patch_cluster_custom_object_status(
                    rtype.group, rtype.version, rtype.plural, name, body, **kwargs
                ),
            )
        return self._complete(_json(result), rtype)

    # ----------------------------------------------------------------- watch

    def watch(
        self, rtype: ResourceType, resource_version: str, *, timeout_seconds: int
    ) -> Iterator[WatchEvent]:
        """Events after ``resource_version``. The official client resumes a broken
        stream once by itself and raises 410 when the version has expired; that
        surfaces as WatchExpired so the caller relists."""
        watcher = watch.Watch()
        if rtype.group:
            func: Callable[..., Any] = self.custom.list_cluster_custom_object
            args: tuple[Any, ...] = (rtype.group, rtype.version, rtype.plural)
        else:
            func = {"Namespace": self.core.list_namespace, "Node": self.core.list_node}[rtype.kind]
            args = ()
        try:
            for event in watcher.stream(
                func,
                *args,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
            ):
                raw = event.get("raw_object") or event.get("object")
                if not isinstance(raw, dict):
                    raw = self.api.sanitize_for_serialization(raw)
                yield WatchEvent(event["type"], self._complete(raw, rtype))
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise _error(exc, f"watch {rtype.plural}") from exc
        finally:
            watcher.stop()
