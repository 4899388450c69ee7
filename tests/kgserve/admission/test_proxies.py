"""Who a client is behind a trusted proxy (kgserve.admission.proxies): the right-most X-Forwarded-For entry that is
no trusted proxy; anything unreadable on the way falls back to the peer (None here); an untrusted peer is never
asked."""

from __future__ import annotations

import pytest

from kgserve.admission.proxies import MAX_HOPS, TrustedProxies, parse_address

PROXIES = TrustedProxies(["10.0.0.0/8", "192.0.2.7/32", "2001:db8:ffff::/48", "127.0.0.1/32"])
PEER = "10.0.0.2"


def resolve(*values: bytes, peer: str = PEER) -> str | None:
    return PROXIES.client_address(peer, list(values))


def test_only_listed_peers_are_trusted() -> None:
    assert PROXIES.trusts("10.200.3.4") and PROXIES.trusts("192.0.2.7") and PROXIES.trusts("127.0.0.1")
    assert PROXIES.trusts("2001:db8:ffff:1::9") and PROXIES.trusts("::ffff:10.1.2.3")  # v4-mapped: the v4 rules
    for host in ("192.0.2.8", "127.0.0.2", "2001:db8:fffe::1", "::1", "not-an-address", "", None):
        assert not PROXIES.trusts(host), host
    nobody = TrustedProxies([])
    assert not nobody and not nobody.trusts("10.0.0.1")  # empty: today's behaviour, nothing is trusted


def test_the_client_is_the_right_most_untrusted_entry() -> None:
    assert resolve(b"203.0.113.9") == "203.0.113.9"
    # what a client wrote itself stands left of what the trusted proxies added: never believed
    assert resolve(b"198.51.100.1, 203.0.113.9") == "203.0.113.9"
    assert resolve(b"1.1.1.1, 203.0.113.9, 10.0.0.7, 192.0.2.7") == "203.0.113.9"  # a chain of trusted proxies
    assert resolve(b"10.9.9.9, 10.0.0.7") == "10.9.9.9"  # all trusted: the left-most (a proxy's own request)


def test_several_header_lines_are_one_list_in_order() -> None:
    assert resolve(b"198.51.100.1", b"203.0.113.9") == "203.0.113.9"
    assert resolve(b"203.0.113.9", b"10.0.0.7") == "203.0.113.9"
    assert resolve(b"198.51.100.1, 203.0.113.9", b"10.0.0.7, 192.0.2.7") == "203.0.113.9"


def test_ipv6_entries_are_read_and_normalised() -> None:
    assert resolve(b"2001:DB8:0:0::1") == "2001:db8::1"
    assert resolve(b"[2001:db8::1]:443") == "2001:db8::1"
    assert resolve(b"[2001:db8::1]") == "2001:db8::1"
    assert resolve(b"::ffff:203.0.113.9") == "203.0.113.9"  # one client whether it came over v4 or mapped v6
    assert resolve(b"2001:db8::5, 2001:db8:ffff::1") == "2001:db8::5"  # a trusted v6 proxy skipped
    assert resolve(b"203.0.113.9", peer="2001:db8:ffff::2") == "203.0.113.9"


def test_ports_spaces_and_empty_elements_are_tolerated() -> None:
    assert resolve(b"203.0.113.9:51234") == "203.0.113.9"
    assert resolve(b"  203.0.113.9\t,\t10.0.0.7  ") == "203.0.113.9"
    assert resolve(b"203.0.113.9,,  ,") == "203.0.113.9"
    assert resolve(b"") == PEER and resolve(b" , ") == PEER  # no entry at all: the peer


@pytest.mark.parametrize(
    "garbage",
    [
        b"unknown",
        b"client.example.org",
        b"203.0.113.9; DROP",
        b"203.0.113.999",
        b"203.0.113.9:port",
        b"203.0.113.9:",
        b"[2001:db8::1",
        b"[2001:db8::1]x",
        b"fe80::1%eth0",
        b"\xff\xfe\x00",
        b"1" * 200,
        b"203.0.113.9\r\nX-Evil: 1",
    ],
)
def test_garbage_where_the_walk_meets_it_is_malformed(garbage: bytes) -> None:
    assert resolve(garbage) is None
    assert resolve(garbage + b", 10.0.0.7") is None  # behind a trusted hop: still met
    assert resolve(garbage + b", 203.0.113.9") == "203.0.113.9"  # left of the client: never looked at


def test_a_chain_longer_than_max_hops_is_malformed() -> None:
    trusted = b", ".join([b"10.0.0.1"] * MAX_HOPS)
    assert resolve(trusted) == "10.0.0.1"
    assert resolve(b"10.0.0.1, " + trusted) is None


def test_parse_address_reads_what_proxies_write() -> None:
    assert str(parse_address("192.0.2.1:80")) == "192.0.2.1"
    assert parse_address("") is None and parse_address("[]") is None and parse_address("[::1]:") is None


def test_what_was_read_is_remembered_within_a_bound() -> None:
    proxies = TrustedProxies(["10.0.0.0/8"])
    for index in range(5000):  # a flood of distinct headers (and peers) cannot grow the caches past their bound
        assert proxies.client_address(PEER, [f"203.0.{index // 256}.{index % 256}".encode()]) is not None
        proxies.trusts(f"198.51.{index // 256}.{index % 256}")
    assert len(proxies._headers) <= 4096 and len(proxies._peers) <= 4096
    assert proxies.client_address(PEER, [b"203.0.113.9"]) == proxies.client_address(PEER, [b"203.0.113.9"])
    assert proxies.client_address(PEER, [b"unknown"]) is None and proxies.client_address(PEER, [b"unknown"]) is None
    padded = b"1.1.1.1, " * 1000 + b"203.0.113.9"  # a client's own long prefix: read, never kept
    proxies._headers.clear()
    assert proxies.client_address(PEER, [padded]) == "203.0.113.9" and proxies._headers == {}
