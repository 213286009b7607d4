"""The typed replies and the error that cross the RelayActor's boundary, no Ray: each dumps to
the contract's JSON, and a refusal survives the trip as the same code, message and retry-after."""

from __future__ import annotations

import json

from actors.common.errors import ErrorInfo, IriisError
from actors.relay.core import SessionCore
from actors.relay.envelope import stamp, system_message
from actors.relay.errors import RelayError, error_body
from actors.relay.lifecycle import SessionState
from actors.relay.limits import RelayLimits
from actors.relay.messages import Batch, Envelope, FileList, FileRecord, RelayFault, SessionCreated
from serve_apps.http.relay_app import error_response

T0 = 1_700_000_000.0


def test_a_refusal_crosses_as_a_fault_and_comes_back_the_same() -> None:
    err = RelayError("rate_limited", "slow down", retry_after=7)
    fault = err.fault()
    assert fault == RelayFault(error=ErrorInfo(code="rate_limited", message="slow down"), retry_after=7)
    again = RelayError.from_fault(RelayFault.model_validate(fault.model_dump()))
    assert (again.code, again.message, again.retry_after, again.status) == ("rate_limited", "slow down", 7, 429)
    assert isinstance(again, IriisError) and again.info() == fault.error


def test_the_http_error_body_and_headers_are_the_contracts() -> None:
    response = error_response(RelayError("rate_limited", "slow down", retry_after=7))
    assert response.status_code == 429 and response.headers["retry-after"] == "7"
    assert json.loads(response.body) == {"error": {"code": "rate_limited", "message": "slow down"}}
    assert error_body(ErrorInfo(code="gone", message="m")) == {"error": {"code": "gone", "message": "m"}}
    assert "retry-after" not in error_response(RelayError("not_found", "no such session")).headers


def test_envelopes_pass_a_clients_message_and_metadata_through_untouched() -> None:
    message = {"role": "user", "name": "a", "content": [{"type": "x-new", "n": 1.5}], "extra": None}
    raw = stamp(3, T0, message, {"urgent": True, "custom": {"k": [1, 2]}})
    envelope = Envelope.model_validate(raw)
    assert envelope.model_dump() == raw and list(envelope.model_dump()) == ["seq", "ts", "message", "metadata"]
    batch = Batch(messages=[envelope, Envelope.model_validate(stamp(4, T0, *system_message("hi", "e")))], last_seq=4)
    assert batch.model_dump()["messages"][0] == raw and batch.model_dump()["last_seq"] == 4


def test_file_lists_and_creation_replies_dump_as_before() -> None:
    record = FileRecord(name="a.txt", size=3, content_type="text/plain", seq=2, uploaded_at="2023-11-14T22:13:20Z")
    assert FileList(files=[record]).model_dump() == {"files": [record.public()]}
    created = SessionCreated(uid="u", url="http://h/s/u", key="k", created_at="t", limits={"max_messages": 1})
    assert created.public() == {"uid": "u", "url": "http://h/s/u", "key": "k", "created_at": "t",
                                "limits": {"max_messages": 1}}
    assert created.model_copy(update={"token": "iris1.x"}).public()["token"] == "iris1.x"


def test_terminate_reply_is_typed() -> None:
    core = SessionCore(SessionState(uid="u", key_hash="h", created=T0, last_write=T0, limits=RelayLimits()))
    core.commit(core.plan_terminate(T0 + 1))
    assert core.terminate_reply().model_dump() == {"status": "read-only", "purge_at": "2023-11-15T22:13:21Z"}
