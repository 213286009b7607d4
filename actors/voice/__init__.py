"""Voice: talk to the agent over one WebSocket (GET /v1/voice/ws).

Ray-free logic (the wire protocol and audio framing, which audio frame belongs to which
sentence and what was heard, the sentence-to-audio queue, the utterance state machine, the
offline engines and the speech router) lives here; `speech_actor` is the one Ray shell, the
named actor that loads the speech models once per cluster. Layering: this package imports
actors.common, actors.providers and actors.session.events; only serve_apps imports it.
"""
