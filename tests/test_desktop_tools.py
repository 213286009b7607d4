"""The desktop device's own tools, run directly (no server, no Ray): each checks what the model
wrote before touching the computer, and none reaches outside the folder it was given."""

from __future__ import annotations

from pathlib import Path

import pytest

import clients.desktop.tools as desktop
from clients.desktop.tools import MAX_ARGUMENT, MAX_WRITE, ToolRefused, check_arguments, desktop_tools


def tools(root: Path, **flags: bool) -> dict[str, desktop.DesktopTool]:
    return {t.name: t for t in desktop_tools(root, **flags)}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "docs").mkdir(parents=True)
    (tmp_path / "root" / "docs" / "a.txt").write_text("alpha")
    (tmp_path / "secret.txt").write_text("outside")
    return tmp_path / "root"


def test_the_offer_carries_each_tools_skill_and_tier(root: Path) -> None:
    offered = {t.name: t.offer() for t in desktop_tools(root)}
    assert {name: (o["skill"], o["tier"]) for name, o in offered.items() if name != "clipboard_read"} == {
        "file_read": ("files", 0), "file_find": ("files", 0), "file_write": ("files", 2), "shell_run": ("shell", 3)}
    assert set(tools(root, allow_shell=False, allow_write=False)) <= {"file_read", "file_find", "clipboard_read"}


def test_arguments_are_checked_against_the_schema() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"},
                                               "long": {"type": "string", "maxLength": 10_000}},
              "required": ["path"]}
    assert check_arguments(schema, {"path": "x"}) == {"path": "x"}
    for bad, why in [([], "must be an object"), ({}, "missing argument 'path'"),
                     ({"path": "x", "mode": "rw"}, "unknown argument 'mode'"),
                     ({"path": 3}, "path must be a string"), ({"path": "x", "n": True}, "n must be an integer"),
                     ({"path": "x" * (MAX_ARGUMENT + 1)}, "path is too long"),
                     ({"path": "x", "long": "y" * 10_001}, "long is too long")]:
        with pytest.raises(ToolRefused, match=why):
            check_arguments(schema, bad)
    # At the limits: accepted.
    check_arguments(schema, {"path": "x" * MAX_ARGUMENT, "long": "y" * 10_000})


async def test_reading_and_finding_stay_inside_the_folder(root: Path) -> None:
    t = tools(root)
    read = await t["file_read"].run({"path": "docs/a.txt"})
    assert read["text"] == "alpha" and read["summary"] == "Read a.txt (5 bytes)."
    for path in ["../secret.txt", str(root.parent / "secret.txt"), "docs/../../secret.txt"]:
        with pytest.raises(ToolRefused, match="only files under"):
            await t["file_read"].run({"path": path})
    with pytest.raises(ToolRefused, match="no file"):
        await t["file_read"].run({"path": "docs/missing.txt"})
    assert (await t["file_find"].run({"pattern": "*.txt"}))["files"] == ["docs/a.txt"]
    with pytest.raises(ToolRefused, match="inside the folder"):
        await t["file_find"].run({"pattern": "../*.txt"})


async def test_writing_creates_or_replaces_one_file_inside_the_folder(root: Path) -> None:
    write = tools(root)["file_write"].run
    made = await write({"path": "notes/new.txt", "text": "héllo"})
    assert made["summary"] == "Wrote notes/new.txt (6 bytes)."
    assert (root / "notes" / "new.txt").read_text() == "héllo"
    replaced = await write({"path": "docs/a.txt", "text": "beta"})
    assert replaced["summary"] == "Replaced docs/a.txt (4 bytes)." and (root / "docs" / "a.txt").read_text() == "beta"
    assert not list(root.rglob("*.iriis-partial"))

    await write({"path": "big.txt", "text": "z" * MAX_WRITE})
    assert (root / "big.txt").stat().st_size == MAX_WRITE
    with pytest.raises(ToolRefused, match=f"at most {MAX_WRITE} bytes"):
        await write({"path": "big.txt", "text": "é" * (MAX_WRITE // 2 + 1)})
    assert (root / "big.txt").stat().st_size == MAX_WRITE  # the refused write changed nothing
    with pytest.raises(ToolRefused, match="only files under"):
        await write({"path": "../secret.txt", "text": "overwritten"})
    assert (root.parent / "secret.txt").read_text() == "outside"
    with pytest.raises(ToolRefused, match="is a folder"):
        await write({"path": "docs", "text": "x"})


async def test_the_shell_needs_a_purpose_and_is_stopped_when_it_runs_long(root: Path, monkeypatch) -> None:
    shell = tools(root)["shell_run"].run
    with pytest.raises(ToolRefused, match="purpose"):
        await shell({"command": "echo hi", "purpose": "  "})
    ran = await shell({"command": "pwd; exit 3", "purpose": "Show the folder."})
    assert ran["summary"] == "Exit code 3." and ran["text"].strip() == str(root)
    monkeypatch.setattr(desktop, "SHELL_SECONDS", 0.5)
    with pytest.raises(ToolRefused, match="ran past 0.5 s"):
        await shell({"command": "sleep 5", "purpose": "Wait."})
