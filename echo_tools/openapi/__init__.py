"""OpenAPI 3.0 / 3.1 and Swagger 2.0 documents imported as `api` tools, one per operation.

`importer` turns a document into `ToolDef`s and registers them as one batch; `operations` turns one
operation into one tool; `document` loads, checks and resolves a document (`$ref`s, versions); `wild`
normalises documents as found in the wild; `request` builds each call's HTTP request from the arguments.
"""

from echo_tools.openapi.importer import (
    ImportReport,
    OpenApiError,
    base_url_of,
    find_provider_tool,
    import_openapi,
    import_openapi_report,
    load_document,
    spec_version,
    template_tool,
)

__all__ = [
    "ImportReport",
    "OpenApiError",
    "base_url_of",
    "find_provider_tool",
    "import_openapi",
    "import_openapi_report",
    "load_document",
    "spec_version",
    "template_tool",
]
