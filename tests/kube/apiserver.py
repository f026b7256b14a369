"""A small, faithful Kubernetes API-server double for Berth's tests.

It serves discovery, CRUD, selectors, merge/JSON/strategic patches, a simplified server-side
apply (merging status list-maps such as a Workload's ``admissionChecks`` entry by entry) and
streaming watches over real HTTP on 127.0.0.1, so tests drive the official
``kubernetes`` client end to end instead of patching it::

    with FakeApiServer() as server:
        api = CustomObjectsApi(server.api_client())
        api.patch_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a", body,
            field_manager="berth", force=True, _content_type="application/apply-patch+yaml",
        )
        assert server.get_object("kueue.x-k8s.io", "clusterqueues", "team-a")

This module holds the server object: lifecycle, state access for assertions, fault
injection, routing and the one-shot verbs. The HTTP transport is in ``apiserver_http.py``,
watches in ``apiserver_watch.py``, the store in ``apiserver_state.py`` (with resource types,
selectors, patches, field ownership and the status list-maps and validation of Kueue kinds in
the ``apiserver_*`` modules it imports).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import traceback
from collections.abc import Sequence
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes.client
import yaml

from tests.kube.apiserver_http import Call, LoopbackHTTPServer, RequestHandler, Rule
from tests.kube.apiserver_ownership import Identity
from tests.kube.apiserver_resources import (
    APPLY,
    BUILTIN_RESOURCES,
    DEFAULT_CRDS,
    KUEUE_GROUP,
    SEED_NAMESPACES,
    VERSION_INFO,
    ApiError,
    Obj,
    ResourceType,
    Target,
    group_doc,
    resource_list,
    status_body,
)
from tests.kube.apiserver_selectors import query_matcher
from tests.kube.apiserver_state import Store
from tests.kube.apiserver_watch import serve_watch

NOT_FOUND = "the server could not find the requested resource"


class FakeApiServer:
    """An in-memory API server on 127.0.0.1 for the real ``kubernetes`` client.

    ``installed_crds`` defaults to Kueue, JobSet and Kubeflow; ``kueue=False`` drops the Kueue
    group. Namespaces ``default``, ``kube-system``, ``kube-public`` and ``kube-node-lease``
    exist from the start. Watches send a BOOKMARK every ``bookmark_interval`` seconds and
    keep the last ``history_limit`` events for replay.
    """

    def __init__(
        self,
        *,
        kueue: bool = True,
        installed_crds: Sequence[ResourceType] | None = None,
        history_limit: int = 1000,
        bookmark_interval: float = 1.0,
        namespaces: Sequence[str] = SEED_NAMESPACES,
    ) -> None:
        crds = tuple(DEFAULT_CRDS if installed_crds is None else installed_crds)
        if not kueue:
            crds = tuple(r for r in crds if r.group != KUEUE_GROUP)
        self.resources = BUILTIN_RESOURCES + crds
        self.store = Store(self.resources, history_limit)
        self.bookmark_interval = bookmark_interval
        self.calls: list[Call] = []
        self.internal_errors: list[str] = []  # tracebacks of bugs in this double (answered 500)
        self._faults: list[Rule] = []
        self._delays: list[Rule] = []
        self._stopping = threading.Event()
        self._httpd: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.groups: dict[str, list[str]] = {}  # group -> versions, preferred first
        for rtype in self.resources:
            if rtype.group:
                versions = self.groups.setdefault(rtype.group, [])
                versions.extend(v for v in rtype.versions if v not in versions)
        for name in namespaces:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            self.put_object(namespace | {"status": {"phase": "Active"}})

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        self._stopping.clear()
        self._httpd = LoopbackHTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self.store.changed:
            self.store.changed.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.close_connections()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeApiServer is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def client_configuration(self) -> kubernetes.client.Configuration:
        return kubernetes.client.Configuration(host=self.url)

    def api_client(self) -> kubernetes.client.ApiClient:
        return kubernetes.client.ApiClient(self.client_configuration())

    # --- state access for assertions ------------------------------------------------------------

    def _type(self, group: str | None, plural: str) -> ResourceType:
        group = "" if group == "core" else group
        for rtype in self.resources:
            if rtype.plural == plural and group in (None, rtype.group):
                return rtype
        raise KeyError(f"{plural!r} is not served (group {group!r})")

    def objects(self, kind_plural: str, group: str | None = None) -> list[Obj]:
        """Stored objects of one resource (all namespaces), sorted by namespace and name."""
        with self.store.lock:
            return self.store.select(self._type(group, kind_plural), None, lambda obj: True)

    def get_object(
        self, group: str | None, plural: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        with self.store.lock:
            obj = self.store.objects.get(self.store.key(self._type(group, plural), namespace, name))
            return copy.deepcopy(obj)

    def put_object(self, obj: Obj, field_manager: str | None = None) -> Obj:
        """Store ``obj`` as another actor would (status included, no namespace check) and
        emit the watch event. Existing ``managedFields`` are kept unless ``obj`` brings its
        own; ``field_manager`` (operation Update) takes the fields this write changes."""
        with self.store.lock:
            return self.store.put(obj, field_manager)

    def delete_object(
        self, group: str | None, plural: str, name: str, namespace: str | None = None
    ) -> bool:
        """Remove an object at once (finalizers ignored), as if its last finalizer went."""
        with self.store.lock:
            rtype = self._type(group, plural)
            obj = self.store.objects.get(self.store.key(rtype, namespace, name))
            if obj is None:
                return False
            self.store.commit(rtype, copy.deepcopy(obj), "DELETED")
            return True

    def write_calls(self) -> list[Call]:
        return [call for call in self.calls if call.method in ("POST", "PUT", "PATCH", "DELETE")]

    def reset_calls(self) -> None:
        with self.store.lock:
            self.calls.clear()

    # --- fault injection ------------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int = 1,
        body: Obj | str | None = None,
    ) -> None:
        """Answer the next ``times`` requests whose path matches (``re.search``) with ``status``.
        ``body`` is a whole response body (dict) or the Status message (str)."""
        rule = Rule(method.upper(), re.compile(path_regex), times, status=status, body=body)
        with self.store.lock:
            self._faults.append(rule)

    def delay_next(self, method: str, path_regex: str, seconds: float, times: int = 1) -> None:
        """Hold the next matching request(s) for ``seconds`` before handling them normally."""
        rule = Rule(method.upper(), re.compile(path_regex), times, seconds=seconds)
        with self.store.lock:
            self._delays.append(rule)

    def wait_for_watches(self, count: int = 1, timeout: float = 5.0) -> None:
        """Block until ``count`` watches follow live changes (past their replay):
        a test that changes something "while a watch is open" must know it is."""
        if not self.store.wait_following(count, timeout):
            raise AssertionError(f"{count} watch(es) did not open within {timeout} s")

    def expire_watches(self) -> None:
        """End open watches with 410 Gone and refuse resourceVersions older than now."""
        with self.store.lock:
            self.store.expire()

    # --- request handling -----------------------------------------------------------------------

    def _handle(self, handler: RequestHandler) -> None:
        url = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        method, content_type = handler.command, handler.headers.get("Content-Type")
        with self.store.lock:
            self.calls.append(Call(method, url.path, query, content_type))
            delay = next((r for r in self._delays if r.take(method, url.path)), None)
            fault = next((r for r in self._faults if r.take(method, url.path)), None)
        try:
            if delay is not None and self._stopping.wait(delay.seconds):
                handler.close_connection = True
                return
            if fault is not None:
                body = fault.body if isinstance(fault.body, dict) else None
                message = fault.body if isinstance(fault.body, str) else "injected failure"
                retry = [("Retry-After", "1")] if fault.status == 429 else []
                handler.send_json(fault.status, body or status_body(fault.status, message), retry)
                return
            self._dispatch(handler, method, url.path, query, raw, content_type or "")
        except ApiError as error:
            handler.send_json(error.code, error.status())
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
        except Exception as exc:
            self.internal_errors.append(traceback.format_exc())
            handler.send_json(500, status_body(500, f"FakeApiServer bug: {exc!r}"))

    def _route(self, path: str) -> Obj | Target:
        """Discovery documents, or the resource a request addresses."""
        parts = [part for part in path.split("/") if part]
        if parts == ["version"]:
            return VERSION_INFO
        if parts == ["api"]:
            address = self.url.removeprefix("http://")
            cidrs = [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": cidrs}
        if parts == ["apis"]:
            groups = [group_doc(group, versions) for group, versions in self.groups.items()]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        if parts[:1] == ["api"]:
            group, rest, versions = "", parts[1:], ["v1"]
        elif parts[:1] == ["apis"] and parts[1] in self.groups:
            group, rest, versions = parts[1], parts[2:], self.groups[parts[1]]
            if not rest:
                return {"kind": "APIGroup", "apiVersion": "v1", **group_doc(group, versions)}
        else:
            raise ApiError(404, NOT_FOUND)
        version, rest = rest[0], rest[1:]
        if version not in versions:
            raise ApiError(404, NOT_FOUND)
        served = {r.plural: r for r in self.resources if r.group == group and version in r.versions}
        if not rest:
            return resource_list(group, version, list(served.values()))
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in served:
            namespace, rest = rest[1], rest[2:]
        rtype = served.get(rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if (
            rtype is None
            or len(rest) > 3
            or (sub and (sub != "status" or not rtype.status_subresource))
            or (namespace is not None and not rtype.namespaced)
            or (rtype.namespaced and namespace is None and name is not None)
        ):
            raise ApiError(404, NOT_FOUND)
        return Target(rtype, version, namespace, name, sub)

    def _dispatch(
        self,
        handler: RequestHandler,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        content_type: str,
    ) -> None:
        found = self._route(path)
        if not isinstance(found, Target):
            if method != "GET":
                raise ApiError(405, f"{method} is not supported on {path}")
            handler.send_json(200, found)
            return
        target, media = found, content_type.split(";")[0].strip()
        if query.get("dryRun", "") not in ("", "All"):
            raise ApiError(400, f"Invalid dryRun value {query['dryRun']!r}: only 'All' is valid")
        try:
            body = (yaml.safe_load if media == APPLY else json.loads)(raw) if raw else None
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, f"error decoding the request body: {exc}") from exc
        if method == "GET" and target.name is None and query.get("watch") in ("true", "1"):
            serve_watch(
                handler,
                self.store,
                target,
                query,
                stopping=self._stopping,
                bookmark_interval=self.bookmark_interval,
            )
            return
        with self.store.lock:
            code, result = self._operate(handler, method, target, query, body, media)
        if result.get("kind") != "Status":
            result["apiVersion"] = target.rtype.api_version(target.version)
        handler.send_json(code, result)

    def _operate(
        self,
        handler: RequestHandler,
        method: str,
        target: Target,
        query: dict[str, str],
        body: Any,
        media: str,
    ) -> tuple[int, Obj]:
        store, rtype, ns, name = self.store, target.rtype, target.namespace, target.name
        options = body if method == "DELETE" and isinstance(body, dict) else {}
        dry_run = query.get("dryRun") == "All" or "All" in options.get("dryRun", [])
        agent = handler.headers.get("User-Agent") or "unknown"  # default manager, like kube's
        manager = query.get("fieldManager") or agent.split("/")[0]
        ident: Identity = (manager, "Update", target.subresource)
        if name is None:
            if method == "GET":
                items, meta = store.page(
                    rtype,
                    ns,
                    query_matcher(query, target.rtype),
                    int(query.get("limit") or 0),
                    query.get("continue", ""),
                )
                items = [target.present(obj) for obj in items]
                return 200, {"kind": f"{rtype.kind}List", "metadata": meta, "items": items}
            if method == "POST" and (ns is not None or not rtype.namespaced):
                version = target.version
                return 201, store.create(rtype, ns, body, version, ident=ident, dry_run=dry_run)
            if method == "DELETE":  # deletecollection
                removed = []
                for obj in store.select(rtype, ns, query_matcher(query, target.rtype)):
                    meta = obj["metadata"]
                    deleted, _ = store.delete(
                        rtype, meta.get("namespace"), meta["name"], options={}, dry_run=dry_run
                    )
                    removed.append(target.present(deleted))
                return 200, {"kind": f"{rtype.kind}List", "metadata": {}, "items": removed}
            raise ApiError(405, f"{method} is not supported on a collection")
        if method == "GET":
            return 200, store.get(rtype, ns, name)
        if method == "DELETE":
            obj, gone = store.delete(rtype, ns, name, options=options, dry_run=dry_run)
            if not gone or rtype.group == "":  # core objects come back; others get a Status
                return 200, obj
            details = {"name": name, "group": rtype.group, "kind": rtype.plural}
            details["uid"] = obj["metadata"]["uid"]
            success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
            return 200, success | {"details": details}
        args = (rtype, target.version, ns, name, body)
        if method == "PATCH" and media == APPLY:
            force = query.get("force", "false").lower() in ("true", "1")
            applier, sub = query.get("fieldManager"), target.subresource
            return store.apply(
                *args, subresource=sub, manager=applier, force=force, dry_run=dry_run
            )
        if query.get("force"):
            raise ApiError(400, "force may not be specified for non-apply patch")
        if method == "PUT":
            sub = target.subresource
            return 200, store.replace(*args, subresource=sub, ident=ident, dry_run=dry_run)
        if method == "PATCH":
            sub = target.subresource
            return 200, store.patch(*args, media, subresource=sub, ident=ident, dry_run=dry_run)
        raise ApiError(405, f"{method} is not supported on a single object")


__all__ = ["Call", "FakeApiServer", "ResourceType"]
