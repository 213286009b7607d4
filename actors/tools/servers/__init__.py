"""The built-in MCP servers, each run over stdio as `python -m actors.tools.servers.<name>`."""
