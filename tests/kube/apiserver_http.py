"""The HTTP plumbing of the loopback API-server double.

:class:`~tests.kube.apiserver.FakeApiServer` speaks real HTTP/1.1 on 127.0.0.1 so that the
official ``kubernetes`` client runs unpatched. This module holds the transport pieces that
know nothing about resources: the request record (``Call``), the fault/delay rules, the
request handler (JSON answers, chunked watch streams, noticing a vanished client) and the
threading server that can cut every open connection on stop. Routing and verbs stay in
``apiserver.py``; watches in ``apiserver_watch.py``.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, NamedTuple

from tests.kube.apiserver_resources import Obj

if TYPE_CHECKING:
    from tests.kube.apiserver import FakeApiServer


class Call(NamedTuple):
    """One request as received: ``query`` keeps the last value of each parameter."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str | None


@dataclass
class Rule:
    """A ``fail_next``/``delay_next`` rule: it takes the next ``remaining`` matching requests."""

    method: str
    pattern: re.Pattern[str]
    remaining: int
    status: int = 0
    body: Obj | str | None = None
    seconds: float = 0.0

    def take(self, method: str, path: str) -> bool:
        if self.remaining > 0 and self.method in ("*", method) and self.pattern.search(path):
            self.remaining -= 1
            return True
        return False


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked watch streams
    disable_nagle_algorithm = True  # else a delayed ACK stalls every small answer ~40 ms
    server: LoopbackHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.fake._handle(self)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def send_json(self, code: int, body: Obj, headers: Sequence[tuple[str, str]] = ()) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_event(self, event_type: str, obj: Obj) -> None:
        data = json.dumps({"type": event_type, "object": obj}).encode() + b"\n"
        self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class LoopbackHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeApiServer) -> None:
        self.fake = fake
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.sockets_lock:
            for sock in list(self.open_sockets):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
