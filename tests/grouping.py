"""How the suite is cut into groups, ordered, and shared between two workers.

Every test belongs to a group: the tests that share a session-wide server form one group per
server, those on the in-process Ray one group, and every other module is a group of its own. A
group runs as one block on one worker, heaviest first, and what it holds open (a server, Ray) is
closed as soon as its last test is done.

Under `pytest -n 2 --dist loadgroup` the controller hands out whole groups with
`GroupScheduling`. pytest-xdist's own loadgroup reads `xdist_group` marks through a node-id rename
that pytest 9 no longer honours; ours learns each test's group from the workers' collection, which
they write to a file the controller names (`IRIIS_TEST_GROUPS`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable

import pytest

SHARED_SERVERS = ("server", "device_server", "ray_session")
# Seconds each heavy group took in a serial run on 2 cores (2026-12-06, the sum of its tests'
# times): the heaviest are handed out first, so the run ends on light groups that even out the
# two workers; a group missing here counts as 0 and keeps its collection order.
GROUP_COST = {
    "server": 400, "device_server": 206, "tests/test_relay_e2e.py": 83, "tests/test_multinode.py": 74,
    "tests/test_local_model_qwen.py": 68, "tests/test_backpressure.py": 65, "ray_session": 85,
    "tests/test_e2e_offline.py": 60, "tests/test_local_model_e2e.py": 44,
    "tests/test_e2e_calls.py": 42, "tests/test_serve_deploy.py": 31, "tests/test_local_model_llama.py": 27,
    "tests/test_notify_channels.py": 16, "tests/test_fault_relay.py": 14, "tests/test_calls_machine.py": 13,
    "tests/test_notify_outbox.py": 12,
}
GROUPS_FILE = "IRIIS_TEST_GROUPS"


def test_group(item: pytest.Item) -> str:
    """The group `item` runs in: a shared server's name, or its own module."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    names -= set(callspec.params if callspec else ())  # a parameter that happens to be called `server`
    return next((f for f in SHARED_SERVERS if f in names), item.nodeid.split("::", 1)[0])


def name_groups_file(config: pytest.Config) -> None:
    """The controller (or a plain run) names the file its workers write their groups to."""
    if hasattr(config, "workerinput") or os.environ.get(GROUPS_FILE):
        return
    fd, path = tempfile.mkstemp(prefix="iriis-groups-", suffix=".json")
    os.close(fd)
    os.environ[GROUPS_FILE] = path
    config._iriis_groups_file = path  # type: ignore[attr-defined]


def forget_groups_file(config: pytest.Config) -> None:
    path = getattr(config, "_iriis_groups_file", None)
    if path and os.path.exists(path):
        os.unlink(path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    first_seen: dict[str, int] = {}
    for item in items:
        group = groups[item.nodeid] = test_group(item)
        first_seen.setdefault(group, len(first_seen))
        if group in ("server", "device_server"):
            item.add_marker(pytest.mark.e2e)
        elif group == "ray_session":
            item.add_marker(pytest.mark.ray)
    # Each group's tests in one block (the closers below rely on it), heaviest group first; the
    # sort is stable, so a group keeps its own order, except that a test marked `last_in_group`
    # (one that stops its shared server) goes after the rest of its group.
    items.sort(key=lambda item: (-GROUP_COST.get(g := groups[item.nodeid], 0), first_seen[g],
                                 item.get_closest_marker("last_in_group") is not None))
    path = os.environ.get(GROUPS_FILE)
    if path and hasattr(config, "workerinput"):
        # Every worker collects the same tests; each writes the whole map, whole, by a rename.
        tmp = f"{path}.{config.workerinput['workerid']}"  # type: ignore[attr-defined]
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({item.nodeid: groups[item.nodeid] for item in items}, f)
        os.replace(tmp, path)


# What a shared group holds open, closed as soon as the group's last test is done rather than at
# the end of the run: an idle server's Ray keeps a good part of a core busy.
_closers: dict[str, Callable[[], object]] = {}


def close_with_group(group: str, closer: Callable[[], object]) -> None:
    _closers[group] = closer


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    yield
    group = test_group(item)
    if group in _closers and (nextitem is None or test_group(nextitem) != group):
        _closers.pop(group)()


def make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """`--dist loadgroup`: whole groups to each worker, in collection order (heaviest first)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def __init__(self, config: pytest.Config, log=None) -> None:  # type: ignore[no-untyped-def]
            super().__init__(config, log)
            config.option.loadscopereorder = False  # our order, not the groups' sizes
            self._groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                # Read once every worker has finished collecting (xdist schedules only then).
                with open(os.environ[GROUPS_FILE], encoding="utf-8") as f:
                    self._groups = json.load(f)
            return self._groups.get(nodeid) or nodeid.split("::", 1)[0]

    return GroupScheduling(config, log)
