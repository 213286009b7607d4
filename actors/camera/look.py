"""One look by the vision model, through the provider router (spec section 13), with the local
fallback when nothing answers.

No Ray: the router is the ProviderRouter actor in the server (RemoteRouter) and a LocalRouter in
tests. Failover, EMA, rests, retirement, image limits and the 35-second wait for a person come
from `stream_with_failover`; this module adds the answer's parsing and the fallback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel

from actors.providers.failover import RouterClient, complete_text
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.types import AllProvidersFailed, ProviderError
from vision.vlm import VlmAnswer, parse_answer

# A provider whose typical first answer comes later than this is not "fast": background looks
# (coach, notice) wait for a fast one rather than hold it up for a person's next question.
FAST_EMA_SECONDS = 6.0
MAX_REPLY_CHARS = 20_000


class LookResult(BaseModel):
    answer: VlmAnswer
    source: Literal["model", "offline"]
    elapsed_ms: float
    text: str = ""


async def look(router: RouterClient | None, providers: dict[str, OpenAICompatProvider],
               messages: list[dict[str, Any]], *, timeout: float, person_waiting: bool,
               fallback: Callable[[], VlmAnswer],
               sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> LookResult:
    """Ask the vision model; any failure to answer becomes the fallback, never an exception."""
    started = time.monotonic()
    if router is not None:
        try:
            text = await complete_text(router, providers, messages, timeout, person_waiting=person_waiting,
                                       max_chars=MAX_REPLY_CHARS, sleep=sleep)
            return LookResult(answer=parse_answer(text), source="model", text=text,
                              elapsed_ms=round((time.monotonic() - started) * 1000, 1))
        except (AllProvidersFailed, ProviderError):
            pass
    return LookResult(answer=fallback(), source="offline", elapsed_ms=round((time.monotonic() - started) * 1000, 1))


async def fast_provider_free(router: RouterClient | None, images: int = 1) -> bool:
    """True when a fast provider is ready now (background looks run only then)."""
    if router is None:
        return False
    candidates = await router.candidates(images)
    return bool(candidates) and (candidates[0].ema is None or candidates[0].ema <= FAST_EMA_SECONDS)
