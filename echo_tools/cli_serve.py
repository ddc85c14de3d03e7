"""`echo-tools serve`: the HTTP API under uvicorn, refusing unsafe settings before it binds.

A bind to anything but loopback needs an API key, and without one only loopback `Host` names are answered;
`api` tools may not reach loopback unless `--allow-loopback-egress` is given (a served registry must not
become a proxy into the host); tools registered over HTTP may reference only the `--allow-env` variables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from echo_tools.errors import ToolConfigError


def serve(args: argparse.Namespace) -> int:
    """Build the app from the CLI options and run it until interrupted."""
    from echo_tools.cli import CliError, open_executor, open_registry, storage_dir
    from echo_tools.settings import ApiSettings

    settings = ApiSettings.from_env(
        api_key=args.api_key,
        host=args.host,
        port=args.port,
        storage_dir=storage_dir(args),
        agents_dir=Path(args.agents_dir) if args.agents_dir else None,
        cors_origins=tuple(args.cors_origin) or None,
        max_body_bytes=args.max_body_bytes,
        allowed_env=tuple(getattr(args, "allow_env", None) or ()) or None,
    )
    try:
        settings.check()
    except ToolConfigError as exc:
        raise CliError(exc.message, code=2) from exc
    try:
        import uvicorn

        from echo_tools.api import create_app
    except ImportError as exc:
        raise CliError(f"serve needs the server extra: pip install 'echo-tools[server]' ({exc})") from exc
    strict = not args.allow_loopback_egress
    registry = open_registry(args, strict_egress=strict)
    executor = open_executor(registry, args, strict_egress=strict)
    app = create_app(registry, executor, settings)
    auth = "API key required" if settings.key_required else "no API key: loopback only"
    sys.stderr.write(
        f"echo-tools: serving {len(registry)} tools from {settings.storage_dir} on "
        f"http://{settings.host}:{settings.port}/tools ({auth})\n"
    )
    # open event streams never end on their own: give them a few seconds at shutdown, then close them
    uvicorn.run(
        app, host=settings.host, port=settings.port, log_level=args.log_level, timeout_graceful_shutdown=5
    )
    return 0
