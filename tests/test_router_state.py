import pytest

from actors.providers.router_state import (
    DEFAULT_RATE_REST,
    SERVER_ERROR_REST,
    SHORT_WAIT,
    TIMEOUT_EMA,
    TIMEOUT_REST,
    RouteEntry,
    RouterState,
)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def entry(provider: str, model: str = "m", **kwargs: object) -> RouteEntry:
    return RouteEntry(provider=provider, model=model, base_url=f"https://{provider}.example/v1", **kwargs)


def keys(entries: list[RouteEntry]) -> list[str]:
    return [e.key for e in entries]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def state(clock: FakeClock) -> RouterState:
    return RouterState([entry("a"), entry("b"), entry("c")], clock=clock)


def test_key_is_provider_slash_model() -> None:
    assert entry("groq", "llama-3").key == "groq/llama-3"


def test_unmeasured_entries_keep_configured_order(state: RouterState) -> None:
    assert keys(state.candidates()) == ["a/m", "b/m", "c/m"]


def test_measured_entry_goes_before_unmeasured(state: RouterState) -> None:
    state.record_success("c/m", 2.0)
    assert keys(state.candidates()) == ["c/m", "a/m", "b/m"]


def test_measured_entries_sorted_by_ema(state: RouterState) -> None:
    state.record_success("a/m", 3.0)
    state.record_success("b/m", 1.0)
    state.record_success("c/m", 2.0)
    assert keys(state.candidates()) == ["b/m", "c/m", "a/m"]


def test_ema_first_sample_then_weighted(state: RouterState) -> None:
    state.record_success("a/m", 2.0)
    assert state.entries[0].ema == pytest.approx(2.0)
    state.record_success("a/m", 7.0)
    assert state.entries[0].ema == pytest.approx(0.6 * 2.0 + 0.4 * 7.0)


def test_timeout_sets_ema_and_rests(state: RouterState, clock: FakeClock) -> None:
    state.record_success("a/m", 1.0)
    state.record_timeout("a/m")
    a = state.entries[0]
    assert a.ema == TIMEOUT_EMA
    assert "a/m" not in keys(state.candidates())
    clock.advance(TIMEOUT_REST - 0.1)
    assert "a/m" not in keys(state.candidates())
    clock.advance(0.1)
    assert "a/m" in keys(state.candidates())
    # Back, but behind a provider measured faster than the timeout penalty.
    state.record_success("b/m", 5.0)
    assert keys(state.candidates())[:2] == ["b/m", "a/m"]


def test_server_error_rests_briefly(state: RouterState, clock: FakeClock) -> None:
    state.record_server_error("b/m")
    assert keys(state.candidates()) == ["a/m", "c/m"]
    clock.advance(SERVER_ERROR_REST)
    assert keys(state.candidates()) == ["a/m", "b/m", "c/m"]


def test_server_error_does_not_shorten_longer_rest(state: RouterState, clock: FakeClock) -> None:
    state.record_timeout("a/m")
    state.record_server_error("a/m")
    clock.advance(SERVER_ERROR_REST + 1)
    assert "a/m" not in keys(state.candidates())


def test_short_rate_limit_returns_wait_without_rest(state: RouterState) -> None:
    assert state.record_rate_limit("a/m", SHORT_WAIT) == SHORT_WAIT
    assert state.record_rate_limit("a/m", 1.5) == 1.5
    assert "a/m" in keys(state.candidates())


def test_long_rate_limit_rests_for_hint(state: RouterState, clock: FakeClock) -> None:
    assert state.record_rate_limit("a/m", 10.0) == 0.0
    assert "a/m" not in keys(state.candidates())
    clock.advance(9.9)
    assert "a/m" not in keys(state.candidates())
    clock.advance(0.1)
    assert "a/m" in keys(state.candidates())


def test_rate_limit_without_hint_rests_default(state: RouterState, clock: FakeClock) -> None:
    assert state.record_rate_limit("a/m", None) == 0.0
    clock.advance(DEFAULT_RATE_REST - 1)
    assert "a/m" not in keys(state.candidates())
    clock.advance(1)
    assert "a/m" in keys(state.candidates())


