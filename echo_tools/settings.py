"""Settings of the HTTP API and the `echo-tools` command: storage, API key, limits, CORS.

A plain dataclass (no framework import), filled from arguments or from `ECHO_TOOLS_*` environment variables.
`check()` refuses the unsafe combinations before a server starts: a non-loopback bind without an API key,
and CORS `*` together with credentials.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_tools.errors import ToolConfigError

if TYPE_CHECKING:
    from echo_tools.gate import Principal

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_STORAGE = ".echo_tools"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_loopback_host(host: str) -> bool:
    """True for `localhost`, 127.0.0.0/8 and ::1; False for `0.0.0.0`, `::` and every other address."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ApiSettings:
    """How the HTTP API behaves.

    Args:
        api_key: the key clients send as `X-API-Key` or `Authorization: Bearer`; None disables the check
            (allowed only when `require_api_key` is False, the default for loopback binds).
        require_api_key: None means "required unless `host` is loopback".
        host, port: where `echo-tools serve` binds.
        storage_dir: the tool storage folder the server uses.
        agents_dir: EchoAI's agent JSON folder read by `GET /tools/agent/{agent_id}` (None: route answers 404).
        max_body_bytes: request bodies above this size get 413.
        cors_origins: allowed browser origins; empty disables CORS (the default).
        cors_allow_credentials: allow cookies/credentials cross-origin (never together with `*`).
        granted_permissions: permissions HTTP callers get (None: unrestricted, the tool's own limits apply).
        event_queue_size: events buffered per `/tools/events` client before the oldest are dropped.
        sse_ping_seconds: keep-alive comment interval of event streams.
        allowed_env: environment variables a tool registered over HTTP may reference as `${NAME}`
            (`echo-tools serve --allow-env NAME`); any other reference is refused at registration.
        principals: API keys (as `echo_tools.gate.hash_key(key)`) -> `Principal` (`serve --principals FILE`,
            `echo_tools.gate.load_principals`); `api_key`, when also given, is the operator.
    """

    api_key: str | None = None
    require_api_key: bool | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    storage_dir: Path | None = None
    agents_dir: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    cors_origins: tuple[str, ...] = ()
    cors_allow_credentials: bool = False
    granted_permissions: tuple[str, ...] | None = None
    event_queue_size: int = 1000
    sse_ping_seconds: float = 15.0
    allowed_env: tuple[str, ...] = ()
    principals: Mapping[str, Principal] | None = field(default=None, hash=False)

    @property
    def key_required(self) -> bool:
        """Whether requests must carry the API key."""
        if self.require_api_key is not None:
            return self.require_api_key
        return self.api_key is not None or bool(self.principals) or not is_loopback_host(self.host)

    def check(self) -> ApiSettings:
        """Raise `ToolConfigError` naming the setting when the combination is unsafe; else return self."""
        if self.key_required and not self.api_key and not self.principals:
            raise ToolConfigError(
                f"An API key is required to serve on host {self.host!r} (anything but loopback); "
                "pass --api-key or --principals, or set ECHO_TOOLS_API_KEY",
                field="api_key",
            )
        if self.api_key is not None and len(self.api_key) < 8:
            raise ToolConfigError("The API key must be at least 8 characters long", field="api_key")
        if "*" in self.cors_origins and self.cors_allow_credentials:
            raise ToolConfigError(
                "CORS origin '*' cannot be combined with credentials; list the allowed origins instead",
                field="cors_origins",
            )
        if self.max_body_bytes < 1024:
            raise ToolConfigError(
                f"max_body_bytes must be at least 1024, got {self.max_body_bytes!r}", field="max_body_bytes"
            )
        if not 1 <= self.port <= 65535:
            raise ToolConfigError(f"port must be within 1..65535, got {self.port!r}", field="port")
        for name in self.allowed_env:
            if not isinstance(name, str) or not ENV_NAME_PATTERN.fullmatch(name):
                raise ToolConfigError(
                    f"allowed_env entry {name!r} is not an environment variable name", field="allowed_env"
                )
        if self.event_queue_size < 1:
            raise ToolConfigError(
                f"event_queue_size must be positive, got {self.event_queue_size!r}", field="event_queue_size"
            )
        return self

    def with_changes(self, **changes: Any) -> ApiSettings:
        """A copy with some fields replaced (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ApiSettings:
        """Settings from `ECHO_TOOLS_API_KEY`, `ECHO_TOOLS_HOME`, `ECHO_TOOLS_AGENTS_DIR`,
        `ECHO_TOOLS_CORS_ORIGINS` and `ECHO_TOOLS_ALLOW_ENV` (comma-separated), `ECHO_TOOLS_MAX_BODY_BYTES`;
        `overrides` win."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if env.get("ECHO_TOOLS_API_KEY"):
            values["api_key"] = env["ECHO_TOOLS_API_KEY"]
        if env.get("ECHO_TOOLS_HOME"):
            values["storage_dir"] = Path(env["ECHO_TOOLS_HOME"])
        if env.get("ECHO_TOOLS_AGENTS_DIR"):
            values["agents_dir"] = Path(env["ECHO_TOOLS_AGENTS_DIR"])
        if env.get("ECHO_TOOLS_CORS_ORIGINS"):
            values["cors_origins"] = tuple(
                o.strip() for o in env["ECHO_TOOLS_CORS_ORIGINS"].split(",") if o.strip()
            )
        if env.get("ECHO_TOOLS_ALLOW_ENV"):
            values["allowed_env"] = tuple(
                n.strip() for n in env["ECHO_TOOLS_ALLOW_ENV"].split(",") if n.strip()
            )
        if env.get("ECHO_TOOLS_MAX_BODY_BYTES"):
            raw = env["ECHO_TOOLS_MAX_BODY_BYTES"]
            try:
                values["max_body_bytes"] = int(raw)
            except ValueError as exc:
                raise ToolConfigError(
                    f"ECHO_TOOLS_MAX_BODY_BYTES must be an integer, got {raw!r}", field="max_body_bytes"
                ) from exc
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclass(frozen=True)
class StorageChoice:
    """The storage folder a command uses (absolute) and how it was chosen, for messages that name it."""

    path: Path
    how: str

    def describe(self) -> str:
        """`/abs/path (how it was chosen)`: what errors and start-up lines print."""
        return f"{self.path} ({self.how})"


