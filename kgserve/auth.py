"""Optional bearer-token auth, and the credentials that tell clients apart.

`server.auth_token_env` in runtime/config.yaml names an environment variable. When that variable is set
and not empty, POST /analysis and GET /metrics need `Authorization: Bearer <token>` (401 otherwise; the
comparison is constant-time). /healthz and /readyz stay open. The token itself never appears in a file
or a log. The variable may hold several tokens, separated by commas: each is a client of its own for the
per-client caps (kgserve.admission.clients), e.g. one per person behind one SSH tunnel.

`priority.interactive_token_env` names another variable (comma-separated tokens, off when unset): a client
presenting one of those may use the interactive class beyond `priority.interactive_share` (and, where auth
is on, is let in as with an ordinary token).

`identify(credentials)` gives the presented token's `Credential`: a short label (a hash prefix, never the
token) and whether it grants the interactive class.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from kgserve.settings import ServerSettings, is_loopback

__all__ = ["PROTECTED_PATHS", "Credential", "TokenAuth", "exposure_warning", "token_from_env", "tokens_from_env"]

PROTECTED_PATHS = frozenset({"/analysis", "/metrics"})
log = logging.getLogger("kgserve.auth")


def tokens_from_env(name: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The tokens in environment variable `name` (comma-separated; none when unset or empty)."""
    if not name:
        return []
    value = (os.environ if environ is None else environ).get(name, "")
    return [token.strip() for token in value.split(",") if token.strip()]


def token_from_env(server: ServerSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """The bearer token(s) of `server.auth_token_env` as configured (None: auth is off)."""
    tokens = tokens_from_env(server.auth_token_env, environ)
    return ",".join(tokens) if tokens else None


@dataclass(frozen=True, slots=True)
class Credential:
    label: str  # which token (a hash prefix): a client of its own
    interactive: bool  # one of priority.interactive_token_env's


def _label(token: bytes) -> str:
    return hashlib.sha256(token).hexdigest()[:12]


class TokenAuth:
    def __init__(self, token: str | None, interactive_tokens: list[str] | None = None) -> None:
        plain = [t.strip() for t in (token or "").split(",") if t.strip()]
        self._enabled = bool(plain)
        self._tokens = [(t.encode("utf-8"), Credential(_label(t.encode("utf-8")), False)) for t in plain]
        self._tokens += [
            (t.encode("utf-8"), Credential(_label(t.encode("utf-8")), True)) for t in interactive_tokens or []
        ]

        self.identifies = bool(self._tokens)  # any credential configured: requests are asked for theirs

    @property
    def enabled(self) -> bool:
        return self._enabled

    def check(self, path: str, authorization: str | None) -> tuple[bool, Credential | None]:
        """Whether the request may reach `path`, and the credential it presented (one token comparison pass)."""
        credential = self.bearer(authorization)
        allowed = not self._enabled or path not in PROTECTED_PATHS or credential is not None
        return allowed, credential

    def identify(self, credentials: str | None) -> Credential | None:
        """The credential `credentials` is one of (compared in constant time with every token); None: none."""
        if credentials is None or not self._tokens:
            return None
        given = credentials.strip().encode("utf-8", errors="surrogateescape")
        found = None
        for token, credential in self._tokens:
            if hmac.compare_digest(given, token):
                found = credential
        return found

    def bearer(self, authorization: str | None) -> Credential | None:
        """The credential of an `Authorization: Bearer <token>` header (None: none, or not a bearer header)."""
        if authorization is None:
            return None
        scheme, _, credentials = authorization.strip().partition(" ")
        return self.identify(credentials) if scheme.lower() == "bearer" else None

    def allows(self, path: str, authorization: str | None) -> bool:
        if not self._enabled or path not in PROTECTED_PATHS:
            return True
        return self.bearer(authorization) is not None

    def accepts(self, credentials: str | None) -> bool:
        """Whether `credentials` is a token (constant-time); always true when auth is off."""
        return not self._enabled or self.identify(credentials) is not None

    def allows_websocket(self, authorization: str | None, token_parameter: str | None) -> bool:
        """A WebSocket handshake: the bearer header, or a `token` query parameter for clients (KaTrain)
        that cannot send headers."""
        if not self._enabled:
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