def test_not_found_retires_for_good(state: RouterState, clock: FakeClock) -> None:
    state.record_not_found("b/m")
    clock.advance(1e9)
    assert keys(state.candidates()) == ["a/m", "c/m"]
    assert state.entries[1].retired


def test_image_limits_filter_and_are_learned(clock: FakeClock) -> None:
    state = RouterState([entry("a", max_images=1), entry("b")], clock=clock)
    assert keys(state.candidates(images=0)) == ["a/m", "b/m"]
    assert keys(state.candidates(images=2)) == ["b/m"]
    state.record_too_many_images("b/m", sent=5)
    assert state.entries[1].max_images == 4
    assert keys(state.candidates(images=5)) == []
    assert keys(state.candidates(images=4)) == ["b/m"]
    state.record_too_many_images("a/m", sent=0)
    assert state.entries[0].max_images == 0


def test_add_entries_appends_and_skips_duplicates(state: RouterState) -> None:
    state.add_entries([entry("b"), entry("d"), entry("d")])
    assert keys(state.candidates()) == ["a/m", "b/m", "c/m", "d/m"]


def test_constructor_dedupes_and_copies(clock: FakeClock) -> None:
    shared = [entry("a"), entry("a")]
    state = RouterState(shared, clock=clock)
    state.record_timeout("a/m")
    assert len(state.entries) == 1
    # Runtime state must not leak into a config list shared by other routers.
    assert shared[0].ema is None and shared[0].rest_until == 0.0


def test_unknown_key_raises(state: RouterState) -> None:
    with pytest.raises(KeyError):
        state.record_success("nope/x", 1.0)


def test_seconds_until_ready(state: RouterState, clock: FakeClock) -> None:
    assert state.seconds_until_ready() == 0.0
    state.record_timeout("a/m")
    state.record_server_error("b/m")
    state.record_rate_limit("c/m", 40.0)
    assert state.seconds_until_ready() == pytest.approx(SERVER_ERROR_REST)
    clock.advance(5)
    assert state.seconds_until_ready() == pytest.approx(SERVER_ERROR_REST - 5)
    # Only entries that accept the images count.
    state.record_too_many_images("b/m", sent=1)
    assert state.seconds_until_ready(images=1) == pytest.approx(40.0 - 5)


def test_seconds_until_ready_none_when_all_retired(state: RouterState) -> None:
    for key in ("a/m", "b/m", "c/m"):
        state.record_not_found(key)
    assert state.seconds_until_ready() is None
    assert state.candidates() == []


def test_seconds_until_ready_none_when_no_entry_takes_images(state: RouterState) -> None:
    assert state.seconds_until_ready(images=9) is None


def test_snapshot(state: RouterState, clock: FakeClock) -> None:
    state.record_success("a/m", 1.25)
    state.record_server_error("b/m")
    state.record_not_found("c/m")
    clock.advance(5)
    snap = {row["key"]: row for row in state.snapshot()}
    assert snap["a/m"] == {"key": "a/m", "ema": 1.25, "resting_s": 0.0, "retired": False, "max_images": 8}
    assert snap["b/m"]["resting_s"] == pytest.approx(SERVER_ERROR_REST - 5)
    assert snap["c/m"]["retired"] is True


def test_a_copy_on_another_clock_keeps_the_order_and_the_rests(state: RouterState, clock: FakeClock) -> None:
    """A caller's mirror may run on another node, whose monotonic clock reads something else."""
    state.record_success("c/m", 0.2)
    state.record_server_error("a/m")
    state.record_not_found("b/m")
    elsewhere = FakeClock(now=5.0)
    copy = RouterState.from_portable(state.portable(), clock=elsewhere)
    assert keys(copy.candidates()) == keys(state.candidates()) == ["c/m"]
    resting = {e["key"]: e["resting_s"] for e in copy.snapshot()}
    assert resting["a/m"] == pytest.approx(SERVER_ERROR_REST)
    elsewhere.advance(SERVER_ERROR_REST)
    assert keys(copy.candidates()) == ["c/m", "a/m"]
    # The copy is its own: what it is told does not change the original.
    copy.record_timeout("c/m")
    assert keys(state.candidates()) == ["c/m"]
