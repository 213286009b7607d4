"""Tool routing: tokenisation, which servers are offered under the cap, and more_tools."""

from __future__ import annotations

import json

import pytest

from actors.tools.routing import (
    CORE_SERVERS, MAX_TOOLS, MORE_TOOLS_NAME, MORE_TOOLS_SPEC, ServerEntry, more_tools, more_tools_spec,
    offered_specs, route, schema_chars, stem, tokenize)
from actors.common.toolspec import ToolSpec
from benchmarks.routing import build_catalogue, build_messages, run


def _tools(server: str, count: int, description: str = "does a thing") -> list[ToolSpec]:
    return [ToolSpec(name=f"{server}_tool_{i}", description=description, source=server,
                     parameters={"type": "object", "properties": {}}) for i in range(count)]


def _server(name: str, keywords: list[str], count: int, description: str = "does a thing") -> ServerEntry:
    return ServerEntry(name=name, keywords=keywords, tools=_tools(name, count, description))


def _core(per_server: int = 2) -> list[ServerEntry]:
    return [_server(name, [name], per_server) for name in CORE_SERVERS]


CORE_TOOLS = 2 * len(CORE_SERVERS)


# ---- tokenisation ------------------------------------------------------------------------------

@pytest.mark.parametrize("forms", [
    ("write", "writing", "writer", "writes", "wrote"),
    ("chart", "charts"),
    ("schedule", "scheduled", "schedules", "scheduling"),
    ("email", "emails"),
    ("order", "orders", "ordered", "ordering"),
    ("city", "cities"),
    ("shop", "shopping", "shops"),
])
def test_word_forms_share_a_stem(forms: tuple[str, ...]) -> None:
    assert len({stem(word) for word in forms}) == 1


def test_tokenize_lowercases_drops_short_and_stop_words() -> None:
    assert tokenize("Please SEND me an e-mail about the Charts, ok?") == ["send", "mail", "chart"]
    assert tokenize("I'd like to do it") == []


def test_different_words_stay_apart() -> None:
    assert stem("note") != stem("news")
    assert stem("book") != stem("hotel")


# ---- route: core, cap, whole servers ----------------------------------------------------------

def test_core_servers_always_offered_first() -> None:
    servers = [_server("weather", ["weather", "rain"], 3), *_core()]
    result = route(servers, "zzz nothing matches here")
    assert result.servers == list(CORE_SERVERS)
    assert result.tools[-1] == MORE_TOOLS_NAME
    assert len(result.tools) == CORE_TOOLS + 1


def test_only_existing_core_servers_are_offered() -> None:
    servers = [_server("memory", ["memory"], 2), _server("weather", ["weather"], 3)]
    assert route(servers, "hello").servers == ["memory"]


def test_core_servers_are_kept_even_past_the_cap() -> None:
    result = route(_core(), "anything", max_tools=3)
    assert result.servers == list(CORE_SERVERS)


def _capped(extra_tools: int, max_tools: int) -> list[str]:
    servers = [*_core(), _server("garden", ["garden", "plants"], extra_tools)]
    return route(servers, "water the garden plants", max_tools=max_tools).servers


def test_cap_exactly_full_fits() -> None:
    # core tools + the server + the meta-tool == the cap
    assert "garden" in _capped(extra_tools=10, max_tools=CORE_TOOLS + 10 + 1)


def test_cap_one_over_is_left_out() -> None:
    assert "garden" not in _capped(extra_tools=11, max_tools=CORE_TOOLS + 10 + 1)


def test_cap_under_fits() -> None:
    assert "garden" in _capped(extra_tools=5, max_tools=CORE_TOOLS + 10 + 1)


def test_without_meta_tool_the_slot_goes_to_servers() -> None:
    servers = [*_core(), _server("garden", ["garden"], 11)]
    result = route(servers, "garden", max_tools=CORE_TOOLS + 11, with_more_tools=False)
    assert "garden" in result.servers and MORE_TOOLS_NAME not in result.tools
    assert len(result.tools) == CORE_TOOLS + 11


def test_servers_are_added_whole_and_a_smaller_one_can_take_the_room() -> None:
    servers = [*_core(),
               _server("github", ["github", "code", "pull request"], 30),
               _server("notes", ["notes", "code"], 4)]
    result = route(servers, "github code for the pull request", max_tools=CORE_TOOLS + 20)
    assert "github" not in result.servers
    assert "notes" in result.servers
    assert not any(t.startswith("github_") for t in result.tools)
    assert sum(t.startswith("notes_") for t in result.tools) == 4
    assert len(result.tools) <= CORE_TOOLS + 20


def test_best_scoring_server_comes_first() -> None:
    servers = [*_core(),
               _server("music", ["music", "song", "playlist"], 5),
               _server("podcasts", ["podcast", "episode", "listen"], 5, "play or listen to music shows")]
    result = route(servers, "play a song from my playlist")
    assert result.servers.index("music") < result.servers.index("podcasts")


def test_keywords_outweigh_descriptions() -> None:
    servers = [*_core(),
               _server("alpha", ["invoice"], 10),
               _server("beta", ["other"], 10, "makes an invoice")]
    result = route(servers, "invoice", max_tools=CORE_TOOLS + 11)
    assert result.servers[-1] == "alpha"
    assert result.scores["alpha"] > result.scores["beta"]


def test_default_cap_is_64_and_never_exceeded_on_the_catalogue() -> None:
    servers = build_catalogue()
    everything = " ".join(k for s in servers for k in s.keywords)
    result = route(servers, everything)
    assert MAX_TOOLS == 64
    assert 50 < len(result.tools) <= MAX_TOOLS


