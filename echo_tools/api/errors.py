"""The one error contract of the HTTP API: a status per kind of failure and a JSON body.

Every error answers `{"error_type", "message", "tool_id", "field"}`: 404 unknown tool or route, 422 invalid
input (the field path named), 409 name clash or a tool read-only to HTTP callers, 403 denied (permission,
disabled tool, forbidden registration, an action outside the principal's grants), 429 budget spent, 401 missing or wrong API key, 413 body too large, 421 a `Host` the
keyless server does not answer, 415 a body that is not JSON on a keyless server's state-changing route,
503 storage folder unusable (read-only, full, locked), 504 timeout,
502 tool failure.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from echo_tools import errors as tool_errors
from echo_tools.errors import ToolError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from echo_tools.models import ToolResult

logger = logging.getLogger("echo_tools.api")

STATUS_BY_ERROR_TYPE = {
    "not_found": 404,
    "disabled": 403,
    "permission_denied": 403,
    "validation": 422,
    "conflict": 409,
    "read_only": 409,
    "owned": 409,
    "misdirected": 421,
    "unauthorized": 401,
    "too_large": 413,
    "unsupported_media_type": 415,
    "timeout": 504,
    "budget": 429,
    "execution": 502,
    "output_validation": 502,
    "storage": 503,
    "internal": 500,
    "denied": 403,  # a hook denied the call (echo_tools.governance)
    "rejected": 403,  # a person rejected the call
    "approval_required": 202,  # accepted, waiting for a person: `result.metadata.approval_id`
    "quota": 429,  # `result.metadata.retry_after_s`
}


class ApiError(Exception):
    """An error the API answers with its contract body; routes raise it, a handler renders it."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        *,
        tool_id: str | None = None,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.tool_id = tool_id
        self.field = field
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        return {
            "error_type": self.error_type,
            "message": self.message,
            "tool_id": self.tool_id,
            "field": self.field,
            **self.extra,
        }


def error_body(
    error_type: str, message: str, tool_id: str | None = None, field: str | None = None
) -> dict[str, Any]:
    """The contract body without raising."""
    return ApiError(0, error_type, message, tool_id=tool_id, field=field).body()


# most specific class first, the first match wins; any other error answers its `error_type`'s status
_KIND_BY_CLASS: tuple[tuple[type[ToolError], int, str], ...] = (
    (tool_errors.ToolNameConflictError, 409, "conflict"),
    (tool_errors.ToolReadOnlyError, 409, "read_only"),
    (tool_errors.ToolNotFoundError, 404, "not_found"),
    (tool_errors.ToolDisabledError, 403, "disabled"),
    (tool_errors.ToolPermissionError, 403, "permission_denied"),
    (tool_errors.ToolTimeoutError, 504, "timeout"),
    (tool_errors.ToolBudgetError, 429, "budget"),
    # the server's folder, not the caller's request: read-only, full or locked; worth a retry later
    (tool_errors.ToolStorageError, 503, "storage"),
    (tool_errors.ToolValidationError, 422, "validation"),
    (tool_errors.ToolRegistrationError, 422, "validation"),
)


def from_tool_error(exc: ToolError) -> ApiError:
    """The `ApiError` of a raised `ToolError` (most specific class first)."""
    status, kind = _status_and_kind(exc)
    return ApiError(status, kind, exc.message, tool_id=exc.tool_id, field=exc.field)


def _status_and_kind(exc: ToolError) -> tuple[int, str]:
    for cls, status, kind in _KIND_BY_CLASS:
        if isinstance(exc, cls):
            return status, kind
    return STATUS_BY_ERROR_TYPE.get(exc.error_type, 502), exc.error_type


def from_failed_result(result: ToolResult) -> ApiError:
    """The `ApiError` of a failed `ToolResult`; the whole result rides along under `result`."""
    kind = result.error_type or "execution"
    status = STATUS_BY_ERROR_TYPE.get(kind, 502)
    message = result.error or f"Tool {result.tool_id!r} failed"
    field = result.error_field  # the field the error names travels as data, never parsed from the text
    return ApiError(
        status,
        kind,
        message,
        tool_id=result.tool_id or None,
        field=field,
        extra={"result": result.model_dump(mode="json")},
    )


def describe_request_errors(errors: Any) -> tuple[str, str | None]:
    """A readable message and the first field path of FastAPI's request validation errors."""
    parts: list[str] = []
    first: str | None = None
    for error in list(errors)[:5]:
        loc = ".".join(str(p) for p in error.get("loc", ()))
        first = first or loc or None
        value = error.get("input")
        shown = f" (got {value!r:.60})" if value is not None and not isinstance(value, (dict, list)) else ""
        parts.append(f"{loc or '(request)'}: {error.get('msg', 'invalid')}{shown}")
    return "; ".join(parts) or "The request is invalid", first


def contract_response(request: Any, exc: Exception) -> Any:
    """The JSON response of `exc` under the contract, or None when `exc` is not one of ours."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    if isinstance(exc, ToolError):
        exc = from_tool_error(exc)
    if isinstance(exc, ApiError):
        return JSONResponse(exc.body(), status_code=exc.status)
    if isinstance(exc, RequestValidationError):
        message, field = describe_request_errors(exc.errors())
        params = getattr(request, "path_params", {}) or {}
        tool_id = params.get("tool_id") or params.get("name")
        return JSONResponse(error_body("validation", message, tool_id, field), status_code=422)
    return None


def contract_route_class() -> type:
    """An `APIRoute` class whose handlers answer `ApiError`, `ToolError` and request validation errors
    with the contract, so the router keeps it when mounted into another app (EchoAI's gateway)."""
    from fastapi.routing import APIRoute

    class ContractRoute(APIRoute):
        def get_route_handler(self) -> Any:
            handler = super().get_route_handler()

            async def contract_handler(request: Any) -> Any:
                try:
                    return await handler(request)
                except Exception as exc:
                    response = contract_response(request, exc)
                    if response is None:
                        raise
                    return response

            return contract_handler

    return ContractRoute


def install_error_handlers(app: FastAPI) -> None:
    """Render unknown routes, wrong methods and crashes of the whole app as the contract too."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.requests import Request

    async def on_ours(request: Request, exc: Exception) -> Any:
        return contract_response(request, exc)

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kinds = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 413: "too_large"}
        kind = kinds.get(exc.status_code, "http_error")
        message = (
            f"No route {request.method} {request.url.path}" if exc.status_code == 404 else str(exc.detail)
        )
        return JSONResponse(
            error_body(kind, message), status_code=exc.status_code, headers=getattr(exc, "headers", None)
        )

    async def on_crash(request: Request, exc: Exception) -> JSONResponse:
        # boundary: an unexpected error must answer the contract body, never a bare traceback
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body("internal", f"Internal error: {type(exc).__name__}"), status_code=500)

    app.add_exception_handler(ApiError, on_ours)
    app.add_exception_handler(ToolError, on_ours)
    app.add_exception_handler(RequestValidationError, on_ours)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_crash)
