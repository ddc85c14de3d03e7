"""The third-party routes of the HTTP API: `POST /tools/import/openapi` and `/tools/credentials`.

Credentials go in and never come out: every answer names credentials and their types only. A spec is
accepted as a JSON object or an http(s) URL (fetched under the executor's egress policy), never as a path
on the server. Errors follow the API's contract (`echo_tools.api.errors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Body
from fastapi import Path as PathParam
from pydantic import BaseModel, Field

from echo_tools.api.errors import ApiError
from echo_tools.api.owners import refuse_unowned, refuse_unowned_provider, viewer
from echo_tools.api.shapes import list_item
from echo_tools.errors import EgressDeniedError
from echo_tools.gate import Principal

if TYPE_CHECKING:
    from echo_tools.api.state import ApiState

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class OpenApiImportRequest(BaseModel):
    """`POST /tools/import/openapi`: the document (object or URL) and how to import it."""

    spec: dict[str, Any] | str = Field(description="the OpenAPI/Swagger document, or its http(s) URL")
    provider: str = Field(max_length=48)
    base_url: str | None = Field(None, max_length=2000)
    credential: str | None = Field(None, max_length=64)
    operations: list[str] | None = Field(None, max_length=1000)


class CredentialRequest(BaseModel):
    """`POST /tools/credentials`: a named credential (`{"type": "bearer", "token": ...}` and so on)."""

    name: str = Field(pattern=NAME_PATTERN)
    credential: dict[str, Any]


class ConnectRequest(BaseModel):
    """`POST /tools/credentials/{name}/connect`: start a user's OAuth 2.1 connection (the authorization URL)."""

    user_id: str = Field(min_length=1, max_length=200)
    server_url: str = Field(max_length=2000)
    redirect_uri: str = Field(max_length=2000)
    scopes: list[str] | None = Field(None, max_length=50)


class ConnectFinish(BaseModel):
    """`POST /tools/credentials/{name}/connect/finish`: the `state` and `code` the redirect brought back."""

    state: str = Field(min_length=1, max_length=200)
    code: str = Field(min_length=1, max_length=2000)


def add_thirdparty_routes(router: APIRouter, state: ApiState, secured: list[Any] | None = None) -> None:
    """Add the routes to the `/tools` router (before its `/{tool_id}` routes, which would shadow them):
    an import needs the `import` action, the credential routes the `credentials` action."""
    gate = state.gate

    @router.post("/import/openapi", summary="Import an OpenAPI document as api tools")
    async def import_openapi_route(
        request: OpenApiImportRequest = Body(...), principal: Principal = gate.requires("import")
    ) -> dict[str, Any]:
        report = await anyio.to_thread.run_sync(_import, state, request, principal)
        return {
            "provider": request.provider,
            "tools": [list_item(t) for t in report.tools],
            "skipped": [{"pointer": where, "reason": why} for where, why in report.skipped],
            "disabled": report.disabled,
        }

    @router.get("/credentials", summary="The principal's credentials: names and types (never secrets)")
    async def list_credentials(principal: Principal = gate.requires("credentials")) -> list[dict[str, str]]:
        return list(state.registry.credentials.list(owner=viewer(principal)))

    @router.post("/credentials", summary="Store a credential (encrypted at rest)")
    async def set_credential(
        request: CredentialRequest = Body(...), principal: Principal = gate.requires("credentials")
    ) -> dict[str, str]:
        store = state.registry.credentials
        if request.name in store:
            refuse_unowned(
                principal, store.owner_of(request.name), f"Credential {request.name!r}", field="name"
            )

        def store_it() -> dict[str, str]:
            if request.name not in store:  # a new shared one: every call of a tool naming it would send it
                refuse_named_by_another(state.registry, principal, request.name)
            return store.set(request.name, request.credential, owner=principal.name)

        return dict(await anyio.to_thread.run_sync(store_it))

    add_connect_routes(router, state)

    @router.delete("/credentials/{name}", summary="Forget a credential")
    async def remove_credential(
        name: str = PathParam(..., pattern=NAME_PATTERN), principal: Principal = gate.requires("credentials")
    ) -> dict[str, str]:
        store = state.registry.credentials
        if name in store:
            refuse_unowned(principal, store.owner_of(name), f"Credential {name!r}", field="name")
        removed = await anyio.to_thread.run_sync(store.remove, name)
        if not removed:
            raise ApiError(404, "not_found", f"No credential is named {name!r}", field="name")
        return {"name": name, "status": "removed"}