# ---- previous message ---------------------------------------------------------------------------

def test_previous_message_supplies_the_subject() -> None:
    servers = [*_core(), _server("calendar", ["calendar", "meeting", "thursday"], 8)]
    assert "calendar" not in route(servers, "move the second one to 3pm").servers
    assert "calendar" in route(servers, "move the second one to 3pm",
                               previous="what meetings have I got on Thursday?").servers


def test_current_message_outweighs_previous() -> None:
    servers = [*_core(), _server("weather", ["weather", "rain"], 6), _server("flights", ["flight", "airport"], 6)]
    result = route(servers, "find me a flight", previous="will it rain", max_tools=CORE_TOOLS + 7)
    assert "flights" in result.servers and "weather" not in result.servers


# ---- more_tools ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def catalogue() -> list[ServerEntry]:
    return build_catalogue()


@pytest.mark.parametrize(("need", "server"), [
    ("github", "github"),
    ("GitHub", "github"),
    ("calender", "calendar"),
    ("the spreadsheet server", "spreadsheets"),
    ("photo", "photos"),
    ("smart home", "smarthome"),
])
def test_more_tools_by_name(catalogue: list[ServerEntry], need: str, server: str) -> None:
    assert more_tools(catalogue, need, set(CORE_SERVERS)) == server


@pytest.mark.parametrize(("need", "server"), [
    ("book a hotel room in Rome for two nights", "hotels"),
    ("track a parcel", "deliveries"),
    ("turn the heating up", "smarthome"),
    ("convert a docx to pdf", "studio"),
    ("translate a sentence into Japanese", "translate"),
])
def test_more_tools_by_need(catalogue: list[ServerEntry], need: str, server: str) -> None:
    assert more_tools(catalogue, need, set(CORE_SERVERS)) == server


def test_more_tools_skips_offered_servers(catalogue: list[ServerEntry]) -> None:
    first = more_tools(catalogue, "book a hotel room", set(CORE_SERVERS))
    assert first == "hotels"
    second = more_tools(catalogue, "book a hotel room", {*CORE_SERVERS, "hotels"})
    assert second not in (None, "hotels")
    assert more_tools(catalogue, "github", {*CORE_SERVERS, "github"}) != "github"


def test_more_tools_none_when_nothing_matches(catalogue: list[ServerEntry]) -> None:
    assert more_tools(catalogue, "xyzzy plugh", set(CORE_SERVERS)) is None
    assert more_tools(catalogue, "", set(CORE_SERVERS)) is None


def test_more_tools_spec() -> None:
    assert MORE_TOOLS_SPEC.name == MORE_TOOLS_NAME
    assert MORE_TOOLS_SPEC.tier == 0 and MORE_TOOLS_SPEC.untrusted_output is False
    assert MORE_TOOLS_SPEC.parameters["required"] == ["need"]
    assert MORE_TOOLS_SPEC.parameters["properties"]["need"]["type"] == "string"
    listed = more_tools_spec(["weather", "calendar"])
    assert "calendar, weather" in listed.description and listed.name == MORE_TOOLS_NAME


# ---- sizes and determinism ----------------------------------------------------------------------

def test_schema_chars_is_the_json_size() -> None:
    tools = _tools("x", 3)
    expected = len(json.dumps([t.schema_for_model() for t in tools], separators=(",", ":")))
    assert schema_chars(tools) == expected
    assert schema_chars([]) == 2


def test_offered_specs_match_route(catalogue: list[ServerEntry]) -> None:
    result = route(catalogue, "what's the weather in Oslo tomorrow?")
    specs = offered_specs(catalogue, result)
    assert [s.name for s in specs] == result.tools
    assert specs[-1] is MORE_TOOLS_SPEC


def test_ties_break_by_name_and_results_repeat() -> None:
    servers = [*_core(), _server("zeta", ["garden"], 10), _server("alpha", ["garden"], 10)]
    result = route(servers, "garden", max_tools=CORE_TOOLS + 11)
    assert result.servers[-1] == "alpha"
    assert route(list(reversed(servers)), "garden", max_tools=CORE_TOOLS + 11) == result


def test_benchmark_generation_is_deterministic() -> None:
    assert build_messages() == build_messages()
    assert [s.model_dump() for s in build_catalogue()] == [s.model_dump() for s in build_catalogue()]


# ---- the benchmark ------------------------------------------------------------------------------

def test_benchmark_catalogue_is_realistic_in_size(catalogue: list[ServerEntry]) -> None:
    assert len(catalogue) >= 30
    assert sum(len(s.tools) for s in catalogue) >= 300
    assert len(build_messages()) >= 200
    for server in catalogue:
        # Made-up servers get what someone would plausibly write; the shipped ones (their
        # keywords read from mcp.yaml) name weekdays too, since a day is how people ask.
        assert 8 <= len(server.keywords) <= (30 if server.name in ("mail", "calendar") else 20), server.name
        assert all(t.source == server.name for t in server.tools)
    names = [t.name for s in catalogue for t in s.tools]
    assert len(names) == len(set(names))
    labels = {label for label, _, _ in build_messages()}
    assert labels <= {s.name for s in catalogue}


def test_benchmark_hit_rate() -> None:
    report = run()
    assert report["hit_rate"] >= 0.95, report["_misses"]
    assert report["max_tools_offered"] <= MAX_TOOLS
    assert report["mean_schema_chars"] < report["baseline_all_tools_schema_chars"] / 3
