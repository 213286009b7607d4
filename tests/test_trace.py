"""Timing marks (IRIIS_TRACE): off by default, one JSON line a mark when on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.common import trace


def test_marks_are_written_only_when_a_trace_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trace.jsonl"
    monkeypatch.setattr(trace, "PATH", None)
    trace.mark("gateway.in", "s1")
    assert not path.exists()
    monkeypatch.setattr(trace, "PATH", str(path))
    trace.mark("gateway.in", "s1")
    trace.mark("provider.first")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(m["stage"], m["key"]) for m in lines] == [("gateway.in", "s1"), ("provider.first", None)]
    assert lines[0]["t"] <= lines[1]["t"]
