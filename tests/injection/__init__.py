"""Prompt-injection suite: a gullible model against the loop's deterministic checks."""
