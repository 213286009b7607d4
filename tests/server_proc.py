"""Start and stop the real `iriis serve` process, as a user would, for e2e tests and benchmarks."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IRIIS = Path(sys.executable).parent / "iriis"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, home: Path, env: dict[str, str], port: int | None = None) -> None:
        self.home = home
        self.port = port or free_port()
        self.env = {**os.environ, "IRIIS_HOME": str(home), "IRIIS_PORT": str(self.port),
                    "PYTHONUNBUFFERED": "1", **env}
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> "ServerProcess":
        self.proc = subprocess.Popen(
            [str(IRIIS), "serve"], cwd=REPO, env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout):
            self.kill()
            raise RuntimeError("iriis serve did not start:\n" + "".join(self.lines[-40:]))
        if self.proc.poll() is not None:
            raise RuntimeError("iriis serve exited:\n" + "".join(self.lines[-40:]))
        return self

    def _read(self) -> None:
        assert self.proc and self.proc.stdout
        for line in self.proc.stdout:
            self.lines.append(line)
            if "iriis: serving on" in line:
                self._ready.set()
        self._ready.set()

    def output(self) -> str:
        return "".join(self.lines)

    def printed_key(self) -> str | None:
        match = re.search(r"^\s+(iriis_[A-Za-z0-9_-]+)\s*$", self.output(), re.M)
        return match.group(1) if match else None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 90.0) -> int:
        """Send the signal to the server process alone (as `kill` would) and wait for it."""
        assert self.proc
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        time.sleep(0.5)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
