"""Shared test set-up: no telemetry, no network, the EchoAI corpus at hand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Third-party telemetry tries the network, which does not exist here; turn it off before anything imports.
for _key, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "LANGCHAIN_TRACING_V2": "false",
    "ANONYMIZED_TELEMETRY": "False",
}.items():
    os.environ.setdefault(_key, _value)

REPO_ROOT = Path(__file__).resolve().parent.parent


def _find_corpus() -> Path | None:
    for base in (REPO_ROOT.parent / "shared", REPO_ROOT / "shared"):
        corpus = base / "reference" / "echoai-corpus"
        if corpus.is_dir():
            return corpus
    return None


CORPUS = _find_corpus()


@pytest.fixture
def corpus() -> Path:
    """The EchoAI corpus folder (../shared/reference/echoai-corpus beside the checkout)."""
    if CORPUS is None:
        pytest.fail("the EchoAI corpus (../shared/reference/echoai-corpus) is missing beside the checkout")
    return CORPUS


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT
