"""The checked-in Serve config deployed as an operator would: `serve deploy serve_apps/serve.yaml`
against a Ray cluster of its own (one node, offering the resources cluster.yaml's node types
offer: `agent_node` for the AgentLoop and a GPU with `perception_node` for Perception), then a
streamed reply through the HTTP proxy it starts, on PostgreSQL.

Only the listening address is changed in a copy of the file (a free loopback port instead of
0.0.0.0:8000); every deployment option (replica counts, queue limits, GPU fraction, resources)
is the checked-in one. The environment the app reads is the nodes' own, as on a real cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.ray_cluster import Cluster
from tests.scripted_openai import ScriptedOpenAI, text
from tests.server_proc import REPO, free_port
from tests.sse import chat
from tests.waiting import until

pytestmark = pytest.mark.e2e
SERVE = Path(sys.executable).parent / "serve"
KEY = "serve-deploy-owner-key"
REPLY = "Deployed from the config file. It answers."


def _serve(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SERVE), *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _status(address: str, env: dict[str, str]) -> dict[str, Any]:
    out = _serve("status", f"--address={address}", env=env, timeout=60)
    return yaml.safe_load(out.stdout) or {} if out.returncode == 0 else {}


@pytest.fixture(scope="module")
def deployed(scripted: ScriptedOpenAI, pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("home-serve-deploy")
    (home / "mcp.yaml").write_text("servers:\n  builtin: {}\n")
    config = yaml.safe_load((REPO / "serve_apps" / "serve.yaml").read_text())
    port = free_port()
    config["http_options"] |= {"host": "127.0.0.1", "port": port}
    config_file = home / "serve.yaml"
    config_file.write_text(yaml.safe_dump(config))

    cluster = Cluster()
    cluster.env |= {
        "IRIIS_HOME": str(home), "IRIIS_MCP_CONFIG": str(home / "mcp.yaml"), "DATABASE_URL": pg_url,
        "OPENAI_BASE_URL": scripted.base_url, "OPENAI_API_KEY": "sk-scripted", "IRIIS_CHAT_MODEL": "scripted-model",
        "IRIIS_OWNER_KEYS": KEY, "IRIIS_SESSION_SPARES": "1",
        # As cluster.yaml's nodes start: one event loop per replica and per handle.
        "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
    }
    dashboard = free_port()
    try:
        # cluster.yaml's node types in one node: the CPUs the replicas reserve (2 x 0.5 for the
        # gateway, 2 x 0.5 for the agent loop, 1 for Perception), the agent nodes' resource,
        # and a GPU (declared: Ray only counts it) with the Perception nodes' resource.
        cluster.start(["--num-cpus=4", "--num-gpus=1",
                       f"--resources={json.dumps({'agent_node': 4, 'perception_node': 1})}",
                       "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}"])
        address = f"http://127.0.0.1:{dashboard}"
        out = _serve("deploy", str(config_file), f"--address={address}", env=cluster.env)
        assert out.returncode == 0, out.stdout + out.stderr
        seen: list[dict[str, Any]] = [{}]

        def running() -> dict[str, Any] | None:
            status = seen[0] = _status(address, cluster.env)
            app = status.get("applications", {}).get("iriis", {})
            assert app.get("status") != "DEPLOY_FAILED", status
            return status if app.get("status") == "RUNNING" else None

        status = until(running, timeout=420, every=1.0, describe=lambda: f"the app never ran: {seen[0]}")
        yield {"url": f"http://127.0.0.1:{port}", "cluster": cluster, "status": status}
    finally:
        cluster.stop()


def test_serve_deploy_runs_the_checked_in_config_and_it_answers(deployed: dict[str, Any], scripted: ScriptedOpenAI) -> None:
    deployments = deployed["status"]["applications"]["iriis"]["deployments"]
    assert set(deployments) == {"Gateway", "AgentLoop", "Perception"}
    assert all(d["status"] == "HEALTHY" for d in deployments.values()), deployments
    # The config's minimums came up: two gateway and two agent-loop replicas, one Perception.
    running = {name: d.get("replica_states", {}).get("RUNNING", 0) for name, d in deployments.items()}
    assert running["Gateway"] >= 2 and running["AgentLoop"] >= 2 and running["Perception"] >= 1, running
    # Perception took its quarter of the GPU.
    free = deployed["cluster"]._driver("result = ray.available_resources().get('GPU', 0)")
    assert free == pytest.approx(1 - 0.25 * running["Perception"])

    scripted.reset()
    scripted.default_reply = text(REPLY)
    with httpx.Client(base_url=deployed["url"], timeout=120) as client:
        # The deployed app's first conversation starts cold: beside two CPU hogs that took over
        # the 60 s `chat` waits by default.
        events = chat(client, KEY, "Are you deployed?", timeout=240)
        sentences = [d["text"] for e, d in events if e == "sentence"]
        assert sentences == ["Deployed from the config file.", "It answers."], events
        assert any(e == "done" for e, _ in events)
        session_id = next(d for e, d in events if e == "session")["session_id"]
        stored = client.get(f"/v1/sessions/{session_id}/messages", headers={"Authorization": f"Bearer {KEY}"})
        assert stored.status_code == 200, stored.text
        assert [(m["role"], m["content"]) for m in stored.json()["data"]] == [
            ("user", "Are you deployed?"), ("assistant", REPLY)]
        # Without the key, the deployed gateway answers as `iriis serve`'s does.
        refused = client.post("/v1/chat", json={"message": "hi"})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