def find_storage(
    given: str | Path | None = None, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> StorageChoice:
    """The storage folder, found the way git finds `.git`: `given` (`--storage`), else `$ECHO_TOOLS_HOME`
    (an explicit setting wins over a found one, as `GIT_DIR` does), else the nearest `.echo_tools` folder
    from `cwd` upward, else the per-user default (`$XDG_DATA_HOME/echo-tools`, else
    `~/.local/share/echo-tools`). Two shells in two folders of one project see one catalogue, one run
    history and one set of approvals; `echo-tools init` makes a project's own `.echo_tools`."""
    env = os.environ if environ is None else environ
    if given:
        return StorageChoice(Path(given).expanduser().absolute(), "--storage")
    if env.get("ECHO_TOOLS_HOME"):
        return StorageChoice(Path(env["ECHO_TOOLS_HOME"]).expanduser().absolute(), "ECHO_TOOLS_HOME")
    here = (cwd or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_STORAGE
        if candidate.is_dir():
            how = "in the current folder" if folder == here else f"the nearest {DEFAULT_STORAGE} above {here}"
            return StorageChoice(candidate, how)
    data = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return StorageChoice(
        Path(data).expanduser().absolute() / "echo-tools",
        f"the per-user default: no {DEFAULT_STORAGE} in {here} or above it, ECHO_TOOLS_HOME unset",
    )


def default_storage_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The storage folder `find_storage` chooses when none is given."""
    return find_storage(None, environ).path
