"""Past one machine: the checked-in cluster and Serve configs are accepted by Ray's own schemas,
every deployment bounds its queue, and (e2e) a real two-node Ray cluster on this machine runs
`iriis serve` on PostgreSQL with the conversations' actors on the second node; when that node's
raylet is killed they come back on the head with every accepted message kept.

One module, one cluster: two `ray start` processes with short temp dirs, torn down by their
own process ids (never `ray stop`, which would stop every Ray on the machine)."""

from __future__ import annotations

import asyncio
import importlib
import json
import pkgutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from actors.relay.pairing import decode
from tests.conftest import OWNER_PIN
from tests.relay_proc import LongPoll, relay_serve
from tests.scripted_openai import text, tools as tool_call
from tests.server_proc import REPO, ServerProcess, free_port, set_pin
from tests.ray_cluster import Cluster
from tests.sse import chat
from tests.waiting import until

KEY = "multinode-owner-key"
# The same PIN as the other servers: they share the PostgreSQL database, and the owner's PIN is in it.
PIN = OWNER_PIN
WORKER_RESOURCE = "agent_node"


# -- the checked-in configs --------------------------------------------------------------------

def test_serve_config_is_accepted_by_rays_schema() -> None:
    from ray.serve.schema import ServeDeploySchema

    config = ServeDeploySchema.model_validate(yaml.safe_load((REPO / "serve_apps" / "serve.yaml").read_text()))
    (app,) = config.applications
    module, _, name = app.import_path.partition(":")
    assert callable(getattr(importlib.import_module(module), name))
    deployments = {d.name: d for d in app.deployments}
    assert set(deployments) == {"Gateway", "AgentLoop", "Perception"}
    for d in deployments.values():
        assert d.autoscaling_config and d.autoscaling_config["max_replicas"] > d.autoscaling_config["min_replicas"]
        assert d.max_ongoing_requests > 0 and d.max_queued_requests > 0
        assert d.backpressure_config.retry_after_s
    gpus = deployments["Perception"].ray_actor_options.num_gpus
    assert 0 < gpus < 1  # replicas share a GPU
    # Serve's gateway limit stays above the replica's own 503 gate (default 200).
    assert deployments["Gateway"].max_ongoing_requests > 200


def test_every_deployment_bounds_its_queue() -> None:
    from ray.serve import Deployment

    import serve_apps.deployments as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Deployment):
                found[value.name] = value._deployment_config
    assert {"Gateway", "AgentLoop", "Perception"} <= set(found)
    for name, config in found.items():
        assert config.max_queued_requests > 0, f"{name} has an unbounded queue"
        assert config.max_ongoing_requests > 0, name
        assert config.backpressure_config.retry_after_s, f"{name} gives no Retry-After"


def test_cluster_yaml_is_accepted_by_the_cluster_launchers_schema() -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((REPO / "cluster.yaml").read_text())
    validate_config(prepare_config(config))
    types = config["available_node_types"]
    assert types[config["head_node_type"]]["max_workers"] == 0
    assert any(t["resources"].get("GPU") for t in types.values())
    assert any(t["resources"].get(WORKER_RESOURCE) for t in types.values())
    # Every node's Ray starts with what `iriis serve` sets before it starts Ray itself: one event
    # loop per replica and handle, and a minute for an HTTP proxy to start on a busy node.
    from serve_apps.cli.serve import RAY_START_ENV

    starts = [c for key in ("head_start_ray_commands", "worker_start_ray_commands")
              for c in config[key] if "ray start" in c]
    assert len(starts) == 2
    for command in starts:
        for name, value in RAY_START_ENV.items():
            assert f"{name}={value} " in command, (name, command)


