"""A loopback HTTP server that plays an API server for :class:`fixtures.kube.http.ClusterKube`.

It records every request (method, path, query, headers, body) and answers from a routing function, so the
self-tests check the exact HTTP the real client sends: verbs, paths, content types, field manager, dry-run,
propagation policy, selectors. A route may answer with a :class:`Stream`: a chunked response written piece by piece
(a watch), which can pause until the test lets it go on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: object


@dataclass
class Stream:
    """A chunked answer: each part is sent as its own chunk as soon as the previous one is written. A dict is one
    JSON line (a watch event), bytes are sent as they are (half a line, to prove the client buffers), and a
    ``threading.Event`` pauses the stream until the test sets it (at most ``pause_limit`` seconds). The stream
    ends after the last part, as the API server ends a watch at its timeout."""

    parts: Iterable[object]
    pause_limit: float = 5.0


Route = Callable[[Request], tuple[int, object]]


@dataclass
class ApiServer:
    route: Route
    requests: list[Request] = field(default_factory=list)
    url: str = ""

    def kubeconfig(self, directory: Path, token: str = "t0ken") -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }  # fmt: skip
        path = directory / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path


@contextmanager
def serve(route: Route) -> Iterator[ApiServer]:
    server_state = ApiServer(route)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked streams need it; every other answer has a Content-Length

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {key.lower(): value for key, value in self.headers.items()}
            request = Request(self.command, parts.path, parse_qs(parts.query), headers, body)
            server_state.requests.append(request)
            status, answer = server_state.route(request)
            if isinstance(answer, Stream):
                self._stream(status, answer)
                return
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, status: int, stream: Stream) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            # It closes the connection after a stream, so it must say so (RFC 9112 §9.6): without the header the
            # client pools the connection and its next request fails on it, a server bug real API servers lack.
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for part in stream.parts:
                    if isinstance(part, threading.Event):
                        part.wait(stream.pause_limit)
                        continue
                    data = part if isinstance(part, bytes) else json.dumps(part).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except OSError:  # the client closed the watch
                pass
            self.close_connection = True

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        httpd.shutdown()
        httpd.server_close()


def status(code: int, reason: str, message: str, name: str | None = None) -> tuple[int, dict]:
    details = {"name": name} if name else {}
    return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                  "message": message, "code": code, "details": details}  # fmt: skip
