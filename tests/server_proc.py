"""Start and stop the real `iriis serve` process, as a user would, for e2e tests and benchmarks."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Self

from tests.waiting import until

REPO = Path(__file__).resolve().parent.parent
IRIIS = Path(sys.executable).parent / "iriis"
# conftest.py names this file for the whole run (workers included); its summary counts the lines.
STARTS_LOG = "IRIIS_TEST_STARTS_LOG"


# Ray gives a new node's raylet a fixed 30 s to register (ray/_private/node.py, not a setting); on
# this 2-core machine beside two CPU hogs it once took longer. A start that fails so is tried again.
RAY_START_TIMED_OUT = "The current node timed out during startup"


# Set by `make test-fast`: its tests start no server and no Ray, and one that tries fails saying so.
FAST = "IRIIS_TEST_FAST"


# Under `make test` two workers share the two cores, and a local model gets one thread there:
# llama.cpp's threads wait on each other at every step, so one stalled by the other worker stalls
# them all (the Qwen tests took 68 s alone and 190 s beside the other worker with two threads).
LOCAL_THREADS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else None


def count_start(kind: str) -> None:
    """Note one start of a real server process (`kind`: what it was) for the run's summary."""
    if os.environ.get(FAST):
        raise RuntimeError(f"this test starts {kind}: mark its module `e2e` (a real server) or `ray` so "
                           "`make test-fast` leaves it to `make test`")
    path = os.environ.get(STARTS_LOG)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(kind + "\n")


def free_port() -> int:
    """A free loopback port above Ray's worker ports (10002-19999) and below the kernel's
    ephemeral range (32768 and up): a port bind(0) hands out can be taken by any outgoing
    connection in the seconds before the server binds it (it happened once in CI)."""
    for _ in range(200):
        port = random.randint(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, home: Path, env: dict[str, str], port: int | None = None) -> None:
        self.home = home
        self._own_port = port is None
        self.port = port or free_port()
        self.env = {**os.environ, "IRIIS_HOME": str(home), "IRIIS_PORT": str(self.port),
                    "PYTHONUNBUFFERED": "1", **env}
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 600.0) -> "ServerProcess":
        try:
            return self._start(timeout)
        except RuntimeError as exc:
            if not ((self._own_port and "Failed to bind to address" in str(exc)) or RAY_START_TIMED_OUT in str(exc)):
                raise
            self.kill()  # whatever of its Ray did start
        # Someone took the port we picked before the server bound it, or Ray's raylet missed its
        # 30 s: once more (on another port, when the port was ours to pick).
        if self._own_port:
            self.port = free_port()
        self.env["IRIIS_PORT"] = str(self.port)
        self.lines, self._ready = [], threading.Event()
        return self._start(timeout)

    def _start(self, timeout: float) -> "ServerProcess":
        count_start("iriis serve")
        self.proc = subprocess.Popen(
            [str(IRIIS), "serve"], cwd=REPO, env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        threading.Thread(target=self._read, args=(self.proc, self.lines, self._ready), daemon=True).start()
        if not self._ready.wait(timeout):
            self.kill()
            raise RuntimeError("iriis serve did not start:\n" + "".join(self.lines[-40:]))
        if not any("iriis: serving on" in line for line in self.lines):
            # Its output ended without the line: it is exiting (or has).
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
            raise RuntimeError("iriis serve exited:\n" + "".join(self.lines[-40:]))
        return self

    @staticmethod
    def _read(proc: subprocess.Popen[str], lines: list[str], ready: threading.Event) -> None:
        assert proc.stdout
        for line in proc.stdout:
            lines.append(line)
            if "iriis: serving on" in line:
                ready.set()
        ready.set()

    def output(self) -> str:
        return "".join(self.lines)

    def printed_key(self) -> str | None:
        match = re.search(r"^\s+(iriis_[A-Za-z0-9_-]+)\s*$", self.output(), re.M)
        return match.group(1) if match else None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 90.0) -> int:
        """Send the signal to the server process alone (as `kill` would) and wait for it; whatever
        of its session outlives it (a Ray worker still exiting) is ended too."""
        assert self.proc
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the server and every process of its session (Ray's processes, the tool servers):
        a test fixture's teardown where a clean shutdown is not what is tested."""
        if self.proc:
            end_session(self.proc.pid)
            if self.proc.poll() is None:
                self.proc.wait(10)


def session_pids(sid: int) -> list[int]:
    """The processes of session `sid` (a child started with start_new_session leads its own)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[3] == str(sid) and fields[0] != "Z":
                pids.append(int(entry))
    return pids


def end_session(sid: int) -> None:
    """SIGKILL every process of session `sid` and wait (10 s at most) until none is left running."""
    deadline = time.monotonic() + 10
    while (pids := session_pids(sid)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a service manager would, up to 15 s; then its whole session is ended."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            pass
    end_session(proc.pid)
    if proc.poll() is None:
        proc.wait(10)


class ChildServer(ABC):
    """A real server a test runs in a temporary folder of its own (Dovecot, Radicale): `start`
    runs `command()` and waits until `ready()`, `stop` ends it (SIGTERM) and waits until its port
    refuses, and `start` again reuses the port and the data; `close` also removes the folder.
    Subclasses set `kind`, `root`, `port` and `log_name`, and say what ready means."""

    kind = "server"
    log_name = "server.log"
    root: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @abstractmethod
    def command(self) -> list[str]:
        """The server's command line."""

    @abstractmethod
    def ready(self) -> bool:
        """Whether it answers as it should once started (its greeting, an HTTP answer)."""

    def refuses(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
        except OSError:
            return True
        return False

    def logs(self) -> str:
        log = self.root / self.log_name
        return log.read_text(errors="replace")[-3000:] if log.exists() else ""

    def start(self) -> Self:
        count_start(self.kind)
        with open(self.root / self.log_name, "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        until(self.ready, 30, lambda: f"{self.kind} did not answer on port {self.port}:\n{self.logs()}")
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        terminate(self.proc)
        self.proc = None
        until(self.refuses, 15, lambda: f"port {self.port} still answers after {self.kind} stopped")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def scripted_env(home: Path, base_url: str, owner_key: str, mcp_yaml: str, **extra: str) -> dict[str, str]:
    """The environment of a test server on SQLite in `home`, whose chat and learning models are
    the scripted server at `base_url`, with `mcp_yaml` as its tool configuration."""
    (home / "mcp.yaml").write_text(mcp_yaml)
    return {
        "IRIIS_MCP_CONFIG": str(home / "mcp.yaml"), "DATABASE_URL": "",
        "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-scripted",
        "IRIIS_CHAT_MODEL": "scripted-model", "IRIIS_LEARNING_MODEL": "scripted-learner",
        "IRIIS_OWNER_KEYS": owner_key, "IRIIS_PROVIDER_TIMEOUT": "5", **extra,
    }


def set_pin(server: ServerProcess, pin: str) -> None:
    """`iriis pin set` for the owner of a running test server, as its operator would."""
    subprocess.run([str(IRIIS), "pin", "set", "--stdin"], input=f"{pin}\n", env=server.env,
                   check=True, capture_output=True, text=True, timeout=60)
