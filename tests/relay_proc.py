"""Start the real `iriis relay serve` / `iriis relay connect` processes, as a user would."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.server_proc import IRIIS, RAY_START_TIMED_OUT, REPO, count_start, end_session, free_port


class LineProcess:
    """A child process whose stdout lines are collected; waits for N lines with a deadline."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv, self.env = argv, env
        self.lines: list[str] = []
        self.err: list[str] = []
        self._got = threading.Condition()
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> "LineProcess":
        # What it runs, without a wrapper in front (`ip netns exec NS`): "iriis relay serve".
        at = next((i for i, a in enumerate(self.argv) if Path(a).name == "iriis"), 0)
        count_start(" ".join(Path(a).name for a in self.argv[at:at + 3]))
        self.proc = subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True).start()
        return self

    def _read(self, stream, sink: list[str]) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            with self._got:
                sink.append(line.rstrip("\n"))
                self._got.notify_all()
        with self._got:
            self._got.notify_all()

    def wait_lines(self, count: int, timeout: float) -> list[str]:
        with self._got:
            self._got.wait_for(lambda: len(self.lines) >= count or (self.proc and self.proc.poll() is not None),
                               timeout)
        if len(self.lines) < count:
            raise RuntimeError(f"{self.argv[1:3]} printed {self.lines}; stderr:\n" + "\n".join(self.err[-30:]))
        return self.lines[:count]

    def stop(self, timeout: float = 60) -> int | None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode if self.proc else None


def relay_serve(home: Path, data: Path, extra_env: dict[str, str], port: int | None = None) -> tuple[LineProcess, int]:
    port = port or free_port()
    # Its own Ray unless the caller names a cluster (RAY_ADDRESS in extra_env).
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env |= {"IRIIS_HOME": str(home), "PYTHONUNBUFFERED": "1", **extra_env}
    argv = [str(IRIIS), "relay", "serve", "-addr", f"127.0.0.1:{port}", "-data", str(data)]
    proc = LineProcess(argv, env).start()
    try:
        proc.wait_lines(1, 180)  # its pairing token: up and serving
    except RuntimeError as exc:
        assert proc.proc is not None
        end_session(proc.proc.pid)  # the failed start and whatever of its Ray did start
        if RAY_START_TIMED_OUT not in str(exc):
            raise
        proc = LineProcess(argv, env).start()  # once more; its callers wait for the token
    return proc, port


def relay_connect(token: str, env: dict[str, str], prefix: list[str] | None = None) -> LineProcess:
    return LineProcess([*(prefix or []), str(IRIIS), "relay", "connect", token],
                       {**os.environ, "PYTHONUNBUFFERED": "1", **env}).start()


class LongPoll:
    """A reader's `GET /s/{uid}/wait` in a thread of its own: `status` and `body` once it returns."""

    def __init__(self, url: str, auth: dict[str, str], since: int, wait: float, http_timeout: float) -> None:
        self.status: int | None = None
        self.body: Any = None
        self._args = (f"{url}/wait", {"since": since, "timeout": wait}, auth, http_timeout)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        url, params, auth, timeout = self._args
        answer = httpx.get(url, params=params, headers=auth, timeout=timeout)
        self.status, self.body = answer.status_code, answer.json() if answer.status_code == 200 else None

    def join(self, timeout: float) -> bool:
        """True when the reader got its answer within `timeout`."""
        self.thread.join(timeout)
        return not self.thread.is_alive()
