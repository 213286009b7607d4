"""Personal devices: pairing, device tokens, the device WebSocket protocol, grants and events."""
