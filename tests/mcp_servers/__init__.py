"""Small MCP servers the catalogue tests start as real processes."""
