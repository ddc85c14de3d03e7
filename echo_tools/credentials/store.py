"""CredentialStore: named secrets for third-party APIs, encrypted at rest, applied to requests at call time.

One file, `<storage>/credentials.enc`, holds every credential as a Fernet token (the `cryptography`
library's authenticated encryption) under the key in `ECHO_TOOLS_SECRET_KEY`; names and types stay readable
so `list()` needs no key. Writes are atomic (temp file, fsync, rename) under a file lock. A secret never
leaves this module except as the header or query parameter of the request it authenticates (and, for an
MCP server's OAuth tokens, to that server's token storage in `echo_tools.mcp.auth`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from filelock import FileLock, Timeout

from echo_tools.credentials.fields import (
    NEW_KEY_HINT,
    SECRET_KEY_ENV,
    CredentialError,
    check_credential,
    check_name,
    new_key,
)
from echo_tools.credentials.oauth import basic_auth, fetch_token
from echo_tools.credentials.per_user import listed_order, shared_names, split_key, user_key
from echo_tools.errors import ToolStorageError
from echo_tools.redaction import remember_credential

__all__ = [
    "SECRET_KEY_ENV",
    "STORE_FILE",
    "AppliedCredential",
    "CredentialError",
    "CredentialStore",
    "check_credential",
    "check_name",
    "new_key",
]

if TYPE_CHECKING:
    import httpx

    from echo_tools.egress import EgressPolicy

logger = logging.getLogger("echo_tools.credentials")

STORE_FILE = "credentials.enc"  # not *.json: the tool folder's JSON files are tools (EchoAI globs them)
LOCK_FILE = ".credentials.lock"
FORMAT = "echo-tools-credentials/1"
MAX_STORE_BYTES = 4 * 1024 * 1024
TOKEN_MARGIN_S = 30.0  # refresh this long before expiry (at most a tenth of the token's lifetime)


class _QueryRedaction(logging.Filter):
    """Masks query-string secrets in the `httpx` logger's request lines ("HTTP Request: GET <url>")."""

    def __init__(self) -> None:
        super().__init__("httpx")
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            text = record.getMessage()
            masked = text
            for secret in self.secrets:
                masked = masked.replace(secret, "[redacted]")
                masked = masked.replace(quote(secret, safe=""), "[redacted]")
            if masked != text:
                record.msg, record.args = masked, ()
        return True


_QUERY_REDACTION = _QueryRedaction()


def _redact_in_client_logs(secret: str) -> None:
    # an api key sent in the query is part of the URL httpx logs at INFO; installed once, on that logger only
    if not _QUERY_REDACTION.secrets:
        logging.getLogger("httpx").addFilter(_QUERY_REDACTION)
    _QUERY_REDACTION.secrets.add(secret)


@dataclass(frozen=True)
class AppliedCredential:
    """What a credential adds to a request: headers and query parameters, for one origin only.

    The origin is that of the tool's own URL: a redirect to another host gets neither (httpx drops
    `Authorization` on such redirects for the same reason).
    """

    origin: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    query: dict[str, str] = field(default_factory=dict, repr=False)

    def add_to(self, url: str, headers: dict[str, str], query: Any) -> tuple[dict[str, str], Any]:
        """`(headers, query)` with the credential added when `url` has the credential's origin.

        `query` is a dict or a list of `(name, value)` pairs, and is returned in the same shape.
        """
        if _origin(url) != self.origin:
            return headers, query
        if not self.query:
            return {**headers, **self.headers}, query
        if isinstance(query, list):  # an argument of the credential's name never rides along with it
            kept = [(k, v) for k, v in query if k not in self.query]
            return {**headers, **self.headers}, [*kept, *self.query.items()]
        return {**headers, **self.headers}, {**query, **self.query}


def _kept(old: Mapping[str, Any], new: Mapping[str, Any], owner: str | None) -> dict[str, Any]:
    """What a replaced entry keeps: its bound hosts (unless the new credential lists its own), its owner."""
    kept: dict[str, Any] = {}
    if "hosts" not in new and isinstance(old.get("hosts"), list):
        kept["hosts"] = old["hosts"]
    if owner is not None or isinstance(old.get("owner"), str):
        kept["owner"] = owner if owner is not None else old["owner"]
    return kept


