"""`echo-tools serve`: the HTTP API under uvicorn, refusing unsafe settings before it binds.

A bind to anything but loopback needs an API key (`--api-key`, the operator) or a principals file
(`--principals FILE`, keys kept as their SHA-256, see `echo_tools.gate`), and without one only loopback `Host` names are answered;
`api` tools may not reach loopback unless `--allow-loopback-egress` is given (a served registry must not
become a proxy into the host); tools registered over HTTP may reference only the `--allow-env` variables.
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from pathlib import Path

from echo_tools.errors import ToolConfigError


def serve(args: argparse.Namespace) -> int:
    """Build the app from the CLI options and run it until interrupted."""
    from echo_tools.cli.catalogue import open_executor, open_registry
    from echo_tools.cli.common import CliError, storage_dir
    from echo_tools.gate import load_principals
    from echo_tools.settings import ApiSettings

    try:
        principals = load_principals(args.principals) if getattr(args, "principals", None) else None
    except ToolConfigError as exc:
        raise CliError(f"serve --principals: {exc.message}", code=2) from exc
    settings = ApiSettings.from_env(
        principals=principals,
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
    from echo_tools.cli.history import pg_stores, run_history, where

    listener = bind(settings.host, settings.port)  # before anything is opened or printed
    try:
        registry = open_registry(args, strict_egress=strict)
        executor = open_executor(registry, args, strict_egress=strict)
        app = create_app(registry, executor, settings, history=run_history(args, required=False))
        stores = pg_stores(args)
        if stores is not None:
            # /tools/events on this replica streams every replica's events
            stores.history.follow(app.state.echo_tools.broadcaster)
        auth = "no API key: loopback only"
        if settings.key_required:
            count = len(settings.principals or ()) + (1 if settings.api_key else 0)
            auth = f"API key required, {count} principal{'s' if count != 1 else ''}"
        base = f"http://{settings.host}:{settings.port}"
        sys.stderr.write(
            f"echo-tools: serving {len(registry)} tools from {where(args)} on {base}/tools ({auth})\n"
            f"echo-tools: the run viewer: {base}/ui/\n"
        )
        # open event streams never end on their own: give them a few seconds at shutdown, then close them
        config = uvicorn.Config(
            app, host=settings.host, port=settings.port, log_level=args.log_level, timeout_graceful_shutdown=5
        )
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        listener.close()
    return 0


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port`, or a one-line error when the port is taken (exit 1)."""
    from echo_tools.cli.common import CliError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CliError(f"serve --host {host!r} cannot be resolved: {exc.strerror}", code=2) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CliError(
                f"serve: port {port} on {host} is already in use by another process; "
                "stop it or choose another --port"
            ) from exc
        raise CliError(f"serve: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock
