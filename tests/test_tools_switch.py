"""The owner's switch on a tool server, and each server's last good call and last error, through
the real `iriis serve` (the shared `server`, whose `mail` talks to a real Dovecot): GET and PUT
/v1/tools, the offer a chat turn gets with `mail` switched off, the switch kept through a kill of
the tool hub, and `mail` on again and connected at the end (other tests share this server)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from tests import scripted_openai as so
from tests.conftest import OWNER_KEY
from tests.fault_probe import Probe
from tests.sse import chat
from tests.waiting import until

pytestmark = pytest.mark.e2e
MAIL_TOOLS = {"list_mail", "read_mail", "draft_mail", "move_mail", "flag_mail", "archive_mail", "send_mail"}
MAIL_MODULE = "actors.tools.servers.mail"


def servers(client: httpx.Client) -> dict[str, dict[str, Any]]:
    answer = client.get("/v1/tools")
    assert answer.status_code == 200, answer.text
    return {s["name"]: s for s in answer.json()["data"]}


def offered(request_body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request_body.get("tools", [])}


def mail_processes(server: Any) -> int:
    """How many `mail` server processes `iriis serve` runs now."""
    count = 0
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        try:
            if MAIL_MODULE in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                count += 1
        except psutil.Error:
            continue
    return count


def switch(client: httpx.Client, name: str, enabled: bool) -> dict[str, Any]:
    answer = client.put(f"/v1/tools/{name}", json={"enabled": enabled})
    assert answer.status_code == 200, answer.text
    return answer.json()


def wait_on(client: httpx.Client, *names: str) -> None:
    until(lambda: all(servers(client)[n]["state"] == "on" for n in names), timeout=150,
          describe=lambda: str({n: servers(client)[n] for n in names}))


@pytest.fixture
def mail_back_on(client: httpx.Client) -> Iterator[None]:
    """However the test ends, `mail` is switched on again and connected for the next one."""
    yield
    switch(client, "mail", True)
    wait_on(client, "mail", "calendar", "files", "studio")


def test_each_server_shows_its_last_good_call_and_its_last_error(client, model) -> None:
    model.enqueue(so.tools(("list_mail", {"since": "when pigs fly"})), so.text("That is not a date I know."))
    chat(client, OWNER_KEY, "Any mail since when pigs fly?")
    mail = servers(client)["mail"]
    assert "could not read the date 'when pigs fly'" in mail["last_error"]
    earlier = mail["last_ok"]

    model.enqueue(so.tools(("list_mail", {"limit": 3})), so.text("Here are your latest three."))
    chat(client, OWNER_KEY, "List my latest mail.")
    listed = servers(client)
    mail = listed["mail"]
    assert mail["last_error"] is None and isinstance(mail["last_ok"], float)
    assert earlier is None or mail["last_ok"] > earlier
    assert mail["enabled"] is True and mail["state"] == "on"
    # Every row has the fields, the built-in tools' too.
    assert all({"enabled", "last_ok", "last_error"} <= set(s) for s in listed.values())


def test_the_switch_names_a_server_of_mcp_yaml_and_says_on_or_off(client, server) -> None:
    for name in ("nonexistent", "builtin", "two%20words", "x" * 65):
        answer = client.put(f"/v1/tools/{name}", json={"enabled": False})
        assert answer.status_code == 404, (name, answer.text)
        assert answer.json()["error"]["code"] == "not_found"
    for body in ({}, {"enabled": "maybe"}, {"enabled": None}, [True]):
        answer = client.put("/v1/tools/mail", json=body)
        assert answer.status_code == 422, (body, answer.text)
        assert set(answer.json()["error"]) >= {"code", "message"}
    assert httpx.put(f"{server.url}/v1/tools/mail", json={"enabled": False}).status_code == 401
    assert servers(client)["mail"]["state"] == "on"  # none of those switched it


def test_mail_switched_off_leaves_the_offer_stays_off_through_a_restart_and_comes_back(
        client, model, server, mail_back_on) -> None:
    assert mail_processes(server) == 1
    off = switch(client, "mail", False)
    assert (off["state"], off["reason"], off["enabled"], off["tools"]) == ("off", "switched off by the owner", False, 0)
    listed = servers(client)
    assert (listed["mail"]["state"], listed["mail"]["reason"]) == ("off", "switched off by the owner")
    assert listed["calendar"]["state"] == "on"
    until(lambda: mail_processes(server) == 0, timeout=30, describe=lambda: "a mail server process still runs")

    model.enqueue(so.text("Mail is switched off, so I cannot look."))
    chat(client, OWNER_KEY, "Check my mail: anything from Bob?")
    tools = offered(model.requests[0]["body"])
    assert tools and not tools & MAIL_TOOLS, tools

    # Kept in the store: the tool hub killed and restarted by Ray leaves mail off.
    probe = Probe(server)
    try:
        probe.restarted("tools", probe.kill("tools"))
    finally:
        probe.close()
    wait_on(client, "calendar", "files", "studio")
    mail = servers(client)["mail"]
    assert (mail["state"], mail["reason"], mail["enabled"]) == ("off", "switched off by the owner", False)
    assert mail_processes(server) == 0

    on = switch(client, "mail", True)
    assert on["enabled"] is True and on["state"] in ("starting", "on")
    wait_on(client, "mail")
    assert servers(client)["mail"]["tools"] == 7 and mail_processes(server) == 1
    model.enqueue(so.text("Nothing new from Bob."))
    chat(client, OWNER_KEY, "Check my mail: anything from Bob?")
    assert "list_mail" in offered(model.requests[-1]["body"])
