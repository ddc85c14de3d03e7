"""MCP servers as tool sources: `config` reads and checks the `mcpServers` / `servers` shapes and keeps the
configured servers; `sessions` holds one pooled client session per server (stdio, streamable HTTP).
The MCP SDK is imported by `sessions` only, when a server is first used.
"""
