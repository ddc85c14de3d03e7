"""Choosing the language model of an agent: a real one through CrewAI's `LLM`, or the offline rehearsal.

Order: the agent's own `llm` config when it can run here (a model plus its provider's API key in the
environment, or a `base_url`), then the caller's default, then `ECHO_LLM`, then the rehearsal model
(`llm_rehearsal.RehearsalLLM`), which is announced on every run. A spec is `provider/model`
(`openai/gpt-4o-mini`), an OpenAI-compatible URL with the model after `#`
(`http://localhost:11434/v1#llama3.1`), `local` (the model of this machine, `workflow_bridge.local_llm`,
served on 127.0.0.1 and stopped at exit; `make install-llm` installs it), or `rehearsal`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from crewai.llms.base_llm import BaseLLM

from echo_tools.gate import acting
from workflow_bridge.llm_rehearsal import REHEARSAL_MODEL, REHEARSAL_NOTICE, RehearsalLLM

logger = logging.getLogger("workflow_bridge.llm")

ENV_SPEC = "ECHO_LLM"
ENV_MODEL = "ECHO_LLM_MODEL"
ENV_API_KEY = "ECHO_LLM_API_KEY"
REHEARSAL_SPECS = {"rehearsal", "offline", REHEARSAL_MODEL}
LOCAL_SPECS = {"local"}

# Where each provider's key is read from; CrewAI's native clients read the same variables.
PROVIDER_KEYS = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "azure": ("AZURE_API_KEY",),
    "bedrock": ("AWS_ACCESS_KEY_ID",),
}
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("claude", "anthropic"),
    ("gemini", "gemini"),
)


class LLMConfigError(ValueError):
    """An LLM setting that names something this machine cannot build."""


def is_rehearsal(llm: Any) -> bool:
    """True for the offline rehearsal model."""
    return bool(getattr(llm, "is_rehearsal", False))


def provider_of(model: str, provider: str | None = None) -> str | None:
    """The provider of `model` (`"openai/gpt-4o"` -> openai, `"claude-..."` -> anthropic)."""
    if provider:
        return provider.lower()
    if "/" in model:
        return model.split("/", 1)[0].lower()
    lowered = model.lower()
    return next((p for prefix, p in _MODEL_PREFIXES if lowered.startswith(prefix)), None)


def llm_params(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """`temperature` / `max_tokens` of an agent's llm config, as CrewAI `LLM` keyword arguments."""
    config = config if isinstance(config, Mapping) else {}
    params: dict[str, Any] = {}
    if isinstance(config.get("temperature"), (int, float)):
        params["temperature"] = float(config["temperature"])
    max_tokens = config.get("max_tokens") or config.get("maxTokens")
    if isinstance(max_tokens, int) and max_tokens > 0:
        params["max_tokens"] = max_tokens
    return params


def llm_from_spec(spec: str, **params: Any) -> BaseLLM:
    """Build a model from a spec: `rehearsal`, `provider/model`, a bare model name, or `URL#model`.

    Raises:
        LLMConfigError: a URL without a model name, or a provider CrewAI cannot build here.
    """
    spec = spec.strip()
    if spec.lower() in REHEARSAL_SPECS:
        return RehearsalLLM()
    if spec.lower() in LOCAL_SPECS:
        return local_crew_llm(**params)
    if spec.startswith(("http://", "https://")):
        url, _, model = spec.partition("#")
        model = model or os.environ.get(ENV_MODEL, "")
        if not model:
            raise LLMConfigError(
                f"LLM spec {spec!r} names a server but no model; append '#<model>' or set {ENV_MODEL}"
            )
        api_key = os.environ.get(ENV_API_KEY) or os.environ.get("OPENAI_API_KEY") or "not-needed"
        return _build(model, base_url=url, api_key=api_key, **params)
    return _build(spec, **params)


def local_crew_llm(server: Any = None, **params: Any) -> BaseLLM:
    """The local model (`ECHO_LLM=local`) for CrewAI agents: CrewAI's `LLM` pointed at the local server,
    wrapped in `RecoveringCrewLLM` (text tool calls recovered, wrong names corrected, loops stopped,
    calls made one at a time: a small model guesses the results its dependent calls need).

    Args:
        server: a running `LocalModelServer`; default: the process's shared one, started now.
        params: `LLM` keyword arguments (`temperature` defaults to 0: the same answer each run;
            `max_tokens` to 1024).

    Raises:
        LLMConfigError: the runtime or the weights are not installed (naming `make install-llm`), or the
            server did not start.
    """
    from workflow_bridge.local_llm import DEFAULT_MAX_TOKENS, MODEL_ALIAS, LocalModelError, shared_server
    from workflow_bridge.recovering_crew_llm import RecoveringCrewLLM

    try:
        server = server or shared_server()
    except LocalModelError as exc:
        raise LLMConfigError(f"{ENV_SPEC}=local: {exc}") from exc
    params.setdefault("temperature", 0.0)
    params.setdefault("max_tokens", DEFAULT_MAX_TOKENS)  # a small model can ramble on: bound each answer
    inner = _build(MODEL_ALIAS, base_url=server.base_url, api_key="not-needed", **params)
    return RecoveringCrewLLM(inner, max_calls_per_turn=1)


def _build(model: str, **kwargs: Any) -> BaseLLM:
    from crewai import LLM

    if kwargs.get("base_url"):
        model = model if model.startswith("openai/") else f"openai/{model}"
        kwargs["custom_openai"] = True
    try:
        return LLM(model=model, **kwargs)
    except (ImportError, ValueError) as exc:
        raise LLMConfigError(f"cannot build LLM {model!r}: {exc}") from exc


def _from_agent_config(config: Mapping[str, Any]) -> BaseLLM | None:
    model = config.get("model") or config.get("modelName") or ""
    if not isinstance(model, str) or not model.strip():
        return None
    base_url = config.get("base_url") or config.get("baseUrl")
    if base_url:
        _check_model_url(base_url)
        api_key = os.environ.get(ENV_API_KEY) or os.environ.get("OPENAI_API_KEY") or "not-needed"
        return _build(model, base_url=base_url, api_key=api_key, **llm_params(config))
    provider = provider_of(model, config.get("provider"))
    keys = PROVIDER_KEYS.get(provider or "", ())
    if not any(os.environ.get(k) for k in keys):
        return None  # configured but not runnable here: no key in the environment
    name = model if "/" in model or not provider else f"{provider}/{model}"
    return _build(name, **llm_params(config))


def _check_model_url(base_url: Any) -> None:
    """An agent's own model URL is the operator's to choose: a canvas sent by another principal (over
    HTTP) may not make the server send its prompts, and its model API key, to a URL of the caller's."""
    principal = acting()
    if not principal.grants.admin:
        raise LLMConfigError(
            f"llm.base_url {str(base_url)[:200]!r}: principal {principal.name!r} may not choose the model's "
            "URL (the server would send its prompts and model key there); leave llm.base_url out to use "
            f"the server's model ({ENV_SPEC} or --llm), or ask the operator to run it"
        )


def resolve_llm(agent_llm_config: Mapping[str, Any] | None, default: BaseLLM | str | None = None) -> BaseLLM:
    """The model an agent runs with.

    Args:
        agent_llm_config: the agent's `llm` dict (`provider`, `model`, `temperature`, `max_tokens`,
            `base_url`); used when its provider's API key is in the environment or it has a `base_url`.
        default: a model or spec used when the agent's own config cannot run here.

    Returns:
        A CrewAI LLM; the `RehearsalLLM` when nothing is configured (check with `is_rehearsal`).
    """
    config = agent_llm_config if isinstance(agent_llm_config, Mapping) else {}
    llm = _from_agent_config(config)
    if llm is not None:
        return llm
    if default is not None:
        return llm_from_spec(default, **llm_params(config)) if isinstance(default, str) else default
    spec = os.environ.get(ENV_SPEC, "").strip()
    if spec:
        return llm_from_spec(spec, **llm_params(config))
    return RehearsalLLM()


def describe_llm(llm: Any) -> str:
    """`provider/model at URL` for messages and the run's first line (`rehearsal (offline)`)."""
    if is_rehearsal(llm):
        return "rehearsal (offline)"
    if isinstance(llm, str):
        return llm
    model = str(getattr(llm, "model", None) or type(llm).__name__)
    provider = getattr(llm, "provider", None)
    name = f"{provider}/{model}" if isinstance(provider, str) and "/" not in model else model
    base = _base_url(llm)
    return f"{name} at {base}" if base else name


def _base_url(llm: Any) -> str | None:
    for attribute in ("base_url", "api_base"):
        value = getattr(llm, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


def check_llm(llm: Any, *, timeout: float = 3.0) -> None:
    """Fail early, in one sentence, when a model cannot be used: its server does not answer, or its
    provider's API key is not in the environment. The rehearsal model always passes.

    A model with a URL is asked for `GET <url>/models`; any HTTP answer (even 401 or 404) counts as
    reachable, only a transport failure does not. The answer's body is never read (a server streaming an
    endless or huge body cannot hold the check up).

    The probe is not sent through `echo_tools.egress`: it asks whether the run's model client (CrewAI's,
    which never goes through the egress client) will reach the URL the operator configured, so it takes
    the same road, proxies included. Through the egress client it would refuse a model on this machine
    or the LAN and ignore the proxy settings the model client follows: its verdict would not be the run's.

    Raises:
        LLMConfigError: naming the model, the URL or the missing variable, and what to do.
    """
    if is_rehearsal(llm) or not isinstance(llm, BaseLLM):
        return
    base = _base_url(llm)
    if base:
        import httpx

        try:
            with httpx.stream("GET", base.rstrip("/") + "/models", timeout=timeout):
                pass  # the status line is the answer; the body is left unread and the connection closed
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise LLMConfigError(
                f"model {describe_llm(llm)}: the server at {base} cannot be reached ({reason}); "
                f"start it, or fix {ENV_SPEC} / --llm / the agent's llm.base_url"
            ) from exc
        return
    provider = str(getattr(llm, "provider", None) or provider_of(str(getattr(llm, "model", ""))) or "")
    keys = PROVIDER_KEYS.get(provider.lower(), ())
    if keys and not any(os.environ.get(k) for k in keys):
        raise LLMConfigError(
            f"model {describe_llm(llm)}: {' or '.join(keys)} is not set in the environment; "
            f"set it, or choose another model with {ENV_SPEC} / --llm"
        )


__all__ = [
    "REHEARSAL_NOTICE",
    "LLMConfigError",
    "RehearsalLLM",
    "check_llm",
    "describe_llm",
    "is_rehearsal",
    "llm_from_spec",
    "local_crew_llm",
    "llm_params",
    "provider_of",
    "resolve_llm",
]
