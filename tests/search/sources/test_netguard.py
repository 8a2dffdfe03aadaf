"""The SSRF guard: loopback, private, link-local (metadata) and CGNAT addresses are refused, by literal or by
name, unless SOURCES_ALLOWED_NETWORKS lists them."""
from __future__ import annotations

import ipaddress

import pytest

from search.sources import netguard


@pytest.mark.parametrize("url", ["http://127.0.0.1/", "https://10.0.0.1/repo.git", "http://169.254.169.254/latest/",
                                 "http://[::1]:8080/", "http://100.64.1.1/", "http://[::ffff:127.0.0.1]/",
                                 "ssh://git@192.168.1.5/org/repo.git", "http://0.0.0.0/", "http://localhost/"])
def test_private_loopback_and_metadata_addresses_are_refused(url, settings):
    settings.SOURCES_ALLOWED_NETWORKS = []
    with pytest.raises(netguard.UnsafeAddress) as err:
        netguard.check_url(url)
    assert err.value.code == "unsafe_address" and err.value.status_code == 400 and err.value.field == "url"


def test_a_public_address_passes():
    assert netguard.check_url("https://93.184.216.34/x") == [ipaddress.ip_address("93.184.216.34")]


def test_an_allowed_network_lets_only_its_addresses_through(settings):
    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    assert netguard.check_url("http://127.0.0.1:8123/") == [ipaddress.ip_address("127.0.0.1")]
    with pytest.raises(netguard.UnsafeAddress):
        netguard.check_url("http://127.0.0.2/")
    with pytest.raises(netguard.UnsafeAddress):
        netguard.check_url("http://10.0.0.1/")


def test_an_unresolvable_host_is_a_clear_400():
    with pytest.raises(netguard.BadInput) as err:
        netguard.check_url("http://no-such-host.invalid/")
    assert err.value.code == "unresolvable_host"


def test_a_lookup_given_a_time_limit_ends_at_it_and_one_in_time_is_used(settings):
    import socket
    import threading
    import time

    settings.SOURCES_ALLOWED_NETWORKS = []
    release, asked = threading.Event(), []

    def slow(host: str, port: int, *, proto: int = 0) -> list:  # a resolver that answers when released
        asked.append((host, port))
        release.wait(30)
        return [(socket.AF_INET, socket.SOCK_STREAM, proto, "", ("93.184.216.34", port))]

    started = time.monotonic()
    try:
        with pytest.raises(netguard.SlowLookup) as err:
            netguard.check_url("https://slow.example/x", timeout_s=0.5, lookup=slow)
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert err.value.code == "slow_lookup" and err.value.status_code == 400 and err.value.field == "url"
    assert asked == [("slow.example", 443)] and elapsed < 15
    assert netguard.check_url("https://slow.example/x", timeout_s=5, lookup=slow) == \
        [ipaddress.ip_address("93.184.216.34")]
    with pytest.raises(netguard.SlowLookup):  # no time left: the resolver is not asked
        netguard.check_url("https://slow.example/x", timeout_s=0, lookup=slow)
    assert len(asked) == 2
