"""The desktop device agent (`iriis-device`) end to end against a real server: pair, hello,
the agent calls a tool, a tier 2 write waits for yes, a PIN-tier call waits for the PIN, an event reaches its person's
stream and nobody else's, and uninstalling revokes the token."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import tests.scripted_openai as so
from tests.conftest import OWNER_KEY, OWNER_PIN
from tests.sse import LiveChat
from tests.test_devices_agent import OWNER, Stream, add_member, tool_message, wait_offered

pytestmark = pytest.mark.e2e
DEVICE = Path(sys.executable).parent / "iriis-device"


async def test_the_desktop_agent_end_to_end(device_server, model, tmp_path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    (root / "notes.txt").write_text("buy milk")
    token_file, spool = tmp_path / "token.json", tmp_path / "spool"
    base = [str(DEVICE), "--token-file", str(token_file), "--spool", str(spool)]
    async with httpx.AsyncClient(base_url=device_server.url, timeout=60) as client:
        made = (await client.post("/v1/me/devices/codes", headers=OWNER, json={
            "kind": "linux", "label": "Laptop", "skills": ["files", "shell"], "pin": OWNER_PIN})).json()
    paired = subprocess.run([*base, "pair", made["code"], "--server", device_server.url, "--kind", "linux"],
                            capture_output=True, text=True, timeout=60)
    assert paired.returncode == 0, paired.stderr
    assert token_file.stat().st_mode & 0o077 == 0  # the explicit file is private to its user
    agent = subprocess.Popen([*base, "run", "--root", str(root)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        await wait_offered(device_server, model, "file_read", OWNER, message="read my laptop files")
        model.enqueue(so.tools(("file_read", {"path": "notes.txt"})), so.text("It says buy milk."))
        async with httpx.AsyncClient(base_url=device_server.url, timeout=60) as client:
            reply = (await client.post("/v1/ask", json={"message": "read notes on my laptop files"},
                                       headers=OWNER)).json()
        assert reply["reply"] == "It says buy milk."
        assert "buy milk" in tool_message(model.requests[-1])
        assert tool_message(model.requests[-1]).startswith('<device_output untrusted="true"')

        # A model-written argument the tool does not take is refused by the device itself.
        model.enqueue(so.tools(("file_read", {"path": "notes.txt", "mode": "rw"})), so.text("ok"))
        async with httpx.AsyncClient(base_url=device_server.url, timeout=60) as client:
            await client.post("/v1/ask", json={"message": "read notes on my laptop files"}, headers=OWNER)
        assert "unknown argument 'mode'" in tool_message(model.requests[-1])

        # Writing a file is tier 2: proposed, refused on "no", done only after "yes".
        await wait_offered(device_server, model, "file_write", OWNER, message="write a file on my laptop")
        todo = root / "todo.txt"
        for approve in (False, True):
            model.enqueue(so.tools(("file_write", {"path": "todo.txt", "text": "call mum"})), so.text("Noted."))
            chat = await asyncio.to_thread(LiveChat, device_server.url, OWNER_KEY,
                                           {"message": "write a todo file on my laptop"})
            confirm = await asyncio.to_thread(chat.wait_for, "confirm")
            assert confirm["needs_pin"] is False and confirm["tool"] == "file_write"
            assert not todo.exists()
            async with httpx.AsyncClient(base_url=device_server.url, timeout=60) as client:
                answered = await client.post(f"/v1/confirmations/{confirm['id']}", headers=OWNER,
                                             json={"approve": approve})
                assert answered.status_code == 200
            await asyncio.to_thread(chat.wait_for, "done")
            assert todo.exists() is approve
        assert todo.read_text() == "call mum"
        assert "Wrote todo.txt (8 bytes)." in tool_message(model.requests[-1])

        # The shell is tier 3: nothing runs until the person gives their PIN.
        await wait_offered(device_server, model, "shell_run", OWNER, message="run a shell command on my laptop")
        marker = root / "ran.txt"
        model.enqueue(so.tools(("shell_run", {"command": "echo yes > ran.txt", "purpose": "Write a marker file."})),
                      so.text("Done."))
        chat = await asyncio.to_thread(LiveChat, device_server.url, OWNER_KEY,
                                       {"message": "run a shell command on my laptop"})
        confirm = await asyncio.to_thread(chat.wait_for, "confirm")
        assert confirm["needs_pin"] is True and confirm["question"] == "Allow this? Write a marker file."
        assert not marker.exists()
        async with httpx.AsyncClient(base_url=device_server.url, timeout=60) as client:
            assert (await client.post(f"/v1/confirmations/{confirm['id']}", headers=OWNER,
                                      json={"approve": True, "pin": OWNER_PIN})).status_code == 200
        await asyncio.to_thread(chat.wait_for, "done")
        assert marker.read_text().strip() == "yes"

        # An event reaches the owner's stream and not another person's.
        member = await add_member(device_server, "desk@example.com")
        mine, theirs = Stream(device_server.url, OWNER), Stream(device_server.url, member)
        subprocess.run([*base, "notify", "Backup finished", "All 3 folders copied."], check=True, timeout=30)

        async def arrived() -> None:
            while not any(e["title"] == "Backup finished" for e in mine.events):
                await asyncio.sleep(0.2)
        await asyncio.wait_for(arrived(), 30)
        assert theirs.events == []
    finally:
        agent.terminate()
        agent.wait(30)

    bye = subprocess.run([*base, "uninstall"], capture_output=True, text=True, timeout=60)
    assert bye.returncode == 0, bye.stderr
    assert not token_file.exists()
    async with httpx.AsyncClient(base_url=device_server.url, timeout=60) as client:
        devices = (await client.get("/v1/me/devices", headers=OWNER)).json()["data"]
    assert all(d["label"] != "Laptop" for d in devices)


# -- where the token is kept -----------------------------------------------------------------------

def _keyring_env(tmp_path: Path, backend: str) -> dict[str, str]:
    import os
    return {**os.environ, "PYTHON_KEYRING_BACKEND": backend, "XDG_DATA_HOME": str(tmp_path / "data")}


def _keyring_token(env: dict[str, str]) -> str | None:
    read = subprocess.run([sys.executable, "-c", "import keyring; print(keyring.get_password('iriis-device', 'device'))"],
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    return None if read.stdout.strip() == "None" else read.stdout.strip()


async def _code(server_url: str, label: str) -> str:
    async with httpx.AsyncClient(base_url=server_url, timeout=60) as client:
        made = await client.post("/v1/me/devices/codes", headers=OWNER, json={
            "kind": "linux", "label": label, "skills": ["files"], "pin": OWNER_PIN})
    assert made.status_code == 201
    return made.json()["code"]


async def _devices(server_url: str) -> dict[str, dict]:
    async with httpx.AsyncClient(base_url=server_url, timeout=60) as client:
        return {d["label"]: d for d in (await client.get("/v1/me/devices", headers=OWNER)).json()["data"]}


async def test_without_a_keyring_pairing_stops_before_spending_the_code(device_server, tmp_path) -> None:
    code = await _code(device_server.url, "No keyring")
    env = _keyring_env(tmp_path, "keyring.backends.fail.Keyring")
    refused = subprocess.run([str(DEVICE), "--spool", str(tmp_path / "spool"), "pair", code,
                              "--server", device_server.url], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "no OS keyring" in refused.stderr and "--token-file" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert "No keyring" not in await _devices(device_server.url)

    # The code is still good: the advice given works.
    token_file = tmp_path / "token.json"
    base = [str(DEVICE), "--token-file", str(token_file), "--spool", str(tmp_path / "spool")]
    paired = subprocess.run([*base, "pair", code, "--server", device_server.url], env=env,
                            capture_output=True, text=True, timeout=60)
    assert paired.returncode == 0, paired.stderr
    assert "No keyring" in await _devices(device_server.url)
    assert subprocess.run([*base, "uninstall"], env=env, capture_output=True, timeout=60).returncode == 0
    assert "No keyring" not in await _devices(device_server.url)


async def test_the_token_lives_in_the_keyring_by_default(device_server, tmp_path) -> None:
    env = _keyring_env(tmp_path, "keyrings.alt.file.PlaintextKeyring")
    base = [str(DEVICE), "--spool", str(tmp_path / "spool")]
    code = await _code(device_server.url, "Keyring box")
    paired = subprocess.run([*base, "pair", code, "--server", device_server.url], env=env,
                            capture_output=True, text=True, timeout=60)
    assert paired.returncode == 0, paired.stderr
    kept = _keyring_token(env)
    assert kept is not None and '"token": "irad_' in kept
    assert not list(tmp_path.glob("*.json"))

    root = tmp_path / "root"
    root.mkdir()
    agent = subprocess.Popen([*base, "run", "--root", str(root), "--no-shell"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        async def online() -> None:
            while not (await _devices(device_server.url)).get("Keyring box", {}).get("online"):
                await asyncio.sleep(0.3)
        await asyncio.wait_for(online(), 60)
    finally:
        agent.terminate()
        agent.wait(30)

    bye = subprocess.run([*base, "uninstall"], env=env, capture_output=True, text=True, timeout=60)
    assert bye.returncode == 0, bye.stderr
    assert _keyring_token(env) is None
    assert "Keyring box" not in await _devices(device_server.url)
