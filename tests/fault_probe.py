"""Find the process of a running server's actors, so fault tests can `kill -9` them.

The test process never joins the server's Ray cluster itself (another test module may run its
own Ray in the same pytest process): a probe subprocess does, once, and answers one JSON line
per request line on stdin.

    probe = Probe(server)               # finds the server's GCS among its child processes
    probe.actor("tools")                # {"pid": 123, "restarts": 0, "state": "ALIVE"}
    probe.session(session_id)           # the actor holding that conversation
    probe.replica("Gateway")            # the live replica of a Serve deployment
    probe.kill("tools")                 # SIGKILL its process; returns what it was
    probe.end_session(session_id)       # end a conversation's actor as its idle exit does
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import psutil

PROBE = r'''
import json, sys
import ray
from ray._private import state

ray.init(address=sys.argv[1], namespace="iriis", log_to_driver=False, logging_level="ERROR")

def by_id(actor_id):
    info = state.actors(actor_id=actor_id)
    return {"pid": info.get("Pid"), "restarts": info.get("NumRestarts", 0), "state": info.get("State"),
            "id": actor_id}

def named(name):
    try:
        handle = ray.get_actor(name, namespace="iriis")
    except ValueError:
        return {"pid": None, "state": "GONE"}
    return by_id(handle._actor_id.hex())

def session(session_id):
    try:
        registry = ray.get_actor("sessions", namespace="iriis")
    except ValueError:
        return named("session:" + session_id)
    handle = ray.get(registry.get.remote(session_id), timeout=60)
    if handle is None:
        return {"pid": None, "state": "GONE"}
    return by_id(handle._actor_id.hex())

def replica(deployment):
    """The live replica of a Serve deployment (its actor class is ServeReplica:<app>:<name>)."""
    alive = [a for a in state.actors().values()
             if a.get("ActorClassName", "").endswith(":" + deployment) and a.get("State") == "ALIVE"]
    if not alive:
        return {"pid": None, "state": "GONE"}
    return by_id(alive[0]["ActorID"]) | {"replicas": len(alive)}

def end(session_id):
    """End a conversation's actor for good, as its idle exit does (ray.kill, no restart)."""
    registry = ray.get_actor("sessions", namespace="iriis")
    handle = ray.get(registry.get.remote(session_id), timeout=60)
    if handle is None:
        return {"pid": None, "state": "GONE"}
    before = by_id(handle._actor_id.hex())
    ray.kill(handle, no_restart=True)
    return before

print("PROBE " + json.dumps({"ready": True}), flush=True)
def call(arg):
    name, method = arg.split(" ", 1)
    handle = ray.get_actor(name, namespace="iriis")
    return {"value": ray.get(getattr(handle, method).remote(), timeout=60)}

for line in sys.stdin:
    kind, _, arg = line.strip().partition(" ")
    try:
        out = (session(arg) if kind == "session" else call(arg) if kind == "call"
               else replica(arg) if kind == "replica" else end(arg) if kind == "end" else named(arg))
    except Exception as exc:
        out = {"pid": None, "state": "ERROR", "error": repr(exc)}
    print("PROBE " + json.dumps(out), flush=True)
'''


def gcs_address(server: Any) -> str:
    """The GCS address of the Ray instance `iriis serve` started (one of its descendants)."""
    assert server.proc is not None
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        try:
            args = child.cmdline()
        except psutil.Error:
            continue
        # The raylet is told where the GCS listens (the GCS itself may be started on port 0).
        if args and args[0].endswith("raylet"):
            for arg in args:
                if arg.startswith("--gcs-address="):
                    return arg.split("=", 1)[1]
    raise AssertionError("the server's raylet was not found")


class Probe:
    def __init__(self, server: Any) -> None:
        # The server's Ray runs with token authentication (Ray's default): the probe joins the
        # same way its own workers do.
        env = {**os.environ, "RAY_AUTH_MODE": "token"}
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, gcs_address(server)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        assert json.loads(self._line())["ready"]

    def _line(self) -> str:
        """The next answer (Ray's own warnings on the same stdout are skipped)."""
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("the fault probe exited")
            if line.startswith("PROBE "):
                return line[6:]

    def _ask(self, kind: str, arg: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{kind} {arg}\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def actor(self, name: str) -> dict[str, Any]:
        return self._ask("actor", name)

    def session(self, session_id: str) -> dict[str, Any]:
        return self._ask("session", session_id)

    def replica(self, deployment: str) -> dict[str, Any]:
        """The live replica of a Serve deployment ("Gateway", "AgentLoop")."""
        return self._ask("replica", deployment)

    def call(self, name: str, method: str) -> Any:
        """Call a method (no arguments, JSON-able answer) of a named actor."""
        answer = self._ask("call", f"{name} {method}")
        assert "value" in answer, answer
        return answer["value"]

    def kill(self, name: str, session: bool = False) -> dict[str, Any]:
        """SIGKILL the actor's process (as `kill -9` would); returns what it was before."""
        found = self.session(name) if session else self.actor(name)
        assert found.get("state") == "ALIVE" and found.get("pid"), found
        os.kill(found["pid"], signal.SIGKILL)
        return found

    def end_session(self, session_id: str) -> dict[str, Any]:
        """End the conversation's actor for good, as its idle exit would; returns what it was."""
        found = self._ask("end", session_id)
        assert found.get("state") == "ALIVE", found
        return found

    def restarted(self, name: str, before: dict[str, Any], session: bool = False,
                  timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the same actor is alive again in a new process."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.session(name) if session else self.actor(name)
            if now.get("state") == "ALIVE" and now.get("pid") not in (None, before["pid"]):
                return now
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} did not come back: {now}")
            time.sleep(0.2)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
