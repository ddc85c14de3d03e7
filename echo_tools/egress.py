"""One way out: the egress policy (which hosts outbound requests may reach) and the one client that
every outbound request goes through (`egress_client`).

By default loopback, private, link-local (169.254.0.0/16, the cloud metadata address), multicast and
reserved addresses are refused: a tool definition must not turn the server into a proxy into its own
network. Each is allowed only when the executor is configured so (tests and local demos allow loopback).
The client resolves each host once, checks every address, connects to the address it checked and decodes
bodies under a bound (`echo_tools.egress_transport`), so a DNS answer that changes between a check and the
connection, or a compressed body, cannot get past the policy.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from echo_tools.errors import EgressDeniedError, ToolRegistrationError

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx
    from aiohttp.abc import AbstractResolver

    from echo_tools.models import ToolDef

# headers that set the request's framing or routing (RFC 9110 §7.2, §8.6; RFC 9112 §6, §9.6; hop-by-hop
# headers): the client sets them, a tool definition or a tool's argument never does
FRAMING_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te",
     "trailer", "upgrade", "proxy-authenticate", "proxy-authorization"}
)  # fmt: skip

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class EgressPolicy:
    """What outbound HTTP may reach.

    Args:
        allow_loopback: allow 127.0.0.0/8 and ::1 (local servers, tests, demos).
        allow_private: allow 10/8, 172.16/12, 192.168/16, fc00::/7 and carrier-grade NAT.
        allow_link_local: allow 169.254.0.0/16 and fe80::/10, the cloud metadata range. Rarely right.
        allowed_hosts: host names or CIDRs always allowed (checked before the range rules).
        denied_hosts: host names or CIDRs always denied.
        allowed_schemes: URL schemes allowed.
    """

    allow_loopback: bool = False
    allow_private: bool = False
    allow_link_local: bool = False
    allowed_hosts: tuple[str, ...] = ()
    denied_hosts: tuple[str, ...] = ()
    allowed_schemes: tuple[str, ...] = ("http", "https")
    max_response_bytes: int = 10 * 1024 * 1024
    _allowed_nets: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        default=(), init=False, repr=False, compare=False
    )
    _denied_nets: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        default=(), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        # lists are accepted (JSON settings give lists) but stored as tuples, so the policy stays hashable
        for name in ("allowed_hosts", "denied_hosts", "allowed_schemes"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = (value,)
            object.__setattr__(self, name, tuple(str(v).lower().rstrip(".") for v in value))
        if self.max_response_bytes <= 0:
            raise ValueError(f"max_response_bytes must be positive, got {self.max_response_bytes!r}")
        object.__setattr__(self, "_allowed_nets", _networks(self.allowed_hosts))
        object.__setattr__(self, "_denied_nets", _networks(self.denied_hosts))

    @classmethod
    def local(cls) -> EgressPolicy:
        """A policy for local development and tests: loopback allowed, everything private still denied."""
        return cls(allow_loopback=True)

    def check_url(self, url: str) -> None:
        """Raise `EgressDeniedError` when `url`'s scheme or literal host is refused (no DNS lookup)."""
        host = self._host_of(url)
        self._check_host_name(host, url)
        address = literal_address(host)
        if address is not None:
            self.check_address(address, url)

    def check_resolved(self, url: str) -> None:
        """`check_url`, then resolve the host name and check every address it resolves to."""
        self.check_url(url)
        host = self._host_of(url)
        if literal_address(host) is not None:
            return
        if host.lower().rstrip(".") in (h.lower() for h in self.allowed_hosts):
            return
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError as exc:
            raise EgressDeniedError(f"Host {host!r} of {url!r} does not resolve: {exc}") from exc
        for info in infos:
            self.check_address(ipaddress.ip_address(info[4][0]), url)

    def check_address(self, address: IPAddress, url: str = "") -> None:
        """Raise `EgressDeniedError` when `address` is in a refused range."""
        address = _embedded_ipv4(address)
        if any(address in net for net in self._denied_nets):
            raise EgressDeniedError(f"Egress to {address} ({url}) is denied by denied_hosts")
        if any(address in net for net in self._allowed_nets):
            return
        reason = self._refusal(address)
        if reason:
            hint = _hint(reason)
            raise EgressDeniedError(
                f"Egress to {address} ({url}) is denied: {reason} addresses are not allowed by the egress "
                f"policy{hint}"
            )

    def allows_host_name(self, host: str) -> bool:
        """True when `host` is listed by name in `allowed_hosts` (its addresses are then not checked)."""
        return host.lower().rstrip(".") in self.allowed_hosts

    def _refusal(self, address: IPAddress) -> str | None:
        if address.is_loopback:
            return None if self.allow_loopback else "loopback"
        if address.is_link_local:
            return None if self.allow_link_local else "link-local"
        if address.is_multicast or address.is_unspecified or address.is_reserved:
            return "multicast, unspecified or reserved"
        shared = ipaddress.ip_network("100.64.0.0/10")
        if address.is_private or (isinstance(address, ipaddress.IPv4Address) and address in shared):
            return None if self.allow_private else "private"
        return None

    def _host_of(self, url: str) -> str:
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            raise EgressDeniedError(f"URL {url!r} cannot be parsed: {exc}") from exc
        if parts.scheme.lower() not in self.allowed_schemes:
            raise EgressDeniedError(
                f"URL {url!r} has scheme {parts.scheme!r}; allowed schemes are {list(self.allowed_schemes)!r}"
            )
        host = parts.hostname
        if not host:
            raise EgressDeniedError(f"URL {url!r} has no host")
        return host

    def _check_host_name(self, host: str, url: str) -> None:
        lowered = host.lower().rstrip(".")
        if lowered in (h.lower() for h in self.denied_hosts):
            raise EgressDeniedError(f"Egress to host {host!r} ({url}) is denied by denied_hosts")
        if self.allows_host_name(host):
            return
        if lowered == "localhost" or lowered.endswith(".localhost"):
            if not self.allow_loopback:
                raise EgressDeniedError(
                    f"Egress to {host!r} ({url}) is denied: loopback addresses are not allowed by the egress "
                    f"policy{_hint('loopback')}"
                )
        if lowered in ("metadata.google.internal", "metadata") and not self.allow_link_local:
            raise EgressDeniedError(f"Egress to {host!r} ({url}) is denied: cloud metadata host")


