"""File names as bytes (the TypeScript side: src/file-names.ts).

A Linux file name is any bytes but ``/`` and NUL, and not every one is UTF-8. In Python a name is
a ``str`` the way ``os.fsdecode`` gives it: UTF-8, each byte that is not part of valid UTF-8 kept
as a lone surrogate (PEP 383, "surrogateescape"), so ``b"caf\\xe9"`` is ``"caf\\udce9"`` and goes
back to exactly its bytes. On the wire a name is a msgpack str when it is UTF-8 and a bin of its
bytes when it is not.
"""
from __future__ import annotations

import base64
from typing import Union

Name = Union[str, bytes]


def to_wire(name: Name) -> Name:
    """``name`` as it travels: itself when it is UTF-8, else its bytes."""
    if isinstance(name, (bytes, bytearray)):
        return bytes(name)
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape")


def from_wire(value: Name) -> str:
    """A name off the wire: a str as it is, the bytes of a bin decoded with escapes."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "surrogateescape")
    return value


def pax_names(name: str, linkname: str = "") -> dict[str, str]:
    """warren's own pax keys for a tar member whose name or link is not UTF-8 (see src/cluster/sandbox/tar-names.ts)."""
    out: dict[str, str] = {}
    for key, value in (("WARREN.path", name), ("WARREN.linkpath", linkname)):
        wire = to_wire(value)
        if isinstance(wire, bytes):
            out[key] = base64.b64encode(wire).decode("ascii")
    return out
