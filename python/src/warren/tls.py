"""TLS for a ``wss://`` control plane: the SSL context that trusts its CA beside the system's
roots, and the refusals no retry can cure (an untrusted certificate, a plain client at a TLS
port, TLS against a plain port), reported like the TypeScript SDK's: ConnectionClosedError with
``details.reason == "tls"`` and the cause."""
from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Union

from .errors import ConnectionClosedError, invalid

#: The header a TLS-only port answers a plain HTTP request with (see src/transport/tls.ts).
TLS_REQUIRED_HEADER = "x-warren-tls-required"

CaInput = Union[str, Path, None]


def ssl_context(url: str, ca: CaInput) -> ssl.SSLContext | None:
    """The context for ``url``: None for ``ws://``; the system's roots plus ``ca`` (a PEM file's
    path, or PEM text) for ``wss://``. Raises InvalidArgumentError (field ``ca``) for a CA that
    cannot be read."""
    if not url.startswith("wss:"):
        return None
    ctx = ssl.create_default_context()
    if ca is None or ca == "":
        return ctx
    text = str(ca)
    try:
        if "-----BEGIN " in text:
            ctx.load_verify_locations(cadata=text)
        else:
            ctx.load_verify_locations(cafile=text)
    except (OSError, ssl.SSLError) as err:
        raise invalid("ca", f"cannot use the CA {text[:200]}: {err}") from None
    return ctx


def tls_refusal(err: BaseException, url: str) -> ConnectionClosedError | None:
    """The public error when ``err`` is a TLS refusal (or a TLS-only port's answer), else None."""
    if isinstance(err, ssl.SSLCertVerificationError):
        cause = getattr(err, "verify_message", None) or str(err)
        return ConnectionClosedError(
            f"TLS refused the connection to {url}: its certificate is not trusted ({cause}); "
            "pass the CA that signed it (ca=PATH, WARREN_CA)", None, {"reason": "tls", "cause": cause, "url": url})
    if isinstance(err, ssl.SSLError):
        return ConnectionClosedError(f"TLS failed with {url}: {err.reason or err}; does it serve TLS there?",
                                     None, {"reason": "tls", "cause": str(err.reason or err), "url": url})
    headers: Any = getattr(err, "headers", None)
    if headers is None:
        headers = getattr(getattr(err, "response", None), "headers", None)
    if headers is not None and headers.get(TLS_REQUIRED_HEADER) is not None:
        secure = url.replace("ws:", "wss:", 1)
        return ConnectionClosedError(f"the control plane at {url} serves TLS only: use {secure}",
                                     None, {"reason": "tls", "cause": "TLS_REQUIRED", "url": url})
    return None
