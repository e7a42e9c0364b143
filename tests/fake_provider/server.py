"""A fake model provider: a small HTTP server on 127.0.0.1 that answers the OpenAI Chat
Completions (``/v1/chat/completions``), OpenAI Responses (``/v1/responses``) and Anthropic
Messages (``/v1/messages``) wire formats with what each test scripted, SSE streams
included, and keeps every request it received.

Scripting: each answer is ``{"status": 200, "json": {...}}``, ``{"status": 200, "sse":
[[event-name-or-null, data], ...]}`` (``data`` a JSON value or the literal text
``"[DONE]"``; ``"delay_ms": N`` paces the events N ms apart, each written and flushed
on its own) or ``{"status": 500, "json": {...}, "headers": {...}}``. Answers are taken
in order, whatever the path. In-process (Python tests) use :class:`FakeProvider`; from
another language start ``python3 tests/fake_provider/server.py`` (it prints
``{"port": N}``) and script it over HTTP: ``POST /__script`` with a JSON list of answers,
``GET /__requests`` for what it received, ``POST /__reset``.

Used by the Python suite with the real ``openai`` / ``anthropic`` clients, and by the
cross-language test. Standard library only.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: An answer when nothing was scripted: the test forgot one.
UNSCRIPTED = {"status": 599, "json": {"error": {"message": "fake provider: no answer scripted"}}}


def sse_events(events: list[list[Any]]) -> list[bytes]:
    """The SSE wire text of each of ``[[event, data], ...]``."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        body = data if isinstance(data, str) else json.dumps(data)
        out.append(f"{head}data: {body}\n\n".encode())
    return out


def sse_body(events: list[list[Any]]) -> bytes:
    """The SSE wire text of ``[[event, data], ...]``."""
    return b"".join(sse_events(events))


class FakeProvider:
    """The server, started on a free port of 127.0.0.1 in a daemon thread."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _body(self) -> Any:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return json.loads(raw or b"null")
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def _send(
                self,
                status: int,
                body: bytes | list[bytes],
                content_type: str,
                headers: dict[str, str] | None = None,
                delay_ms: float = 0,
            ) -> None:
                pieces = body if isinstance(body, list) else [body]
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(sum(len(p) for p in pieces)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                for i, piece in enumerate(pieces):
                    if i and delay_ms:
                        self.wfile.flush()
                        time.sleep(delay_ms / 1000)
                    self.wfile.write(piece)

            def do_GET(self) -> None:
                if self.path == "/__requests":
                    with provider.lock:
                        body = json.dumps(provider.requests).encode()
                    self._send(200, body, "application/json")
                else:
                    self._send(404, b"{}", "application/json")

            def do_POST(self) -> None:
                body = self._body()
                if self.path == "/__script":
                    provider.script(*(body or []))
                    self._send(200, b"{}", "application/json")
                    return
                if self.path == "/__reset":
                    provider.reset()
                    self._send(200, b"{}", "application/json")
                    return
                with provider.lock:
                    provider.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                    answer = provider.answers.pop(0) if provider.answers else UNSCRIPTED
                status = int(answer.get("status", 200))
                if "sse" in answer:
                    self._send(
                        status,
                        sse_events(answer["sse"]),
                        "text/event-stream",
                        answer.get("headers"),
                        float(answer.get("delay_ms", 0)),
                    )
                else:
                    self._send(status, json.dumps(answer.get("json", {})).encode(), "application/json", answer.get("headers"))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="fake-provider", daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``.../v1``); Anthropic's client takes :attr:`root_url`."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *answers: dict[str, Any]) -> FakeProvider:
        """Queues answers, taken in order."""
        with self.lock:
            self.answers.extend(answers)
        return self

    def reset(self) -> None:
        with self.lock:
            self.answers.clear()
            self.requests.clear()

    def bodies(self) -> list[Any]:
        """The JSON bodies received, in order."""
        with self.lock:
            return [r["body"] for r in self.requests]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    provider = FakeProvider()
    print(json.dumps({"port": provider.port}), flush=True)
    try:
        sys.stdin.read()  # runs until the parent closes our stdin (or kills us)
    finally:
        provider.stop()


if __name__ == "__main__":
    main()
