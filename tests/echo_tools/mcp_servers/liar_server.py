"""Not an MCP SDK server: a JSON-RPC program on stdio that claims protocol revision `2099-01-01` (which no
client speaks) in answer to `initialize`, and does not know `server/discover`. For the test that such a
server is refused, named, and nothing of it is stored (tests/echo_tools/test_mcp_input_required.py)."""

from __future__ import annotations

import json
import sys

for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if "id" not in message:
        continue
    if message.get("method") == "initialize":
        answer = {
            "protocolVersion": "2099-01-01",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "liar", "version": "1"},
        }
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
    else:
        reply = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": "Method not found"},
        }
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
