"""Where the client finds the control plane: explicit arguments, then WARREN_URL,
WARREN_TOKEN and WARREN_CA, then the config file ``warren up`` writes (~/.warren/config.json, or
WARREN_CONFIG)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import invalid


@dataclass(frozen=True)
class WarrenConfig:
    url: str
    token: str
    #: The CA of a wss:// control plane (a PEM file's path or PEM text), or None.
    ca: str | None = None


def config_path() -> Path:
    """The config file's path; WARREN_CONFIG overrides it."""
    env = os.environ.get("WARREN_CONFIG")
    return Path(env) if env else Path.home() / ".warren" / "config.json"


def _read_file() -> dict[str, str]:
    try:
        data = json.loads(config_path().read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def resolve_config(url: str | None = None, token: str | None = None, ca: str | None = None) -> WarrenConfig:
    """Resolves url and token; raises InvalidArgumentError (field ``url``/``token``) when one is found nowhere."""
    file = _read_file() if url is None or token is None else {}
    u = url or os.environ.get("WARREN_URL") or file.get("url")
    t = token or os.environ.get("WARREN_TOKEN") or file.get("token")
    if not u or not t:
        raise invalid("url" if not u else "token",
                      f"no control plane configured: pass url and token, set WARREN_URL and WARREN_TOKEN, "
                      f"or run `warren up` (it writes {config_path()})")
    # The file's CA belongs to the file's URL: a URL given another way does not inherit it.
    c = ca or os.environ.get("WARREN_CA") or (file.get("ca") if u == file.get("url") else None)
    return WarrenConfig(u, t, c or None)