def _origin(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{port}"


@dataclass
class _Token:
    fingerprint: str
    value: str = field(repr=False)
    expires: float


class CredentialStore:
    """Named credentials: `set`, `list` (names and types), `remove`, and `apply` at call time.

    Args:
        storage_dir: the tool storage folder; the store is `credentials.enc` in it. None keeps the
            credentials in this process's memory only (nothing is written, no key is needed).
        secrets: a blob store (`get`/`put` bytes by name, such as PostgreSQL's `PgSecretStore`) that
            keeps the encrypted `credentials.enc` instead of the folder; every replica then shares it.
        key: the Fernet key; default `ECHO_TOOLS_SECRET_KEY`, read when first needed.
        egress: the policy OAuth2 token URLs are checked against when no other is given to `apply`.
        clock: monotonic seconds (tests replace it to expire tokens without waiting).
    """

    def __init__(
        self,
        storage_dir: str | Path | None = None,
        *,
        key: str | bytes | None = None,
        egress: EgressPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        secrets: Any = None,
    ) -> None:
        self._secrets = secrets
        in_folder = storage_dir is not None and secrets is None
        self.path = (
            Path(storage_dir).expanduser().resolve() / STORE_FILE if in_folder and storage_dir else None
        )
        self._in_memory = self.path is None and secrets is None
        self.where = str(self.path) if self.path else f"database secret {STORE_FILE}" if secrets else "memory"
        self._key = key
        self.egress = egress
        self.clock = clock
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._file_lock = FileLock(str(self.path.parent / LOCK_FILE), timeout=30) if self.path else None
        self._loaded: tuple[tuple[int, int, int] | None, dict[str, Any]] = (None, {})
        self._plain: dict[str, tuple[str, dict[str, Any]]] = {}  # name -> (its token, decrypted)
        self._tokens: dict[str, _Token] = {}
        self.warned: set[str] = set()  # unknown names already warned about at registration
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]]
        self._locks = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"CredentialStore({self.where!r}, names={sorted(self._entries())!r})"

    # -- the key ---------------------------------------------------------------------------------------

    def _fernet(self) -> Any:
        from cryptography.fernet import Fernet

        key = self._key if self._key is not None else os.environ.get(SECRET_KEY_ENV)
        if not key:
            raise CredentialError(
                f"{SECRET_KEY_ENV} is not set, so credentials cannot be stored or read encrypted; "
                + NEW_KEY_HINT,
                field=SECRET_KEY_ENV,
            )
        try:
            return Fernet(key)
        except (ValueError, TypeError) as exc:
            raise CredentialError(
                f"{SECRET_KEY_ENV} is not a valid Fernet key (32 url-safe base64-encoded bytes); "
                + NEW_KEY_HINT,
                field=SECRET_KEY_ENV,
            ) from exc

    def _decrypt(self, fernet: Any, name: str, token: str) -> dict[str, Any]:
        from cryptography.fernet import InvalidToken

        try:
            data = json.loads(fernet.decrypt(token.encode("ascii")))
        except InvalidToken as exc:
            raise CredentialError(
                f"{SECRET_KEY_ENV} does not decrypt credential {name!r} in {self.where!r}: the store was "
                f"written with another key. Set the key it was written with; nothing was changed",
                field=SECRET_KEY_ENV,
            ) from exc
        except (ValueError, UnicodeError) as exc:
            raise CredentialError(
                f"credential {name!r} in {self.where!r} is damaged and cannot be read", field=name
            ) from exc
        if not isinstance(data, dict):
            raise CredentialError(f"credential {name!r} in {self.where!r} is damaged", field=name)
        return data

    # -- the file --------------------------------------------------------------------------------------

    def _signature(self) -> tuple[int, int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _entries(self) -> dict[str, Any]:
        """name -> stored entry (`{"type", "secret"}` on disk, the credential itself in memory)."""
        if self._in_memory:
            return self._memory
        if self._secrets is not None:  # no cheap change check: read the row each time
            return self._read_file()
        signature = self._signature()
        cached_signature, entries = self._loaded
        if signature is not None and signature == cached_signature:
            return entries
        entries = self._read_file() if signature is not None else {}
        self._loaded = (signature, entries)
        return entries

    def _read_file(self) -> dict[str, Any]:
        try:
            if self._secrets is not None:
                raw = self._secrets.get(STORE_FILE)
                if raw is None:
                    return {}
                raw = raw[: MAX_STORE_BYTES + 1]
            else:
                assert self.path is not None
                raw = self.path.read_bytes()[: MAX_STORE_BYTES + 1]
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ToolStorageError(f"credential store {self.where!r} cannot be read: {exc}") from exc
        try:
            if len(raw) > MAX_STORE_BYTES:
                raise ValueError(f"larger than {MAX_STORE_BYTES} bytes")
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            entries = data.get("credentials")
            if not isinstance(entries, dict) or not all(
                isinstance(e, dict) and isinstance(e.get("secret"), str) and isinstance(e.get("type"), str)
                for e in entries.values()
            ):
                raise ValueError("its credentials are not {name: {type, secret}} entries")
        except ValueError as exc:
            raise CredentialError(
                f"credential store {self.where!r} is damaged ({exc}); it is left as it is: "
                "move it aside to start a new one",
                field="credentials",
            ) from exc
        return entries

    def _write_file(self, entries: dict[str, Any]) -> None:
        from echo_tools.storage import atomic_write_json

        if self._secrets is not None:
            document = {"format": FORMAT, "credentials": entries}
            self._secrets.put(STORE_FILE, json.dumps(document, indent=2).encode("utf-8"))
            return
        assert self.path is not None
        atomic_write_json(self.path, {"format": FORMAT, "credentials": entries})
        try:
            os.chmod(self.path, 0o600)
        except OSError:
            pass  # a filesystem without modes; the content is encrypted anyway
        self._loaded = (self._signature(), entries)

    def _locked(self) -> Any:
        if self._file_lock is None:  # the database: each write is one transaction
            return contextlib.nullcontext()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
            return self._file_lock.acquire(poll_interval=0.002)
        except Timeout as exc:
            raise ToolStorageError(f"credential store {self.where!r} is locked by another writer") from exc

    # -- public API ------------------------------------------------------------------------------------

    def set(
        self,
        name: str,
        credential: Mapping[str, Any],
        *,
        owner: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, str]:
        """Store (or replace) a named credential; returns `{"name", "type", "status": "created"|"updated"}`.

        `owner` (a principal's name, `echo_tools.gate`) is recorded readable without the key; hosts the
        credential was bound to before (`bind_host`) stay unless the new one lists its own.

        With `user_id`, the credential is that end user's own: calls made for that user
        (`ToolContext.user_id`) use it before the shared one of the same name; no other call sees it.

        Raises:
            CredentialError: a field is missing or wrong (named, never its value), the key is unset
                (the message says how to make one) or is not the key the store was written with (nothing
                is overwritten).
        """
        check_name(name)
        name = user_key(name, user_id)  # an end user's own credential (`credentials.per_user`)
        clean = check_credential(name, credential)
        if self._in_memory:
            with self._lock:
                old = self._memory.get(name) or {}
                status = "updated" if old else "created"
                self._memory[name] = {**_kept(old, clean, owner), **clean}
                self._forget(name)
            return {"name": name, "type": clean["type"], "status": status}
        fernet = self._fernet()
        with self._lock, self._locked():
            entries = dict(self._read_file())
            for other, entry in entries.items():
                # every stored credential must open with this key, or writing would strand them
                self._decrypt(fernet, other, entry["secret"])
            status = "updated" if name in entries else "created"
            secret = fernet.encrypt(json.dumps(clean).encode("utf-8")).decode("ascii")
            # hosts and owner are readable without the key, so registrations and calls are checked against them
            entries[name] = {
                "type": clean["type"],
                "secret": secret,
                **_kept(entries.get(name) or {}, clean, owner),
            }
            if "hosts" in clean:
                entries[name]["hosts"] = clean["hosts"]
            self._write_file(entries)
            self._forget(name)
        return {"name": name, "type": clean["type"], "status": status}

    def list(self, *, owner: str | None = None) -> list[dict[str, str]]:
        """Every credential's name and type (and `user_id` for an end user's own), sorted by name (no key
        needed, no secret shown); `owner`: only those that principal stored (one stored without an owner is
        the operator's)."""
        listed = []
        for key, entry in sorted(self._entries().items(), key=listed_order):
            if owner is not None and (entry.get("owner") or "operator") != owner:
                continue
            name, user = split_key(key)
            listed.append({"name": name, "type": entry["type"], **({"user_id": user} if user else {})})
        return listed

    def type_of(self, name: str) -> str | None:
        """The type of the named credential, or None when there is none."""
        entry = self._entries().get(name) if isinstance(name, str) else None
        return entry["type"] if entry else None

    def hosts_of(self, name: str) -> builtins.list[str] | None:
        """The hosts the named credential may be sent to, or None when it names none (any host)."""
        entry = self._entries().get(name) if isinstance(name, str) else None
        hosts = entry.get("hosts") if entry else None
        return list(hosts) if isinstance(hosts, list) else None

    def refusal_for(self, name: str, url: str) -> str | None:
        """Why a tool registered over HTTP may not send credential `name` to `url`, or None.

        Such a tool could name any stored credential and a server of its choosing, so the credential must
        exist (one stored later must not go to a URL chosen before), list its `hosts`, and the URL's host
        must be one of them.
        """
        hosts = self.hosts_of(name)
        host = (urlsplit(url.replace("{", "").replace("}", "")).hostname or "").lower()
        if name not in self:
            hint = f' (with "hosts": [{host!r}])' if host else ""
            return (
                f"credential {name!r} does not exist; store it first{hint}, then register the tools naming it"
            )
        if hosts is None:
            return (
                f"credential {name!r} lists no hosts, so only local callers may attach it to tools; add "
                f'"hosts": [{host!r}] to it to allow tools sending it to {host!r}'
            )
        if host not in hosts:
            return f"credential {name!r} may be sent to hosts {hosts!r} only, not {host!r}"
        return None

    def owner_of(self, name: str) -> str | None:
        """The principal that stored the named credential (None: the operator, or no such credential)."""
        entry = self._entries().get(name) if isinstance(name, str) else None
        owner = entry.get("owner") if entry else None
        return owner if isinstance(owner, str) else None

    def bind_host(self, name: str, host: str) -> builtins.list[str]:
        """The hosts credential `name` may be sent to, fixing them to `[host]` when it has none yet: a
        credential goes only to the host of the first tool it is bound to, from then on."""
        host = host.lower().rstrip(".")
        with self._lock, self._locked():
            entries = self._memory if self._in_memory else dict(self._read_file())
            entry = entries.get(name)
            if entry is None:
                return []
            if not isinstance(entry.get("hosts"), list):
                entries[name] = {**entry, "hosts": [host]}
                if not self._in_memory:
                    self._write_file(entries)
            return list(entries[name]["hosts"])

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries()

    def remove(self, name: str, *, user_id: str | None = None) -> bool:
        """Forget a credential (no key needed; `user_id`: that end user's own); False when there was none."""
        name = user_key(name, user_id)
        if self._in_memory:
            with self._lock:
                self._forget(name)
                return self._memory.pop(name, None) is not None
        with self._lock, self._locked():
            entries = dict(self._read_file())
            if entries.pop(name, None) is None:
                return False
            self._write_file(entries)
            self._forget(name)
        return True

    def check_key(self) -> None:
        """Raise `CredentialError` (saying how to make one) when credentials could not be written now:
        the store is kept on disk or in a database and the key is missing or malformed."""
        if not self._in_memory:
            self._fernet()

    def api_key_in(self, name: str) -> str | None:
        """Where the named `api_key` credential puts its key (`header` or `query`), else None."""
        if self.type_of(name) != "api_key":
            return None
        return str(self._credential(name)["in"])

    def forget_token(self, name: str) -> None:
        """Drop the cached OAuth2 token of credential `name` (the server refused it): the next use fetches one."""
        self._tokens.pop(name, None)

    def load_mcp_oauth(self, name: str) -> dict[str, Any] | None:
        """The stored OAuth state of an MCP server (`mcp_oauth` credential `name`), or None when there is none.

        Read by `echo_tools.mcp.auth` (tokens for the MCP SDK) and `governance.connect` (renews `oauth_user`).

        Raises:
            CredentialError: `name` is a credential of another type, or the store cannot be read.
        """
        if name not in self:
            return None
        cred = self._credential(name)
        if cred["type"] not in ("mcp_oauth", "oauth_user"):
            raise CredentialError(
                f"credential {name!r} is of type {cred['type']!r}, not the 'mcp_oauth' an MCP server's OAuth "
                "tokens are kept in; choose another name for the server's tokens",
                field="oauth.credential",
            )
        return dict(cred)

    def _forget(self, name: str) -> None:
        self.warned.discard(name)
        self._plain.pop(name, None)
        self._tokens.pop(name, None)

    def _credential(self, name: str, tool_id: str | None = None) -> dict[str, Any]:
        entries = self._entries()
        entry = entries.get(name)
        if entry is None:
            whose = f"Tool {tool_id!r}: " if tool_id else ""
            raise CredentialError(
                f"{whose}credential {name!r} does not exist; add it with "
                f"`echo-tools credentials set {name} ...` (known: {shared_names(entries) or 'none'})",
                tool_id=tool_id,
                field="execution_config.credential",
            )
        if self._in_memory:
            return dict(entry)
        cached = self._plain.get(name)
        if cached is not None and cached[0] == entry["secret"]:
            return cached[1]
        plain = self._decrypt(self._fernet(), name, entry["secret"])
        self._plain[name] = (entry["secret"], plain)
        return plain

    async def apply(
        self,
        name: str,
        url: str,
        *,
        tool_id: str | None = None,
        egress: EgressPolicy | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> AppliedCredential:
        """The headers and query parameters that authenticate a request to `url` with credential `name`.

        An OAuth2 client-credentials token is fetched from its `token_url` (under the egress policy),
        cached until shortly before it expires, and fetched again after.

        Raises:
            CredentialError: no such credential, or the store cannot be read with the key.
            ToolExecutionError: the OAuth2 token endpoint failed (named; no secret in the message).
        """
        cred = self._credential(name, tool_id)
        remember_credential(cred)  # its values are hidden wherever a service echoes them (redaction)
        kind = cred["type"]
        origin = _origin(url)
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
        hosts = self.hosts_of(name) or cred.get("hosts") or self.bind_host(name, host)
        if host not in hosts:
            raise CredentialError(
                f"{f'Tool {tool_id!r}: ' if tool_id else ''}credential {name!r} may be sent to hosts "
                f"{hosts!r} only, not {host!r}",
                tool_id=tool_id,
                field="execution_config.credential",
            )
        if kind == "mcp_oauth":
            raise CredentialError(
                f"{f'Tool {tool_id!r}: ' if tool_id else ''}credential {name!r} holds the OAuth tokens of MCP "
                f"server {cred['server_url']!r}; only that server's connections use it",
                tool_id=tool_id,
                field="execution_config.credential",
            )
        if kind in ("bearer", "oauth_user"):  # a user's OAuth connection: its access token
            return AppliedCredential(origin, {"Authorization": f"Bearer {cred['token']}"})
        if kind == "basic":
            return AppliedCredential(
                origin, {"Authorization": basic_auth(cred["username"], cred["password"])}
            )
        if kind == "api_key":
            if cred["in"] == "query":
                _redact_in_client_logs(cred["value"])
                return AppliedCredential(origin, query={cred["name"]: cred["value"]})
            return AppliedCredential(origin, {cred["name"]: cred["value"]})
        token = await self._oauth2_token(name, cred, egress or self.egress, client, tool_id)
        return AppliedCredential(origin, {"Authorization": f"Bearer {token}"})

    # -- OAuth2 client credentials ---------------------------------------------------------------------

    def _cached_token(self, name: str, fingerprint: str) -> str | None:
        token = self._tokens.get(name)
        if token is not None and token.fingerprint == fingerprint and token.expires > self.clock():
            return token.value
        return None

    def _loop_lock(self, name: str) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._lock:
            locks = self._locks.setdefault(loop, {})
            return locks.setdefault(name, asyncio.Lock())

    async def _oauth2_token(
        self,
        name: str,
        cred: dict[str, Any],
        egress: EgressPolicy | None,
        client: httpx.AsyncClient | None,
        tool_id: str | None,
    ) -> str:
        fingerprint = hashlib.sha256(json.dumps(cred, sort_keys=True).encode()).hexdigest()
        found = self._cached_token(name, fingerprint)
        if found is not None:
            return found
        async with self._loop_lock(name):  # one fetch at a time per credential; the others reuse it
            found = self._cached_token(name, fingerprint)
            if found is not None:
                return found
            value, lifetime = await fetch_token(name, cred, egress, client, tool_id)
            margin = min(TOKEN_MARGIN_S, lifetime / 10)
            self._tokens[name] = _Token(fingerprint, value, self.clock() + lifetime - margin)
            return value
