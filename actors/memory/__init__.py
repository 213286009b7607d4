"""Memory as pure logic: item models, tokenisation, scoring, dedup, secret refusal, per-prompt
selection, prompt rendering and reflection planning. Storage and actors live elsewhere and call
into these modules; nothing here does I/O."""
