"""Errors: every refusal the cluster gives carries a stable ``WARREN_ERR_*`` code.

``WarrenError`` is the base; each public code has a subclass so callers can ``except
NotFoundError``. Codes are the contract (docs/protocol.md, "Error codes"); messages may change.
"""
from __future__ import annotations

from typing import Any, Mapping


class WarrenError(Exception):
    """A refusal with a stable ``code``, a human ``message`` and structured ``details``."""

    code: str = "WARREN_ERR_INTERNAL"

    def __init__(self, message: str, code: str | None = None, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    @property
    def field(self) -> str | None:
        """The request field the cluster named (``details.field``), if any."""
        f = self.details.get("field")
        return f if isinstance(f, str) else None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross multiprocessing boundaries too: keep code and details.
        return (from_code, (self.code, self.message, self.details))


class UnauthenticatedError(WarrenError):
    code = "WARREN_ERR_UNAUTHENTICATED"


class ProtocolVersionError(WarrenError):
    code = "WARREN_ERR_PROTOCOL_VERSION"


class ForbiddenError(WarrenError):
    code = "WARREN_ERR_FORBIDDEN"


class InvalidArgumentError(WarrenError):
    code = "WARREN_ERR_INVALID_ARGUMENT"


class BadSpecError(WarrenError):
    code = "WARREN_ERR_BAD_SPEC"


class NotFoundError(WarrenError):
    code = "WARREN_ERR_NOT_FOUND"


class QuotaError(WarrenError):
    code = "WARREN_ERR_QUOTA"


class NoCapacityError(WarrenError):
    code = "WARREN_ERR_NO_CAPACITY"


class UnsupportedError(WarrenError):
    code = "WARREN_ERR_UNSUPPORTED"


class SandboxGoneError(WarrenError):
    code = "WARREN_ERR_SANDBOX_GONE"


class SandboxPausedError(WarrenError):
    """The sandbox is paused or hibernated (``state``): resume it first (``sb.resume()``)."""

    code = "WARREN_ERR_SANDBOX_PAUSED"

    @property
    def state(self) -> str | None:
        """``paused`` or ``hibernated`` (``details.state``)."""
        v = self.details.get("state")
        return v if isinstance(v, str) else None


class OverloadedError(WarrenError):
    code = "WARREN_ERR_OVERLOADED"

    @property
    def retry_after_ms(self) -> int | None:
        v = self.details.get("retryAfterMs")
        return int(v) if isinstance(v, (int, float)) else None


class WarrenTimeoutError(WarrenError):
    code = "WARREN_ERR_TIMEOUT"


class BackendUnavailableError(WarrenError):
    code = "WARREN_ERR_BACKEND_UNAVAILABLE"


class FrameTooLargeError(WarrenError):
    code = "WARREN_ERR_FRAME_TOO_LARGE"


class ProtocolError(WarrenError):
    """The client broke the framing rules (malformed frame, unknown kind, protocol violation)."""

    code = "WARREN_ERR_PROTOCOL_VIOLATION"


class ConnectionClosedError(WarrenError):
    """Client side: the socket closed before the answer came (the request may be sent again)."""

    code = "WARREN_ERR_CONNECTION_CLOSED"


class InternalError(WarrenError):
    code = "WARREN_ERR_INTERNAL"


_BY_CODE: dict[str, type[WarrenError]] = {
    cls.code: cls
    for cls in (
        UnauthenticatedError, ProtocolVersionError, ForbiddenError, InvalidArgumentError, BadSpecError,
        NotFoundError, QuotaError, NoCapacityError, UnsupportedError, SandboxGoneError, SandboxPausedError, OverloadedError,
        WarrenTimeoutError, BackendUnavailableError, FrameTooLargeError, ConnectionClosedError, InternalError,
    )
}
_BY_CODE["WARREN_ERR_MALFORMED_FRAME"] = ProtocolError
_BY_CODE["WARREN_ERR_UNKNOWN_FRAME_KIND"] = ProtocolError
_BY_CODE["WARREN_ERR_PROTOCOL_VIOLATION"] = ProtocolError
# The link's own "asked too long" is a timeout to a user: internal codes never reach one.
_BY_CODE["WARREN_ERR_ASK_TIMEOUT"] = WarrenTimeoutError


def from_code(code: str, message: str, details: Mapping[str, Any] | None = None) -> WarrenError:
    """The error of the subclass for ``code`` (``WarrenError`` for a code this SDK does not know)."""
    cls = _BY_CODE.get(code, WarrenError)
    public = cls.code if code == "WARREN_ERR_ASK_TIMEOUT" else code
    return cls(message, public, details)


def from_wire(err: Any) -> WarrenError:
    """Turns a wire ``err`` map (``{code, message, details?}``) into an exception."""
    if not isinstance(err, dict):
        return InternalError(f"malformed error from the cluster: {err!r}")
    details = err.get("details")
    return from_code(str(err.get("code", "WARREN_ERR_INTERNAL")), str(err.get("message", "")),
                     details if isinstance(details, dict) else None)


def invalid(field: str, message: str, **details: Any) -> InvalidArgumentError:
    """A client-side refusal of bad input, naming ``field`` like the cluster does."""
    return InvalidArgumentError(message, None, {"field": field, **details})


RETRYABLE_CODES = frozenset({"WARREN_ERR_TIMEOUT", "WARREN_ERR_CONNECTION_CLOSED"})
