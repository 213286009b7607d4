"""Talking to MCP tool servers: the connection (`client`), what a call's outcome means
(`outcomes`), how a configured server is resolved and its secrets scrubbed (`resolve`), its
stderr (`streams`) and the supervisor that restarts it (`supervisor`)."""
