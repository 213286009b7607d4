"""Devices in the store, on SQLite and PostgreSQL: pairing spends a code's uses, tokens are
checked until revoked, events keep 200 per person, people and PINs."""

from __future__ import annotations

import pytest

from actors.devices import people
from actors.devices import repository as repo
from actors.devices.settings import DeviceLimits
from actors.devices.tokens import sha256


async def test_a_code_pairs_as_many_devices_as_its_uses(store) -> None:
    code, _ = await repo.make_code(store, people.OWNER_ID, "android", "Phone", ["calls"], 600, uses=2, actor="operator")
    first = await repo.pair(store, code, "android")
    second = await repo.pair(store, code.replace("-", "").lower(), "android")
    assert first.device and second.device and first.device.id != second.device.id
    assert (await repo.pair(store, code, "android")).error == "gone"
    assert (await repo.pair(store, "ZZZZ-ZZZZ", "android")).error == "gone"
    assert [c["action"] for c in await people.list_changes(store)] == ["pairing_code_made"]
    device = await repo.device_by_token(store, first.token)
    assert device is not None and device.skills == ["calls"]
    assert await repo.revoke(store, device.id, "test")
    assert await repo.device_by_token(store, first.token) is None


async def test_an_expired_code_is_gone(store) -> None:
    code, _ = await repo.make_code(store, people.OWNER_ID, "mac", "Mac", [], -1)
    assert (await repo.pair(store, code, "mac")).error == "gone"


async def test_events_keep_the_newest_200_per_person(store) -> None:
    limits = DeviceLimits()
    for i in range(203):
        await repo.add_event(store, people.OWNER_ID, None, {"event": "task_done", "title": f"t{i}", "text": ""}, limits)
    kept = await repo.list_events(store, people.OWNER_ID)
    assert len(kept) == 200 and kept[0]["title"] == "t3" and kept[-1]["title"] == "t202"


async def test_people_sign_in_and_removal_revokes_their_devices(store) -> None:
    person = await people.add_person(store, "Staff@Example.com", "staff", "long-password")
    with pytest.raises(ValueError):
        await people.add_person(store, "staff@example.com", "member", "long-password")
    assert await people.sign_in(store, "staff@example.com", "wrong-password") is None
    _, token = await people.sign_in(store, "staff@example.com", "long-password")
    assert (await people.session_person(store, token)).id == person.id
    assert await people.check_pin(store, person.id, "1234") == "pin_not_set"
    await people.set_pin(store, person.id, "1234")
    assert await people.check_pin(store, person.id, "1234") is None
    assert await people.check_pin(store, person.id, "4321") == "wrong_pin"
    code, _ = await repo.make_code(store, person.id, "ios", "iPhone", [], 600)
    paired = await repo.pair(store, code, "ios")
    assert await people.remove_person(store, person.id, "test")
    assert await repo.device_by_token(store, paired.token) is None
    assert sha256(paired.token) != paired.token


async def test_each_person_lists_only_their_own_conversations(store) -> None:
    from actors.store.models import HEALTH_CHANNEL, ConversationRecord

    member = await people.add_person(store, "list@example.com", "member", "long-password")
    convs = [ConversationRecord(id="owner-a", updated=1.0), ConversationRecord(id="owner-b", updated=3.0),
             ConversationRecord(id="member-a", updated=2.0),
             ConversationRecord(id="probe", channel=HEALTH_CHANNEL, updated=4.0)]
    await store.write_batch(convs, [])
    await repo.claim_conversation(store, "owner-b", people.OWNER_ID, None)  # claimed or not, the owner's
    await repo.claim_conversation(store, "member-a", member.id, None)
    assert [c.id for c in await repo.person_conversations(store, people.OWNER_ID)] == ["owner-b", "owner-a"]
    assert [c.id for c in await repo.person_conversations(store, member.id)] == ["member-a"]
    assert await repo.person_conversations(store, 999) == []
