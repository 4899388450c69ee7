"""Which address a client is: its TCP peer's, or, when that peer is a proxy listed in `server.trusted_proxies`,
the address the proxy forwarded in `X-Forwarded-For` (kgserve.forwarded applies it to every request and
WebSocket; kgserve.http.httpguard leaves a trusted proxy's connections out of the per-address count).

The header is a list that each proxy extends on the right with the address it received the request from; only
the entries added by proxies kgserve trusts can be believed, everything to their left is whatever the client
wrote. So the client is the right-most entry that is not itself a trusted proxy (the algorithm of MDN's
X-Forwarded-For page and of nginx's realip with `real_ip_recursive on`); the left-most entry is never trusted
for being left-most. When every entry is a trusted proxy, the left-most one is the client (a proxy's own
request). Several header lines are one list, in order (RFC 9110 section 5.3). An entry that is not an IP
address (optionally `v4:port` or `[v6]:port`) where the walk meets it makes the header malformed: the caller
falls back to the peer's address, as if no header had come.

A peer that is not trusted is never asked about its header: nothing is parsed, and a client cannot choose who
it is.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

__all__ = ["FORWARDED_FOR", "MAX_HOPS", "TrustedProxies", "parse_address"]

FORWARDED_FOR = b"x-forwarded-for"  # as ASGI spells header names: lower case
MAX_HOPS = 32  # entries the walk looks at, right to left; a longer chain of trusted proxies counts as malformed
_MAX_ENTRY = 64  # characters: the longest IPv6 text with brackets and a port is 47
_CACHED_HEADER_MAX = 256  # bytes: the cache holds at most ~1 MiB of headers
_CACHE_MAX = 4096  # peers (and headers) remembered (each cache cleared when full: a flood cannot grow it)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_address(text: str) -> Address | None:
    """An address as a proxy writes it in X-Forwarded-For (`1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`,
    `[2001:db8::1]`, `[2001:db8::1]:80`), IPv4-mapped IPv6 read as IPv4; None for anything else (names,
    `unknown`, zone ids)."""
    if not text or len(text) > _MAX_ENTRY or "%" in text:
        return None
    if text[0] == "[":
        end = text.find("]")
        if end < 0 or not (end == len(text) - 1 or (text[end + 1] == ":" and text[end + 2 :].isdigit())):
            return None
        text = text[1:end]
    elif text.count(":") == 1:  # IPv4 with a port (an IPv6 address has at least two colons)
        text, port = text.split(":")
        if not port.isdigit():
            return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class TrustedProxies:
    """The networks of `server.trusted_proxies` (strings the settings validated); false when there are none."""

    def __init__(self, networks: Iterable[str]) -> None:
        self.networks: tuple[Network, ...] = tuple(ipaddress.ip_network(network) for network in networks)
        self._peers: dict[str, bool] = {}
        # short headers read before -> the client (a proxy's clients come back: ~0.2 µs instead of ~5-10 a request)
        self._headers: dict[tuple[str, bytes], str | None] = {}

    def __bool__(self) -> bool:
        return bool(self.networks)

    def _trusted(self, address: Address) -> bool:
        return any(address in network for network in self.networks)

    def trusts(self, host: str | None) -> bool:
        """Whether a TCP peer (uvicorn's `client[0]`) is a trusted proxy; cached per peer."""
        if host is None or not self.networks:
            return False
        trusted = self._peers.get(host)
        if trusted is None:
            address = parse_address(host)
            trusted = address is not None and self._trusted(address)
            if len(self._peers) >= _CACHE_MAX:
                self._peers.clear()
            self._peers[host] = trusted
        return trusted

    def client_address(self, peer: str, values: Sequence[bytes]) -> str | None:
        """The client's address from a trusted peer's X-Forwarded-For header lines (`values`, in order): the
        right-most entry that is no trusted proxy, normalised (`2001:DB8::1` and `2001:db8:0::1` are one client);
        `peer` when the lines hold no entry; None when the header is malformed (the module docstring)."""
        header = b",".join(values)
        key = (peer, header)
        if key in self._headers:
            return self._headers[key]
        address = self._walk(peer, header)
        if len(header) <= _CACHED_HEADER_MAX:  # long ones (a client's own padding) would make the cache big
            if len(self._headers) >= _CACHE_MAX:
                self._headers.clear()
            self._headers[key] = address
        return address

    def _walk(self, peer: str, header: bytes) -> str | None:
        entries = header.split(b",")
        leftmost: Address | None = None
        hops = 0
        for raw in reversed(entries):
            text = raw.strip(b" \t").decode("latin-1")
            if not text:  # an empty list element (RFC 9110 5.6.1: recipients accept and skip them)
                continue
            hops += 1
            address = parse_address(text) if hops <= MAX_HOPS else None
            if address is None:
                return None
            if not self._trusted(address):
                return str(address)
            leftmost = address
        return str(leftmost) if leftmost is not None else peer
