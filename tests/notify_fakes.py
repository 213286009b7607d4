"""Local HTTP servers the notification tests start: one records every request and answers as
told (ntfy, a Web Push endpoint), one plays the Telegram Bot API (sendMessage, getUpdates,
setWebhook), and a browser's push subscription whose keys the test holds, so the payload can be
decrypted exactly as the browser would."""

from __future__ import annotations

import base64
import json
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)

    def header(self, name: str) -> str | None:
        return {k.lower(): v for k, v in self.headers.items()}.get(name.lower())

    def json(self) -> Any:
        return json.loads(self.body or b"null")


class Recorder:
    """Records requests; `answers[path prefix] = status` (longest prefix wins), 200 otherwise."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.answers: dict[str, int] = {}
        self.updates: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def _any(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                seen = Seen(self.command, self.path, dict(self.headers.items()), body)
                with recorder._lock:
                    recorder.seen.append(seen)
                status, payload = recorder.answer(seen)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, seen: Seen) -> tuple[int, Any]:
        matches = [p for p in self.answers if seen.path.startswith(p)]
        status = self.answers[max(matches, key=len)] if matches else 200
        if "/getUpdates" in seen.path:
            wait = min(float((seen.json() or {}).get("timeout", 0)), 1.0)
            try:
                update = self.updates.get(timeout=max(wait, 0.01))
            except queue.Empty:
                return status, {"ok": True, "result": []}
            return status, {"ok": True, "result": [update]}
        if "/bot" in seen.path:
            ok = status == 200
            return status, ({"ok": True, "result": {"message_id": len(self.seen)}} if ok
                            else {"ok": False, "error_code": status, "description": "scripted failure"})
        return status, {"id": f"m{len(self.seen)}", "event": "message"}

    def requests(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if (method is None or s.method == method)
                    and (path is None or s.path.startswith(path))]

    def clear(self) -> None:
        with self._lock:
            self.seen.clear()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Browser:
    """A push subscription's key pair and auth secret, made here, as a browser makes them."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.private = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        public = self.private.public_key().public_bytes(serialization.Encoding.X962,
                                                         serialization.PublicFormat.UncompressedPoint)
        self.p256dh = b64url(public)

    def subscription(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": b64url(self.auth)},
                "expirationTime": None}

    def decrypt(self, body: bytes) -> dict[str, Any]:
        return json.loads(http_ece.decrypt(body, private_key=self.private, auth_secret=self.auth,
                                           version="aes128gcm"))


def jwt_claims(authorization: str) -> dict[str, Any]:
    """The claims of a `vapid t=<jwt>,k=<key>` header (the signature is checked separately)."""
    token = authorization.split(" ", 1)[1].split(",")[0].split("=", 1)[1]
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
