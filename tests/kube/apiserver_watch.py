"""Streaming watches of the loopback API-server double.

A watch is the one long-lived request: it replays history from a resourceVersion (or the
current objects as ADDED), then follows the store's event history under its condition
variable, translating each event for the watch's selectors (an object leaving the selector
is DELETED, entering is ADDED), sending BOOKMARKs, and ending with 410 Gone when the history
was compacted or ``expire_watches`` was called. It is its own module because none of this
is needed by the one-shot verbs in ``apiserver.py``.
"""

from __future__ import annotations

import copy
import threading
import time

from tests.kube.apiserver_http import RequestHandler
from tests.kube.apiserver_resources import ApiError, Obj, Target, status_body
from tests.kube.apiserver_selectors import Matcher, query_matcher
from tests.kube.apiserver_state import Event, Store


def _translate(event: Event, match: Matcher, target: Target) -> tuple[str, Obj] | None:
    """An event as this watch sees it: leaving the selector is DELETED, entering is ADDED."""
    if event.rtype is not target.rtype:
        return None
    if target.namespace is not None and event.obj["metadata"].get("namespace") != target.namespace:
        return None
    now_in = match(event.obj)
    was_in = event.prev is not None and match(event.prev)
    kind = event.type
    if kind == "MODIFIED" and now_in != was_in:
        kind = "ADDED" if now_in else "DELETED"
    elif kind == "MODIFIED" and not now_in:
        return None
    if kind in ("ADDED", "DELETED") and not (now_in or was_in):
        return None
    return kind, target.present(copy.deepcopy(event.obj))


def serve_watch(
    handler: RequestHandler,
    store: Store,
    target: Target,
    query: dict[str, str],
    *,
    stopping: threading.Event,
    bookmark_interval: float,
) -> None:
    """Answer one ``?watch=true`` request until its timeout, its client leaves, a 410 Gone
    or ``stopping`` is set."""
    match = query_matcher(query, target.rtype)
    timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
    deadline = time.monotonic() + timeout if timeout else None
    bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
    requested = query.get("resourceVersion", "")
    initial_events = query.get("sendInitialEvents") == "true"
    events, expired = [], False
    with store.lock:
        epoch = store.epoch
        if requested in ("", "0") or initial_events:
            events = [
                ("ADDED", target.present(obj))
                for obj in store.select(target.rtype, target.namespace, match)
            ]
            cursor = store.rv
        else:
            if not requested.isdigit():
                raise ApiError(400, f"invalid resource version: {requested!r}")
            cursor = int(requested)
            expired = cursor < store.compacted
            events = [] if expired else _events_after(store, cursor, match, target)
            cursor = store.rv if not expired else cursor
    handler.start_stream()
    if expired:
        _send_gone(handler, store, cursor)
        return
    for event_type, obj in events:
        handler.send_event(event_type, obj)
    if initial_events and bookmarks:
        end = {"k8s.io/initial-events-end": "true"}
        handler.send_event("BOOKMARK", _bookmark(target, cursor, end))
    last_bookmark = time.monotonic()
    with store.changed:  # following live changes now: tests wait for this
        store.following += 1
        store.changed.notify_all()
    try:
        _follow(
            handler,
            store,
            target,
            match,
            cursor,
            epoch,
            stopping,
            deadline,
            bookmarks,
            bookmark_interval,
            last_bookmark,
        )
    finally:
        with store.changed:
            store.following -= 1
            store.changed.notify_all()


def _follow(
    handler: RequestHandler,
    store: Store,
    target: Target,
    match: Matcher,
    cursor: int,
    epoch: int,
    stopping: threading.Event,
    deadline: float | None,
    bookmarks: bool,
    bookmark_interval: float,
    last_bookmark: float,
) -> None:
    while not stopping.is_set():
        waits = [0.2]  # also how often a silent watch notices its client has gone
        if bookmarks:
            waits.append(last_bookmark + bookmark_interval - time.monotonic())
        if deadline is not None:
            waits.append(deadline - time.monotonic())
        with store.changed:
            if store.rv == cursor and store.epoch == epoch:
                store.changed.wait(max(0.0, min(waits)))
            if store.epoch != epoch or cursor < store.compacted:
                _send_gone(handler, store, cursor)
                return
            events, cursor = _events_after(store, cursor, match, target), store.rv
        for event_type, obj in events:
            handler.send_event(event_type, obj)
        if deadline is not None and time.monotonic() >= deadline:
            break
        if bookmarks and time.monotonic() - last_bookmark >= bookmark_interval:
            handler.send_event("BOOKMARK", _bookmark(target, cursor))
            last_bookmark = time.monotonic()
        if not events and handler.client_gone():
            handler.close_connection = True
            return
    handler.end_stream()


def _events_after(
    store: Store, cursor: int, match: Matcher, target: Target
) -> list[tuple[str, Obj]]:
    seen = (_translate(e, match, target) for e in store.history if e.rv > cursor)
    return [event for event in seen if event is not None]


def _bookmark(target: Target, cursor: int, annotations: Obj | None = None) -> Obj:
    meta: Obj = {"resourceVersion": str(cursor)}
    if annotations:
        meta["annotations"] = annotations
    return {
        "kind": target.rtype.kind,
        "apiVersion": target.rtype.api_version(target.version),
        "metadata": meta,
    }


def _send_gone(handler: RequestHandler, store: Store, cursor: int) -> None:
    message = f"too old resource version: {cursor} ({store.compacted})"
    handler.send_event("ERROR", status_body(410, message, "Expired"))
    handler.end_stream()
