"""Configuration: names, defaults, whitespace stripping, one-line errors that name the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.settings import SettingsError, load_settings

IRIIS = Path(sys.executable).parent / "iriis"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("IRIIS_", "OPENAI_")) or name in ("DATABASE_URL", "RAY_ADDRESS"):
            monkeypatch.delenv(name, raising=False)


def test_defaults_need_no_configuration() -> None:
    s = load_settings()
    assert (s.iriis_host, s.iriis_port) == ("127.0.0.1", 8000)
    assert s.iriis_home == Path("~/.iriis").expanduser()
    assert s.database_url is None and s.ray_address is None
    assert s.iriis_owner_keys == [] and s.chat_providers({}) == []


def test_keys_are_whitespace_stripped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "  sk-abc123\n")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/\n")
    monkeypatch.setenv("IRIIS_CHAT_MODEL", "m1\n")
    monkeypatch.setenv("IRIIS_OWNER_KEYS", " one ,two\n,, three ")
    monkeypatch.setenv("GROQ_KEY", "gsk-xyz\n")
    monkeypatch.setenv("IRIIS_PROVIDERS", '[{"name": "groq", "base_url": "http://127.0.0.1:9/v1",'
                                          ' "api_key_env": "GROQ_KEY", "models": ["a", "b"],'
                                          ' "kinds": ["chat", "vision"], "max_images": 3}]')
    s = load_settings()
    assert s.iriis_owner_keys == ["one", "two", "three"]
    providers = s.chat_providers(dict(os.environ))
    assert [(p.name, p.api_key, p.models) for p in providers] == [
        ("openai", "sk-abc123", ["m1"]), ("groq", "gsk-xyz", ["a", "b"])]
    assert providers[0].base_url == "http://127.0.0.1:9/v1"


def test_vision_only_provider_is_not_a_chat_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IRIIS_PROVIDERS", '[{"name": "v", "base_url": "http://x/v1", "models": ["m"],'
                                          ' "kinds": ["vision"]}]')
    assert load_settings().chat_providers({}) == []


@pytest.mark.parametrize("name,value", [
    ("IRIIS_PORT", "eighty"),
    ("IRIIS_PORT", "70000"),
    ("IRIIS_PROVIDERS", "[{not json"),
    ("IRIIS_PROVIDERS", '[{"name": "x"}]'),
    ("DATABASE_URL", "mysql://root@localhost/db"),
    ("IRIIS_FLUSH_SECONDS", "-1"),
])
def test_malformed_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert message.startswith(name + ":") and "\n" not in message


def test_serve_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "IRIIS_HOME": str(tmp_path), "IRIIS_PORT": "not-a-port"}
    proc = subprocess.run([str(IRIIS), "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "IRIIS_PORT" in lines[0]


def test_cli_help_lists_serve() -> None:
    proc = subprocess.run([str(IRIIS), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "serve" in proc.stdout


def test_serve_refuses_a_port_already_in_use(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "IRIIS_HOME": str(tmp_path), "IRIIS_PORT": str(port)}
        proc = subprocess.run([str(IRIIS), "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"127.0.0.1:{port} is already in use" in proc.stderr and "IRIIS_PORT" in proc.stderr


def test_serve_refuses_a_bad_mcp_yaml_with_the_line_and_reason(tmp_path: Path) -> None:
    bad = tmp_path / "mcp.yaml"
    bad.write_text("servers:\n  notes:\n    transport: stdio\n    tier: sometimes\n")
    env = {**os.environ, "IRIIS_HOME": str(tmp_path), "IRIIS_MCP_CONFIG": str(bad)}
    proc = subprocess.run([str(IRIIS), "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "servers.notes.tier" in proc.stderr and "sometimes" in proc.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("servers:\n  a: [unclosed\n")
    proc = subprocess.run([str(IRIIS), "serve"], env={**env, "IRIIS_MCP_CONFIG": str(broken)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "line" in proc.stderr and "not valid YAML" in proc.stderr
