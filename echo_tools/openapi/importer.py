"""Import an OpenAPI 3.0 / 3.1 or Swagger 2.0 document as `api` tools, one per operation.

`import_openapi(registry, spec, provider=...)` reads the document (a dict, a file, or a URL fetched under
the registry's egress policy with a size bound), resolves its local `$ref`s (remote ones are refused,
naming where), turns each operation's path, query and header parameters and JSON body into one input
schema, and registers the tools (`source: openapi`, tags `provider:<provider>` and `source:openapi`).
Importing again updates those tools and disables the ones whose operation disappeared. Form bodies
(urlencoded, multipart, Swagger `formData`) and common mistakes are handled by `echo_tools.openapi.wild`.
Operations that cannot be called faithfully (cookie parameters, unsupported styles) are skipped with the reason.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from echo_tools.errors import ToolReadOnlyError, ToolRegistrationError
from echo_tools.models import ToolDef, ToolSource, ToolStatus, ToolType, name_keys
from echo_tools.openapi.document import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_TOOLS,
    OpenApiError,
    Resolver,
    SkipOperation,
    base_url_of,
    load_document,
    spec_version,
)
from echo_tools.openapi.operations import (
    CALLABLE_METHODS,
    METHODS,
    Converter,
    Operation,
    operation_tool,
    operations_of,
    snake_case,
)

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry

__all__ = [
    "CALLABLE_METHODS",
    "METHODS",
    "PROVIDER_PATTERN",
    "ImportReport",
    "OpenApiError",
    "base_url_of",
    "find_provider_tool",
    "import_openapi",
    "import_openapi_report",
    "load_document",
    "snake_case",
    "spec_version",
    "template_tool",
]

logger = logging.getLogger("echo_tools.openapi")

PROVIDER_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")


@dataclass
class ImportReport:
    """What one import did: the tools registered or updated, operations skipped (pointer, reason),
    and ids of previously imported tools that were disabled because their operation is gone."""

    tools: list[ToolDef] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    # mistakes of the document that were normalised (`echo_tools.openapi.wild`): (pointer, what was done)
    warnings: list[tuple[str, str]] = field(default_factory=list)


# -- the import ---------------------------------------------------------------------------------------


def import_openapi(registry: ToolRegistry, spec: Any, **options: Any) -> list[ToolDef]:
    """Register one `api` tool per operation of an OpenAPI 3.0/3.1 or Swagger 2.0 document; returns the
    tools registered or updated, in document order.

    Takes the arguments of `import_openapi_report` (`provider`, `base_url`, `credential`, `operations`)
    and raises as it does; that one also says what was skipped and disabled.
    """
    return import_openapi_report(registry, spec, **options).tools


def import_openapi_report(
    registry: ToolRegistry,
    spec: Any,
    *,
    provider: str,
    base_url: str | None = None,
    credential: str | None = None,
    operations: Iterable[str] | None = None,
    owner: str | None = None,
) -> ImportReport:
    """`import_openapi`, also saying which operations were skipped and which old tools were disabled.

    Args:
        registry: where the tools are registered.
        spec: the document: a dict, a file path (JSON or YAML), or an http(s) URL (fetched under
            `registry.egress`, at most 10 MiB).
        provider: names the API (`shop`): ids are `<provider>_<operation>`, tags `provider:<provider>`.
        base_url: where calls go (default: `servers[0]`, or Swagger's `schemes`/`host`/`basePath`).
        credential: the name of a `registry.credentials` entry every call is sent with.
        operations: only these operations (operationId, snake_case id or tool id); default all.
        owner: the principal importing (`echo_tools.gate`), recorded on every tool (`ToolDef.owner`).

    Returns:
        The tools registered or updated, in document order (`tools`), the operations skipped with the
        reason (`skipped`), and the ids of previously imported tools disabled (`disabled`).

    Raises:
        OpenApiError: the document does not parse or validate (`field` is the JSON pointer), or an
            operation named in `operations` does not exist or cannot be imported.
    """
    if not isinstance(provider, str) or not PROVIDER_PATTERN.fullmatch(provider):
        raise OpenApiError(
            f"provider {provider!r} is invalid: it must match {PROVIDER_PATTERN.pattern}", field="provider"
        )
    if credential is not None:
        from echo_tools.credentials import check_name

        check_name(credential)
    document, fetched_from = load_document(spec, registry.egress)
    version = spec_version(document)
    converter = Converter(document, version, Resolver(document))
    found = operations_of(document)
    if base_url is None:
        base_url = base_url_of(document, version, fetched_from)
    if urlsplit(base_url).scheme not in ("http", "https") or "{" in base_url:
        raise OpenApiError(
            f"base_url {base_url!r} must be an http(s) URL without variables", field="base_url"
        )
    wanted = _selected(found, provider, operations)
    _check_operation_count(found, wanted)
    info: dict[str, Any] = document["info"] if isinstance(document.get("info"), dict) else {}
    report = ImportReport(warnings=converter.warnings)
    planned: list[ToolDef] = []
    for item in found:
        if wanted is not None and item.op_id not in wanted:
            continue
        try:
            planned.append(
                operation_tool(converter, item, provider, base_url.rstrip("/"), credential, info, version)
            )
        except SkipOperation as exc:
            if wanted is not None:
                raise OpenApiError(
                    f"operation {item.op_id!r} cannot be imported: {exc}", field=item.where
                ) from exc
            report.skipped.append((item.where, str(exc)))
    _log_report(provider, report)
    if owner is not None:
        planned = [tool.model_copy(update={"owner": owner}) for tool in planned]
    _store(registry, provider, found, wanted, planned, report)
    report.tools = [registry.get(tool.tool_id) or tool for tool in planned]
    return report


def _log_report(provider: str, report: ImportReport) -> None:
    """One warning for the operations skipped and one for the document's mistakes normalised, if any."""
    if report.skipped:
        logger.warning(
            "OpenAPI import of %r: %d operations skipped (import_openapi_report lists why), first: %s",
            provider,
            len(report.skipped),
            report.skipped[0][1],
        )
    if report.warnings:
        logger.warning(
            "OpenAPI import of %r: %d mistakes of the document normalised (import_openapi_report lists "
            "them), first: %s: %s",
            provider,
            len(report.warnings),
            *report.warnings[0],
        )


def _store(
    registry: ToolRegistry,
    provider: str,
    found: list[Operation],
    wanted: set[str] | None,
    planned: list[ToolDef],
    report: ImportReport,
) -> None:
    """Register the planned tools and disable the provider's tools whose operation is gone: one batch, all
    or nothing (an unchanged operation is not checked and written again)."""
    _unique_names(registry, planned)
    _check_stored_bytes(planned)
    batch = [tool for tool in planned if _differs(registry.get(tool.tool_id), tool)]
    present = {f"{provider}_{item.op_id}"[:128] for item in found}
    imported = {t.tool_id for t in planned}
    for old in registry.list_by_tags([f"provider:{provider}"]):
        if old.source != ToolSource.OPENAPI or old.tool_id in imported or old.status == ToolStatus.DISABLED:
            continue
        if wanted is not None and old.tool_id in present:
            continue  # not asked for this time, but still in the document
        batch.append(old.model_copy(update={"status": ToolStatus.DISABLED}))
        report.disabled.append(old.tool_id)
    if not batch:
        return
    try:
        registry.register_many(batch, replaces=_imported_from(provider))
    except ToolRegistrationError as exc:
        where = next((t.metadata["openapi"]["pointer"] for t in planned if t.tool_id == exc.tool_id), None)
        at = f" (operation at {where})" if where else ""
        raise type(exc)(
            f"OpenAPI import of {provider!r} stored nothing: {exc.message}{at}",
            tool_id=exc.tool_id,
            field=exc.field,
        ) from exc


def _check_operation_count(found: list[Operation], wanted: set[str] | None) -> None:
    """Refuse an import of more than `MAX_IMPORT_TOOLS` operations, before any is converted."""
    count = len(found) if wanted is None else len(wanted)
    if count > MAX_IMPORT_TOOLS:
        raise OpenApiError(
            f"the document has {count} operations; one import takes at most {MAX_IMPORT_TOOLS} "
            "(max_import_tools): choose some with operations=[...]; nothing was stored",
            field="/paths",
        )


def _check_stored_bytes(planned: list[ToolDef]) -> None:
    """Refuse an import whose tools would store more than `MAX_IMPORT_BYTES` in total (what they hold:
    schemas, configs, metadata and texts; a few fixed fields per tool are left out of the count)."""
    total = 0
    for tool in planned:
        held = [tool.input_schema, tool.execution_config, tool.metadata, tool.name, tool.description]
        total += len(json.dumps(held, default=str))
        if total > MAX_IMPORT_BYTES:
            where = tool.metadata["openapi"]["pointer"]
            raise OpenApiError(
                f"the import would store more than {MAX_IMPORT_BYTES} bytes (max_import_bytes), passed at "
                f"operation {where}; nothing was stored",
                field=where,
            )


def _differs(current: ToolDef | None, tool: ToolDef) -> bool:
    return current is None or current.to_storage_dict() != tool.to_storage_dict()


def _imported_from(provider: str) -> Callable[[ToolDef], None]:
    """The guard of an import: it replaces only the tools an import of the same provider created."""

    def guard(current: ToolDef) -> None:
        if current.source != ToolSource.OPENAPI or current.metadata.get("provider") != provider:
            raise ToolReadOnlyError(
                f"Tool {current.tool_id!r} exists (source {current.source.value!r}"
                f"{_provider_of(current)}) and an import of provider {provider!r} may replace only the "
                "tools it created; import under another provider name",
                tool_id=current.tool_id,
                field="provider",
            )

    return guard


def _provider_of(tool: ToolDef) -> str:
    provider = tool.metadata.get("provider") if tool.source == ToolSource.OPENAPI else None
    return f", provider {provider!r}" if isinstance(provider, str) else ""


def _selected(found: list[Operation], provider: str, operations: Iterable[str] | None) -> set[str] | None:
    if operations is None:
        return None
    if isinstance(operations, str):
        operations = [operations]
    wanted: set[str] = set()
    for ref in operations:
        match = next(
            (
                item
                for item in found
                if ref in (item.original_id, item.op_id, f"{provider}_{item.op_id}")
                or snake_case(ref) == item.op_id
            ),
            None,
        )
        if match is None:
            known = ", ".join(item.original_id or item.op_id for item in found[:20])
            raise OpenApiError(
                f"operation {ref!r} is not in the document (operations: {known})", field="operations"
            )
        wanted.add(match.op_id)
    return wanted


def _unique_names(registry: ToolRegistry, tools: list[ToolDef]) -> None:
    """Rename tools whose summary-name is taken (here or in the registry) to `<summary> (<operation>)`."""
    taken: dict[str, str] = {}
    for tool in tools:
        candidates = [tool.name, f"{tool.name} ({tool.metadata['operation']})", tool.tool_id]
        for name in candidates:
            keys = name_keys(name[:200])
            owner = registry.resolve(name[:200])
            free_here = all(taken.get(k, tool.tool_id) == tool.tool_id for k in keys)
            ids_here = not any(k in taken.values() and k != tool.tool_id for k in keys)
            if free_here and ids_here and (owner is None or owner.tool_id == tool.tool_id):
                tool.name = name[:200]
                break
        for key in name_keys(tool.name):
            taken[key] = tool.tool_id


# -- the canvas's template tools ----------------------------------------------------------------------


def find_provider_tool(registry: ToolRegistry, provider: Any, action: Any) -> ToolDef | None:
    """The tool tagged `provider:<provider>` whose action matches: its operationId, operation id
    (snake_case), tool id, name, or MCP tool name, compared in snake_case (`createOrder` = `create_order`).
    An active tool wins over a deprecated or disabled one."""
    if not isinstance(provider, str) or not isinstance(action, str) or not provider or not action:
        return None
    wanted = snake_case(action)
    found: list[ToolDef] = []
    for tool in registry.list_by_tags([f"provider:{provider.strip().lower()}"]):
        names = (
            tool.metadata.get("operation_id"),
            tool.metadata.get("operation"),
            tool.tool_id,
            tool.name,
            tool.execution_config.get("tool") if tool.tool_type == ToolType.MCP else None,
        )
        if any(isinstance(n, str) and snake_case(n) in (wanted, f"{provider}_{wanted}") for n in names):
            found.append(tool)
    found.sort(key=lambda t: t.status != ToolStatus.ACTIVE)
    return found[0] if found else None


def template_tool(registry: ToolRegistry | None, config: Mapping[str, Any], report: Any) -> ToolDef | None:
    """The tool a canvas template entry `{provider, action, credentials}` binds, or None after reporting
    why through `report(level, field, message)` (level "error" or "warning")."""
    provider, action = config.get("provider"), config.get("action")
    if not isinstance(provider, str) or not provider.strip():
        report("error", "provider", f"a third-party tool needs config.provider, got {provider!r:.60}")
        return None
    if not isinstance(action, str) or not action.strip():
        report("error", "action", f"a third-party tool of provider {provider!r} needs config.action")
        return None
    tool = find_provider_tool(registry, provider, action) if registry is not None else None
    if tool is None:
        report(
            "error",
            "action",
            f"no tool tagged provider:{provider} has action {action!r}; import the provider's API first: "
            f"`echo-tools import openapi SPEC --provider {provider}`",
        )
        return None
    wanted = config.get("credentials")
    if isinstance(wanted, str) and wanted.strip():
        used = tool.execution_config.get("credential")
        if used != wanted.strip():
            report(
                "error",
                "credentials",
                f"tool {tool.tool_id!r} is called with credential {used!r}, not {wanted!r}; import the "
                f"provider with `--credential {wanted}` (a credential per canvas binding is not supported)",
            )
            return None
        assert registry is not None
        if wanted not in registry.credentials:
            report(
                "warning",
                "credentials",
                f"credential {wanted!r} does not exist yet; calls of {tool.tool_id!r} fail until "
                f"`echo-tools credentials set {wanted} ...` adds it",
            )
    return tool
