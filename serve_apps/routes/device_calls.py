"""Small helpers the device routes share: the limits in force and reaching a live DeviceActor."""

from functools import lru_cache
from typing import Any

from ray.exceptions import RayActorError

from actors.devices.actor import live_device
from actors.devices.protocol import CLOSE_REVOKED
from actors.devices.settings import DeviceLimits, DeviceSettings


@lru_cache(maxsize=1)
def device_settings() -> DeviceSettings:
    return DeviceSettings()


def device_limits() -> DeviceLimits:
    return device_settings().limits()


async def close_device(device_id: int, revoked: bool = True, code: int = CLOSE_REVOKED,
                       reason: str = "this device was revoked") -> bool:
    """Close a device's live connection, if it has one."""
    actor = await live_device(device_id)
    if actor is None:
        return False
    try:
        await actor.close.remote(code, reason)
    except RayActorError:
        return False
    return True


async def regrant(device_id: int) -> None:
    actor = await live_device(device_id)
    if actor is not None:
        try:
            await actor.regrant.remote()
        except RayActorError:
            pass


async def device_state(device_id: int) -> dict[str, Any] | None:
    actor = await live_device(device_id)
    if actor is None:
        return None
    try:
        return await actor.state.remote()
    except RayActorError:
        return None
