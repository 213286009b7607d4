"""Iriis desktop device agent: pairs with a server, keeps its token in the OS keyring, and
offers this computer's tools (files, clipboard, a shell at tier 3) over the device WebSocket."""