# -- a real two-node cluster -------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster_server(scripted, pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, ServerProcess]]:
    cluster = Cluster()
    try:
        cluster.start(["--num-cpus=2"], ["--num-cpus=1", f"--resources={json.dumps({WORKER_RESOURCE: 10})}"])
        home = tmp_path_factory.mktemp("home-multinode")
        (home / "mcp.yaml").write_text("servers:\n  builtin: {}\n")
        server = ServerProcess(home, {
            "RAY_ADDRESS": cluster.address, "RAY_AUTH_MODE": "disabled",
            "IRIIS_MCP_CONFIG": str(home / "mcp.yaml"), "DATABASE_URL": pg_url,
            "OPENAI_BASE_URL": scripted.base_url, "OPENAI_API_KEY": "sk-scripted",
            "IRIIS_CHAT_MODEL": "scripted-model", "IRIIS_OWNER_KEYS": KEY,
            "IRIIS_SESSION_PREFER_RESOURCE": WORKER_RESOURCE, "IRIIS_SESSION_SPARES": "1",
            "IRIIS_PROXY_LOCATION": "HeadOnly",
        }).start(timeout=300)
        set_pin(server, PIN)
        try:
            yield cluster, server
        finally:
            server.stop()
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster_relay(cluster_server, pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`iriis relay serve` on the same cluster and PostgreSQL, its session actors preferring the
    second node (both nodes share this machine's disk, which holds the relay's files)."""
    cluster, _ = cluster_server
    home = tmp_path_factory.mktemp("relay-multinode")
    proc, port = relay_serve(home, home / "data", {
        "RAY_ADDRESS": cluster.address, "RAY_AUTH_MODE": "disabled", "DATABASE_URL": pg_url,
        "IRIIS_RELAY_TLS_ADDR": f"127.0.0.1:{free_port()}", "IRIIS_RELAY_PREFER_RESOURCE": WORKER_RESOURCE,
    })
    try:
        token = decode(proc.wait_lines(1, 180)[0])
        yield {"url": f"http://127.0.0.1:{port}/s/{token.uid}", "uid": token.uid,
               "auth": {"Authorization": f"Bearer {token.key}"}}
    finally:
        proc.stop()


def _relay_post(relay: dict[str, Any], content: str) -> int:
    answer = httpx.post(relay["url"], headers=relay["auth"], timeout=120,
                        json={"message": {"role": "user", "name": "writer", "content": content}})
    assert answer.status_code == 201, answer.text
    return int(answer.json()["seq"])


def _session_nodes(state: dict[str, Any]) -> dict[str, str]:
    return {name: a["node"] for name, a in state["actors"].items() if name.startswith("session-slot:")}


def _start_conversations(cluster: Cluster, client: httpx.Client) -> tuple[list[str], dict[str, str], str]:
    """Two conversations, whose actors must be on the second node: (their ids, slot -> node, that node)."""
    sids: list[str] = []
    for i in range(2):
        events = chat(client, KEY, f"first message {i}")
        sids.append(next(d for e, d in events if e == "session")["session_id"])
        assert any(e == "done" for e, _ in events), events
    state = cluster.state()
    worker = [n for n, info in state["nodes"].items() if info["alive"] and info["worker"]]
    assert len(worker) == 1, state["nodes"]
    placed = _session_nodes(state)
    # Every slot (the two adopted ones and the spare behind them) prefers the second node, and
    # the preference holds while that node is alive (actors.common.placement).
    assert len(placed) >= 2 and all(node == worker[0] for node in placed.values()), (placed, worker)
    return sids, placed, worker[0]


def _device_ask(server: ServerProcess, token: str, message: str) -> dict[str, Any]:
    reply = httpx.post(f"{server.url}/v1/ask", json={"message": message},
                       headers={"Authorization": f"Bearer {token}"}, timeout=120)
    assert reply.status_code == 200, reply.text
    return reply.json()


@pytest.mark.e2e
# Two Ray nodes and a server start, then Ray's node-death detection: 91 s on a quiet machine,
# 480 s (setup 196 + call 284) beside two CPU hogs, where the suite-wide 480 s stopped it.
@pytest.mark.timeout(1200)
async def test_conversations_a_device_a_camera_stream_and_a_relay_session_on_the_second_node_survive_its_death(
        cluster_server, cluster_relay, model) -> None:
    from tests.device_client import connected, hello, pair, tool
    from tests.test_devices_agent import Answering, echo
    from tests.test_e2e_camera import Cam
    from tests.vision_draw import jpeg, shapes_frame

    cluster, server = cluster_server
    # Every model call gets a plain answer unless a test step queued its own.
    model.default_reply = text("Noted.")
    client = httpx.Client(base_url=server.url, timeout=120)
    sids, placed, worker = await asyncio.to_thread(_start_conversations, cluster, client)

    # A paired device and a camera stream, whose actors prefer the second node too.
    device_hello = hello(tools=[tool("files_stat", tier=0)])
    paired = await asyncio.to_thread(pair, server.url, KEY, PIN, skills=["files"], label="Node box")
    device, _ = await connected(server.url, paired["token"], device_hello)
    device_name = f"device:{paired['device_id']}"
    answering = Answering(device, echo)
    cam = await asyncio.to_thread(Cam, server.url, "", KEY)
    assert (await asyncio.to_thread(cam.frame, jpeg(shapes_frame())))["type"] == "perception"
    camera_name = f"camera:{cam.hello['stream_id']}"
    # A relay session with a reader's long-poll parked on its actor.
    relay = cluster_relay
    relay_name = f"relay:{relay['uid']}"
    head = await asyncio.to_thread(_relay_post, relay, "before the node died")
    reader = LongPoll(relay["url"], relay["auth"], head, wait=55, http_timeout=240)
    await asyncio.to_thread(until, lambda: cluster.call(relay_name, "waiting") == 1, 60)

    state = await asyncio.to_thread(cluster.state)
    assert state["actors"][device_name]["node"] == worker, state["actors"]
    assert state["actors"][camera_name]["node"] == worker, state["actors"]
    assert state["actors"][relay_name]["node"] == worker, state["actors"]
    gateway_on_worker = any(name.startswith("SERVE_REPLICA") and "Gateway" in name and a["node"] == worker
                            for name, a in state["actors"].items())

    await asyncio.to_thread(cluster.kill_worker_node)
    await asyncio.to_thread(cluster.wait_node_dead, worker)

    # The relay: the parked reader is woken by the next post (its poll parked again on the
    # actor restarted on the head, or finds the post in the log), which succeeds at the first
    # try; the log holds each message once, with no seq skipped or reused.
    assert await asyncio.to_thread(_relay_post, relay, "after the node died") == head + 1
    assert await asyncio.to_thread(reader.join, 180) and reader.status == 200, (reader.status, reader.body)
    assert [m["message"]["content"] for m in reader.body["messages"]] == ["after the node died"]
    log = httpx.get(relay["url"], params={"since": 0}, headers=relay["auth"], timeout=60).json()
    written = [m["message"]["content"] for m in log["messages"] if m.get("message", {}).get("name") == "writer"]
    assert written == ["before the node died", "after the node died"]
    seqs = [m["seq"] for m in log["messages"]]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and log["last_seq"] == head + 1

    # Each conversation answers again, from the head, with what it had accepted.
    def healthy() -> bool:
        return client.get("/healthz").status_code == 200
    await asyncio.to_thread(until, healthy, 120)
    for i, sid in enumerate(sids):
        events = await asyncio.to_thread(chat, client, KEY, f"second message {i}", sid, 120)
        assert any(e == "done" for e, _ in events), (
            events, client.get("/v1/errors", headers={"Authorization": f"Bearer {KEY}"}).text[:2000])
        stored = client.get(f"/v1/sessions/{sid}/messages", headers={"Authorization": f"Bearer {KEY}"}).json()
        texts = [m["content"] for m in stored["data"]]
        assert f"first message {i}" in texts and f"second message {i}" in texts, texts

    # The camera stream goes on (its actor restarted on the head) when its socket ended on the
    # head; a socket that ended on the dead node is gone with it, and a new stream works.
    if gateway_on_worker:
        await asyncio.to_thread(cam.close)
        cam = await asyncio.to_thread(Cam, server.url, "", KEY)
    assert (await asyncio.to_thread(cam.frame, jpeg(shapes_frame())))["type"] == "perception"
    await asyncio.to_thread(cam.close)

    # The device's tool works again: over the same socket (registered again with its restarted
    # actor) or, if that socket died with the node, after reconnecting as the desktop client does.
    if gateway_on_worker:
        await answering.stop()
        device, _ = await connected(server.url, paired["token"], device_hello)
        answering = Answering(device, echo)

    async def offered() -> None:
        while True:
            await asyncio.to_thread(_device_ask, server, paired["token"], "use my device files")
            if "files_stat" in [t["function"]["name"] for t in model.requests[-1]["body"].get("tools") or []]:
                return
            await asyncio.sleep(0.5)
    await asyncio.wait_for(offered(), 120)
    def stat_turn(body: dict[str, Any]) -> Any:
        # Keyed on the turn's own words: memory's background calls after earlier turns must not
        # take this turn's scripted replies.
        messages = body.get("messages") or []
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if not users or "stat my device file after" not in str(messages[users[-1]].get("content")):
            return None
        answered = any(m.get("role") == "tool" for m in messages[users[-1]:])
        return text("It is there.") if answered else tool_call(("files_stat", {"path": "/tmp/after"}))
    model.responder = stat_turn
    reply = await asyncio.to_thread(_device_ask, server, paired["token"], "stat my device file after")
    assert reply["reply"] == "It is there." and answering.calls, (gateway_on_worker, answering.frames)
    assert answering.calls[-1]["args"] == {"path": "/tmp/after"}
    await answering.stop()

    after = await asyncio.to_thread(cluster.state)
    alive = [n for n, info in after["nodes"].items() if info["alive"]]
    assert worker not in alive
    moved = _session_nodes(after)
    assert set(placed) <= set(moved), (placed, moved)  # the same actors, restarted in place
    assert all(node in alive for node in moved.values()), moved
    assert after["actors"][device_name]["node"] in alive
    assert after["actors"][relay_name]["node"] in alive
    client.close()