_FLAGS = {"loopback": "allow_loopback", "private": "allow_private", "link-local": "allow_link_local"}
_ENV_FLAGS = {"loopback": "ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "private": "ECHO_TOOLS_EGRESS_ALLOW_PRIVATE"}


def framing_header_refusal(name: Any) -> str | None:
    """Why a request header named `name` may not be set by a tool (framing, routing, hop-by-hop), or None."""
    if isinstance(name, str) and name.strip().lower() in FRAMING_HEADERS:
        return (
            f"header {name!r} sets the request's framing or routing, which only the HTTP client sets "
            f"(refused: {', '.join(sorted(FRAMING_HEADERS))})"
        )
    return None


def check_tool_headers(tool: ToolDef) -> None:
    """Refuse an `api` tool whose `execution_config.headers`, or whose arguments sent as headers, name a
    framing or routing header (`Host`, `Content-Length`, `Transfer-Encoding`, `Connection`, hop-by-hop).

    Raises:
        ToolRegistrationError: naming the field and the header.
    """
    config = tool.execution_config
    named = [(f"execution_config.headers.{k}", k) for k in (config.get("headers") or {})]
    arguments = config.get("arguments")
    if isinstance(arguments, dict):
        named += [
            (f"execution_config.arguments.{key}", spec.get("name"))
            for key, spec in arguments.items()
            if isinstance(spec, dict) and spec.get("in") == "header"
        ]
    for field_name, header in named:
        refusal = framing_header_refusal(header)
        if refusal:
            raise ToolRegistrationError(
                f"Tool {tool.tool_id!r}: {refusal}", tool_id=tool.tool_id, field=field_name
            )


def _hint(reason: str) -> str:
    flag = _FLAGS.get(reason)
    if flag is None:
        return ""
    env = _ENV_FLAGS.get(reason)
    also = (
        f"; the shipped web tools (http_request, web_search) read {env}=1 from the environment" if env else ""
    )
    serve = "; `echo-tools serve --allow-loopback-egress` for api tools" if reason == "loopback" else ""
    return f"; EgressPolicy({flag}=True) allows them{serve}{also}"


def egress_client(
    policy: EgressPolicy,
    *,
    max_body_bytes: int | None = None,
    resolver: AbstractResolver | None = None,
    wrap: Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport] | None = None,
    max_connections: int = 100,
    library: str = "httpx",
    **options: Any,
) -> Any:
    """The one outbound HTTP client: an `httpx.AsyncClient` whose every request (redirect hops and auth
    flows included) passes `policy` on the address it connects to, and whose bodies are decoded under
    `max_body_bytes` (default `policy.max_response_bytes`; past it reading fails with
    `ResponseTooLargeError`).

    With `library="httpx2"` the same client as an `httpx2.AsyncClient`, the HTTP client the MCP SDK 2.x
    takes (`echo_tools.egress_transport.Httpx2Bridge`: the same transport underneath, so the same policy,
    pinning, bounds and redirect rules; `options` are then httpx2's, its `auth` an `httpx2.Auth`).

    Args:
        policy: the egress policy.
        max_body_bytes: the decoded size at which any body is cut.
        resolver: an aiohttp `AbstractResolver` to ask for addresses (default: the system's).
        wrap: wraps the transport (a caller that watches its streams).
        max_connections: the connection pool's size.
        library: `"httpx"` or `"httpx2"`: which client class is returned.
        options: `httpx.AsyncClient` options (`headers`, `timeout`, `auth`, `follow_redirects`).
    """
    import httpx

    from echo_tools.bounded_body import ACCEPT_ENCODING
    from echo_tools.egress_transport import EgressTransport, Httpx2Bridge

    if library not in ("httpx", "httpx2"):
        raise ValueError(f"library must be 'httpx' or 'httpx2', got {library!r}")
    transport: httpx.AsyncBaseTransport = EgressTransport(
        policy, max_body_bytes=max_body_bytes, resolver=resolver, max_connections=max_connections
    )
    if wrap is not None:
        transport = wrap(transport)
    headers = {"Accept-Encoding": ACCEPT_ENCODING, **(options.pop("headers", None) or {})}
    options.setdefault("follow_redirects", False)
    if library == "httpx2":
        import httpx2

        return httpx2.AsyncClient(
            transport=Httpx2Bridge(transport), trust_env=False, headers=headers, **options
        )
    return httpx.AsyncClient(transport=transport, trust_env=False, headers=headers, **options)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    # IPv6 forms that carry an IPv4 address (mapped, 6to4, NAT64) are judged by that IPv4 address
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def literal_address(host: str) -> IPAddress | None:
    """The IP address a URL host names literally, or None for a host name.

    Besides dotted quads and IPv6 this catches the forms C resolvers accept (`2130706433`, `0x7f.1`,
    `0177.0.0.1`), which `ipaddress` alone would wrongly treat as host names.
    """
    host = host.rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host) and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _networks(entries: Iterable[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    nets = []
    for entry in entries:
        try:
            nets.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue  # a host name, matched by name instead
    return tuple(nets)
