"""A loopback HTTP server that plays an API server for :class:`fixtures.kube_http.ClusterKube`.

It records every request (method, path, query, headers, body) and answers from a routing function, so the
self-tests check the exact HTTP the real client sends: verbs, paths, content types, field manager, dry-run,
propagation policy, selectors.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
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
        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {key.lower(): value for key, value in self.headers.items()}
            request = Request(self.command, parts.path, parse_qs(parts.query), headers, body)
            server_state.requests.append(request)
            status, answer = server_state.route(request)
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

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
