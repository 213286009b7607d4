"""A Ray cluster on this machine for the tests that need one of their own: `ray start` processes
with short temp dirs (a head, and optionally a second node), torn down by their own process ids,
never `ray stop`, which would stop every Ray on the machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from serve_apps.cli.serve import SERVE_PATIENCE
from tests.server_proc import REPO, count_start, free_port

RAY = Path(sys.executable).parent / "ray"


def _pids_using(marker: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        out.append(int(entry))
            except OSError:
                continue
    return out


def _argv0(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return ""


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Cluster:
    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.head_dir, self.worker_dir = f"/tmp/rh{tag}", f"/tmp/rw{tag}"
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # As `iriis serve` and cluster.yaml start Ray: Serve's proxy gets 60 s to start.
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", **SERVE_PATIENCE}
        self.env.pop("RAY_ADDRESS", None)

    def _start(self, *args: str) -> None:
        count_start("ray start")
        subprocess.run([str(RAY), "start", *args, "--disable-usage-stats"], env=self.env, check=True,
                       capture_output=True, text=True, timeout=120)

    def start(self, head: list[str], worker: list[str] | None = None) -> "Cluster":
        """A head node started with `head`'s options, and a second node with `worker`'s."""
        self._start("--head", f"--port={self.port}", f"--temp-dir={self.head_dir}",
                    *(head if any(a.startswith("--include-dashboard") for a in head)
                      else [*head, "--include-dashboard=false"]))
        if worker is not None:
            self._start(f"--address={self.address}", f"--temp-dir={self.worker_dir}", *worker)
        return self

    def _driver(self, body: str) -> Any:
        """Run `body` in a short-lived driver on the cluster; it leaves its answer in `result`."""
        script = (
            "import json, ray\n"
            "from ray._private import state\n"
            f"ray.init(address={self.address!r}, namespace='iriis', logging_level='ERROR', log_to_driver=False)\n"
            f"{body}\n"
            "print('RESULT ' + json.dumps(result))\n"
        )
        out = subprocess.run([sys.executable, "-c", script], env=self.env, capture_output=True, text=True,
                             timeout=120, cwd=REPO)
        # Ray prints its own warnings on the same stdout (a lagging raylet on a busy machine).
        lines = [line[7:] for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        assert lines, f"the driver printed no result: {out.stdout[-2000:]} {out.stderr[-2000:]}"
        return json.loads(lines[-1])

    def state(self, worker_resource: str = "agent_node") -> dict[str, Any]:
        """Nodes (the second one has `worker_resource`) and the named actors' placement, read
        from the GCS."""
        return self._driver(
            "nodes = {n['NodeID']: {'alive': n['Alive'], 'worker': n['Resources'].get("
            f"{worker_resource!r}, 0) > 0}} for n in ray.nodes()}}\n"
            "actors = {a['Name']: {'node': a['Address']['NodeID'], 'state': a['State']}\n"
            "          for a in state.actors().values() if a.get('Name') and a['State'] == 'ALIVE'}\n"
            "result = {'nodes': nodes, 'actors': actors}")

    def call(self, name: str, method: str) -> Any:
        """`method()` of the named actor (JSON-able results only)."""
        return self._driver(f"result = ray.get(ray.get_actor({name!r}).{method}.remote())")

    def kill_worker_node(self) -> None:
        """kill -9 the second node's raylet (its workers go with it)."""
        raylets = [p for p in _pids_using(self.worker_dir) if _argv0(p).endswith("/raylet")]
        assert len(raylets) == 1, "expected the worker node's one raylet"
        _kill(raylets)

    def wait_node_dead(self, node_id: str, timeout: float = 180.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if not state["nodes"].get(node_id, {}).get("alive", False):
                return state
            assert time.monotonic() < deadline, "the cluster never marked the worker node dead"
            time.sleep(2)

    def stop(self) -> None:
        for _ in range(3):
            pids = _pids_using(self.head_dir) + _pids_using(self.worker_dir)
            if not pids:
                break
            _kill(pids)
            time.sleep(1)
        subprocess.run(["rm", "-rf", self.head_dir, self.worker_dir], check=False)
