"""Optional bearer-token auth.

`server.auth_token_env` in runtime/config.yaml names an environment variable. When that variable is set
and not empty, POST /analysis and GET /metrics need `Authorization: Bearer <token>` (401 otherwise; the
comparison is constant-time). /healthz and /readyz stay open. The token itself never appears in a file
or a log.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Mapping

from kgserve.settings import ServerSettings, is_loopback

__all__ = ["PROTECTED_PATHS", "TokenAuth", "exposure_warning", "token_from_env"]

PROTECTED_PATHS = frozenset({"/analysis", "/metrics"})
log = logging.getLogger("kgserve.auth")


def token_from_env(server: ServerSettings, environ: Mapping[str, str] | None = None) -> str | None:
    if not server.auth_token_env:
        return None
    value = (os.environ if environ is None else environ).get(server.auth_token_env, "")
    return value or None


class TokenAuth:
    def __init__(self, token: str | None) -> None:
        self._token = token.encode("utf-8") if token else None

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def allows(self, path: str, authorization: str | None) -> bool:
        if self._token is None or path not in PROTECTED_PATHS:
            return True
        if authorization is None:
            return False
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return self.accepts(credentials)

    def accepts(self, credentials: str | None) -> bool:
        """Whether `credentials` is the token (constant-time); always true when auth is off."""
        if self._token is None:
            return True
        if credentials is None:
            return False
        return hmac.compare_digest(credentials.strip().encode("utf-8", errors="surrogateescape"), self._token)

    def allows_websocket(self, authorization: str | None, token_parameter: str | None) -> bool:
        """A WebSocket handshake: the bearer header, or a `token` query parameter for clients (KaTrain)
        that cannot send headers."""
        if self._token is None:
            return True
        if authorization is not None and self.allows("/analysis", authorization):
            return True
        return token_parameter is not None and self.accepts(token_parameter)


def exposure_warning(server: ServerSettings, token: str | None) -> str | None:
    """A warning when kgserve would listen beyond loopback with nobody asked for a token."""
    if token or is_loopback(server.host):
        return None
    hint = (
        f"set the environment variable {server.auth_token_env}"
        if server.auth_token_env
        else "name an environment variable in server.auth_token_env and set it"
    )
    return (
        f"kgserve is binding {server.host}, which is not a loopback address, without a bearer token: "
        f"anyone who can reach this port can run analyses ({hint} to require one)"
    )
