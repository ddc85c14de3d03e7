"""The egress policy: what outbound requests of API tools may reach, by default and when configured."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echo_tools.egress import EgressPolicy, literal_address
from echo_tools.errors import EgressDeniedError

DENIED_BY_DEFAULT = [
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://10.0.0.1/admin", "private"),
    ("http://172.16.5.4/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://100.64.0.1/", "private"),
    ("http://[fd00::1]/", "private"),
    ("http://127.0.0.1:8000/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://localhost:8000/", "loopback"),
    ("http://api.localhost/", "loopback"),
    ("http://0.0.0.0/", "multicast, unspecified or reserved"),
    ("http://224.0.0.1/", "multicast, unspecified or reserved"),
    # other spellings of the same addresses
    ("http://2130706433/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://127.0.0.1./", "loopback"),
    ("http://[::ffff:169.254.169.254]/", "link-local"),
    ("http://[64:ff9b::a9fe:a9fe]/", "link-local"),
    ("http://[2002:a9fe:a9fe::1]/", "link-local"),
    ("http://user:pw@10.0.0.1/", "private"),
    ("http://metadata.google.internal/", "cloud metadata host"),
]


@pytest.mark.parametrize(("url", "reason"), DENIED_BY_DEFAULT)
def test_the_default_policy_denies_internal_addresses(url: str, reason: str) -> None:
    with pytest.raises(EgressDeniedError, match=reason):
        EgressPolicy().check_url(url)


@pytest.mark.parametrize(
    "url", ["https://api.example.com/v1", "http://8.8.8.8/", "https://[2606:4700::1111]/"]
)
def test_the_default_policy_allows_public_hosts(url: str) -> None:
    EgressPolicy().check_url(url)


def test_the_denial_names_the_address_and_the_flag_that_allows_it() -> None:
    with pytest.raises(EgressDeniedError) as caught:
        EgressPolicy().check_url("http://10.0.0.1/x")
    assert str(caught.value) == (
        "Egress to 10.0.0.1 (http://10.0.0.1/x) is denied: private addresses are not allowed by the egress "
        "policy; EgressPolicy(allow_private=True) allows them; the shipped web tools (http_request, web_search) "
        "read ECHO_TOOLS_EGRESS_ALLOW_PRIVATE=1 from the environment"
    )


def test_the_local_policy_allows_loopback_only() -> None:
    policy = EgressPolicy.local()
    policy.check_url("http://127.0.0.1:9/")
    policy.check_url("http://localhost:9/")
    with pytest.raises(EgressDeniedError, match="private"):
        policy.check_url("http://10.1.2.3/")
    with pytest.raises(EgressDeniedError, match="link-local"):
        policy.check_url("http://169.254.169.254/")


def test_each_flag_opens_its_own_range() -> None:
    EgressPolicy(allow_private=True).check_url("http://192.168.0.10/")
    EgressPolicy(allow_link_local=True).check_url("http://169.254.169.254/")
    EgressPolicy(allow_link_local=True).check_url("http://metadata.google.internal/")
    with pytest.raises(EgressDeniedError):
        EgressPolicy(allow_private=True).check_url("http://169.254.169.254/")


def test_allowed_and_denied_hosts_win_over_the_ranges() -> None:
    policy = EgressPolicy(
        allowed_hosts=("10.20.0.0/16", "intranet.local"), denied_hosts=("evil.example.com", "8.8.8.0/24")
    )
    policy.check_url("http://10.20.3.4/")
    policy.check_url("http://intranet.local/")
    with pytest.raises(EgressDeniedError, match="denied by denied_hosts"):
        policy.check_url("https://EVIL.example.com/")
    with pytest.raises(EgressDeniedError, match="denied by denied_hosts"):
        policy.check_url("https://8.8.8.8/")
    with pytest.raises(EgressDeniedError, match="private"):
        policy.check_url("http://10.21.0.1/")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/x", "has scheme 'ftp'"),
        ("file:///etc/passwd", "has scheme 'file'"),
        ("http:///nohost", "has no host"),
        ("http://[::1/", "cannot be parsed"),
    ],
)
def test_urls_with_other_schemes_or_without_a_host_are_denied(url: str, message: str) -> None:
    with pytest.raises(EgressDeniedError, match=message):
        EgressPolicy().check_url(url)


def test_check_resolved_checks_where_a_name_really_points() -> None:
    with pytest.raises(EgressDeniedError, match="loopback"):
        EgressPolicy(allowed_hosts=()).check_resolved("http://localhost/")
    EgressPolicy.local().check_resolved("http://localhost:1/")
    with pytest.raises(EgressDeniedError, match="does not resolve"):
        EgressPolicy().check_resolved("http://no-such-host.invalid/")


def test_check_address_judges_ipv4_inside_ipv6_by_the_ipv4_address() -> None:
    with pytest.raises(EgressDeniedError, match="link-local"):
        EgressPolicy().check_address(ipaddress.ip_address("::ffff:169.254.1.1"))


def test_literal_address_reads_the_spellings_resolvers_accept() -> None:
    assert str(literal_address("2130706433")) == "127.0.0.1"
    assert str(literal_address("0x7f.0.0.1")) == "127.0.0.1"
    assert literal_address("example.com") is None
    assert literal_address("deadbeef.com") is None
    assert literal_address("1e100.net") is None


def test_host_lists_given_as_lists_are_kept_as_tuples_and_the_policy_stays_hashable() -> None:
    policy = EgressPolicy(allowed_hosts=["Intranet.Local."], denied_hosts="evil.example.com")  # type: ignore[arg-type]
    assert policy.allowed_hosts == ("intranet.local",) and policy.denied_hosts == ("evil.example.com",)
    assert hash(policy) == hash(
        EgressPolicy(allowed_hosts=("intranet.local",), denied_hosts=("evil.example.com",))
    )
    policy.check_url("http://intranet.local/")


def test_a_non_positive_response_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="max_response_bytes must be positive, got 0"):
        EgressPolicy(max_response_bytes=0)


INTERNAL_NETS = [
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8")
]


@settings(max_examples=200, deadline=None)
@given(net=st.sampled_from(INTERNAL_NETS), offset=st.integers(min_value=0, max_value=2**24 - 1))
def test_every_spelling_of_an_internal_address_is_denied(net: ipaddress.IPv4Network, offset: int) -> None:
    address = net[offset % net.num_addresses]
    policy = EgressPolicy()
    for host in (str(address), str(int(address)), hex(int(address)), f"[::ffff:{address}]"):
        with pytest.raises(EgressDeniedError):
            policy.check_url(f"http://{host}:8080/path")
