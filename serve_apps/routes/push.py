"""Web Push: the server's VAPID public key, the browsers' subscriptions, which channels are
on, and a test notification (spec section 11).

A subscription is the browser's PushSubscription JSON; one the push service answers 404 or 410
to is deleted by the notifier. Notifications go to the owner's subscriptions.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from fastapi import APIRouter
from ray.actor import ActorHandle

from actors.common.names import SCHEDULER, find_actor_async
from actors.devices.people import OWNER_ID
from actors.notify import webpush
from actors.store.models import OutboxItem
from serve_apps.http.deps import Owner, StoreDep
from serve_apps.http.errors import ApiError
from serve_apps.http.ids import RowId
from serve_apps.http.models import Deleted, page
from serve_apps.http.notify_models import (
    ChannelsPublic,
    PushKey,
    PushSubscriptionBody,
    PushSubscriptionList,
    PushSubscriptionPublic,
    Queued,
    route_config,
)

router = APIRouter()


async def wake_notify() -> None:
    handle: ActorHandle = await find_actor_async(SCHEDULER)
    if handle is not None:
        # Not awaited: the row is durable already; the next pass would find it anyway.
        handle.wake_notify.remote()


@router.get("/push/key")
async def push_key(_owner: Owner, store: StoreDep) -> PushKey:
    return PushKey(key=(await webpush.vapid_keys(store)).public)


@router.post("/push/subscriptions", status_code=201)
async def push_subscribe(body: PushSubscriptionBody, _owner: Owner, store: StoreDep) -> PushSubscriptionPublic:
    problem = webpush.check_keys(body.keys)
    if problem:
        raise ApiError(422, "invalid_request", problem)
    sub = await webpush.add_subscription(store, body.endpoint, body.keys, person_id=OWNER_ID)
    return PushSubscriptionPublic(**sub.model_dump())


@router.get("/push/subscriptions")
async def push_subscriptions(_owner: Owner, store: StoreDep) -> PushSubscriptionList:
    return page(PushSubscriptionList, [PushSubscriptionPublic(**s.model_dump())
                                       for s in await webpush.list_subscriptions(store)])


@router.delete("/push/subscriptions/{sub_id}")
async def push_unsubscribe(sub_id: RowId, _owner: Owner, store: StoreDep) -> Deleted:
    if not await webpush.delete_subscription(store, sub_id):
        raise ApiError(404, "not_found", f"No push subscription {sub_id}.")
    return Deleted(id=sub_id, deleted=True)


@router.post("/push/test", status_code=202)
async def push_test(_owner: Owner, store: StoreDep) -> Queued:
    """A test notification on every configured channel (see GET /v1/outbox for how it went)."""
    item_id = await store.add_outbox(OutboxItem(kind="test", title="Iriis", body="Notifications work."))
    await wake_notify()
    return Queued(id=item_id)


@router.get("/notify/channels")
async def notify_channels(_owner: Owner, store: StoreDep) -> ChannelsPublic:
    config = route_config()
    return ChannelsPublic(push_subscriptions=len(await webpush.list_subscriptions(store)), ntfy=config.ntfy_on,
                          ntfy_topic=config.ntfy_topic, telegram=config.telegram_on,
                          telegram_mode=("webhook" if config.public_url else "polling") if config.telegram_on else None,
                          app_url=config.app_url)