def add_connect_routes(router: APIRouter, state: ApiState) -> None:
    """A user's own OAuth 2.1 connection (`echo_tools.governance.connect`): `connect` answers the
    authorization URL, `connect/finish` exchanges the code and stores the token as the user's credential.
    Both need the `credentials` action, and a principal that may act for users (or an admin)."""
    from echo_tools.credentials.fields import CredentialError
    from echo_tools.errors import ToolError
    from echo_tools.governance.connect import Connections, OwnedCredentialError, refuse_owned_slot

    connections = Connections(state.executor.egress)
    needs = state.gate.requires("credentials")

    def refuse_user(principal: Principal, user_id: str | None) -> None:
        if not (principal.grants.act_for_users or principal.grants.admin):
            raise ApiError(
                403,
                "permission_denied",
                f"principal {principal.name!r} may not connect credentials for user {user_id!r}: "
                "its grants do not include act_for_users",
                field="user_id",
            )

    @router.post("/credentials/{name}/connect", summary="Start a user's OAuth 2.1 connection")
    async def connect(
        name: str = PathParam(..., pattern=NAME_PATTERN),
        request: ConnectRequest = Body(...),
        principal: Principal = needs,
    ) -> dict[str, str]:
        refuse_user(principal, request.user_id)
        try:
            await anyio.to_thread.run_sync(
                refuse_owned_slot, state.registry.credentials, name, request.user_id, principal
            )
            started = await connections.start(
                name, request.user_id, request.server_url, request.redirect_uri,
                scopes=request.scopes, owner=principal.name,
            )  # fmt: skip
        except OwnedCredentialError as exc:
            raise ApiError(409, "owned", exc.message, field="user_id") from exc
        except CredentialError as exc:
            raise ApiError(422, "validation", exc.message, field=exc.field) from exc
        except ToolError as exc:
            raise ApiError(502, "execution", exc.message, field="server_url") from exc
        return {"name": name, "user_id": request.user_id, **started}

    @router.post("/credentials/{name}/connect/finish", summary="Finish a user's OAuth 2.1 connection")
    async def finish(
        name: str = PathParam(..., pattern=NAME_PATTERN),
        request: ConnectFinish = Body(...),
        principal: Principal = needs,
    ) -> dict[str, str]:
        refuse_user(principal, connections.pending_user(request.state))
        try:
            return await connections.finish(
                state.registry.credentials, name, request.state, request.code, principal=principal
            )
        except OwnedCredentialError as exc:
            raise ApiError(409, "owned", exc.message, field=exc.field) from exc
        except CredentialError as exc:
            status = 404 if exc.field == "state" else 422
            raise ApiError(
                status, "not_found" if status == 404 else "validation", exc.message, field=exc.field
            ) from exc
        except ToolError as exc:
            raise ApiError(502, "execution", exc.message, field="code") from exc


def refuse_named_by_another(registry: Any, principal: Principal, name: str) -> None:
    """409 `owned` when a tool another principal owns names credential `name` (which has no shared entry
    yet): creating it would make that tool send this principal's secret, for every user without their own.
    Reads the whole catalogue: call it on a worker thread."""
    if principal.grants.admin:
        return
    for tool in registry.list_all():
        if tool.execution_config.get("credential") == name and not principal.owns(tool.owner):
            refuse_unowned(
                principal,
                tool.owner,
                f"Credential {name!r}, which tool {tool.tool_id!r} names,",
                field="name",
            )


def _import(state: ApiState, request: OpenApiImportRequest, principal: Principal) -> Any:
    from echo_tools.openapi import base_url_of, import_openapi_report, load_document, spec_version

    spec = request.spec
    if isinstance(spec, str) and not spec.lower().startswith(("http://", "https://")):
        raise ApiError(
            422,
            "validation",
            "spec must be a JSON object or an http(s) URL, never a server path",
            field="spec",
        )
    document, fetched_from = load_document(spec, state.executor.egress)
    base_url = request.base_url or base_url_of(document, spec_version(document), fetched_from)
    for policy in (state.registry.egress, state.executor.egress):
        try:
            policy.check_url(base_url)
        except EgressDeniedError as exc:
            raise ApiError(403, "permission_denied", exc.message, field="base_url") from exc
    refuse_unowned_provider(principal, state.registry, request.provider)
    if request.credential:
        store = state.registry.credentials
        refusal = store.refusal_for(request.credential, base_url)
        if refusal:
            raise ApiError(403, "permission_denied", refusal, field="credential")
        owner = store.owner_of(request.credential)
        refuse_unowned(principal, owner, f"Credential {request.credential!r}", field="credential")
    return import_openapi_report(
        state.registry,
        document,
        provider=request.provider,
        base_url=base_url,
        credential=request.credential,
        operations=request.operations,
        owner=principal.name,
    )
