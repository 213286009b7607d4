"""One error shape for every boundary in the house.

Between actors, deployments and sockets an error travels as `ErrorInfo` (`code`, `message`);
HTTP wraps it as `{"error": {"code", "message"}}`, SSE and WebSocket send it as an `error` event.
Each boundary raises its own subclass of `IriisError`, so a caller catches one family.
"""

from __future__ import annotations

from pydantic import BaseModel


class ErrorInfo(BaseModel):
    """What went wrong, in a stable machine code and one sentence for a person."""

    code: str
    message: str


class IriisError(Exception):
    """Base of every error the house raises on purpose: a stable `code` (each family names its
    own) and a `message` for a person, together its `ErrorInfo`. A subclass may keep its own
    constructor (what it passes up stays its pickled arguments across actors); its message is
    then its `str()`, unless it sets one."""

    code = "internal_error"

    def __init__(self, message: str = "", code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return self.__dict__.get("_message") or str(self)

    @message.setter
    def message(self, value: str) -> None:
        self.__dict__["_message"] = value

    def info(self) -> ErrorInfo:
        return ErrorInfo(code=self.code, message=self.message)

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled (Ray moves an actor's error to its caller) as its arguments and attributes,
        # rebuilt without calling the subclass's constructor, whatever that takes.
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls: type[IriisError], args: tuple[object, ...], state: dict[str, object]) -> IriisError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error
