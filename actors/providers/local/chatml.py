"""ChatML, rendered here so a step can hand the model the first characters of its reply.

Qwen2.5 and SmolLM2 both wrap each message as `<|im_start|>role\\ncontent<|im_end|>\\n` and
open the reply with `<|im_start|>assistant\\n`. When the prompt starts with a system message,
their chat templates render exactly this text, and llama-cpp-python's chat endpoint hands the
rendered text to the same completion code as `/completions` does, so a prompt rendered here
and one rendered by the server are the same tokens (tests/test_local_model_llama.py checks
it against the template inside the GGUF). No Ray.
"""

from __future__ import annotations

from typing import Any

START, END = "<|im_start|>", "<|im_end|>"
ROLES = ("system", "user", "assistant")
# What follows a reply in every next prompt: its end and the opening of the person's message.
NEXT_USER = f"{END}\n{START}user\n"


def renderable(messages: list[dict[str, Any]]) -> bool:
    """Plain text in the three roles, system first: what both templates render alike."""
    return bool(messages) and messages[0].get("role") == "system" and all(
        m.get("role") in ROLES and isinstance(m.get("content"), str) and START not in m["content"]
        and END not in m["content"] for m in messages)


def render(messages: list[dict[str, Any]], reply_start: str = "") -> str:
    """The prompt text, the assistant's reply opened and begun with `reply_start`."""
    body = "".join(f"{START}{m['role']}\n{m['content']}{END}\n" for m in messages)
    return f"{body}{START}assistant\n{reply_start}"
