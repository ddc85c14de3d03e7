"""Relevance search over a large catalogue: BM25 over each tool's name, description, tags and capabilities.

A model can be shown a handful of tools, not thousands: `ToolRegistry.search(query, k=...)` ranks them, and
`search_tools_tool(registry)` is the tool an agent calls to find the ones it needs (the bridge binds what
it found on demand). The index is built on the first ranked search after the catalogue changed.
"""

from __future__ import annotations

import bisect
import heapq
import math
import re
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from echo_tools.errors import ToolValidationError

if TYPE_CHECKING:
    from echo_tools.lookup import SearchableLookup
    from echo_tools.models import ToolDef

MAX_QUERY_CHARS = 500
MAX_QUERY_TERMS = 32
MAX_K = 100
# how much a word counts by where it stands: the name says most about a tool
_WEIGHTS = (("name", 3), ("capabilities", 2), ("tags", 1), ("description", 1))
_K1, _B = 1.2, 0.75
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_STOP = frozenset(
    "a an and any are as at be by can do does for from get give how i in is it its me my of on or please "
    "some that the this to tool tools use using want what which with you your".split()
)


def stem(word: str) -> str:
    """A light English stemmer: plural and verb endings off, so "files", "filed", "filing" meet "file"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix, keep in (("ing", 5), ("ed", 4), ("es", 5), ("s", 3)):
        if len(word) > keep and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def terms(text: str) -> list[str]:
    """The searchable terms of a text: words split at case changes and punctuation, stemmed, no stop words."""
    words = _WORD.findall(_CAMEL.sub(" ", text).lower())
    return [stem(w) for w in words if w not in _STOP]


def _fields(tool: ToolDef) -> dict[str, str]:
    tags = " ".join(t.split(":", 1)[-1] for t in tool.tags)
    return {
        "name": f"{tool.name} {tool.tool_id}",
        "capabilities": " ".join(tool.capabilities),
        "tags": tags,
        "description": tool.description[:2000],
    }


class SearchIndex:
    """BM25 over a fixed list of tools; `search` returns `(tool_id, score)` best first."""

    def __init__(self, tools: Iterable[ToolDef]) -> None:
        self.ids: list[str] = []
        lengths: list[int] = []
        counts: list[dict[str, int]] = []
        for tool in tools:
            fields = _fields(tool)
            tf: dict[str, int] = {}
            for field, weight in _WEIGHTS:
                for term in terms(fields[field]):
                    tf[term] = tf.get(term, 0) + weight
            self.ids.append(tool.tool_id)
            counts.append(tf)
            lengths.append(sum(tf.values()))
        average = (sum(lengths) / len(lengths)) if lengths else 1.0
        documents: dict[str, int] = {}
        for tf in counts:
            for term in tf:
                documents[term] = documents.get(term, 0) + 1
        total = len(self.ids)
        # the document side of BM25 is fixed: each posting keeps its whole weight, a query only adds them up
        self.postings: dict[str, list[tuple[int, float]]] = {}
        for position, tf in enumerate(counts):
            norm = _K1 * (1 - _B + _B * lengths[position] / average)
            for term, count in tf.items():
                idf = math.log(1 + (total - documents[term] + 0.5) / (documents[term] + 0.5))
                score = idf * count * (_K1 + 1) / (count + norm)
                self.postings.setdefault(term, []).append((position, score))
        self._vocabulary: list[str] | None = None

    def _expand(self, term: str) -> Sequence[str]:
        """`term`, or for a word no tool has, the known words it begins (a few, "calc" -> "calculator")."""
        if term in self.postings or len(term) < 3:
            return (term,)
        if self._vocabulary is None:
            self._vocabulary = sorted(self.postings)
        start = bisect.bisect_left(self._vocabulary, term)
        found = []
        for word in self._vocabulary[start : start + 5]:
            if not word.startswith(term):
                break
            found.append(word)
        return found

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        scores: dict[int, float] = {}
        for term in dict.fromkeys(terms(query)[:MAX_QUERY_TERMS]):
            for word in self._expand(term):
                for position, weight in self.postings.get(word, ()):
                    scores[position] = scores.get(position, 0.0) + weight
        # the best few by score (a heap, not a sort of every match), ties by id so results are stable
        best = heapq.nlargest(k * 2, scores.items(), key=itemgetter(1))
        ranked = sorted(((-score, self.ids[position]) for position, score in best))[:k]
        return [(tool_id, -negative) for negative, tool_id in ranked]


def check_query(query: Any, k: Any) -> None:
    """Refuse a query that is not text or is longer than `MAX_QUERY_CHARS`, and a `k` outside 1..MAX_K."""
    if not isinstance(query, str):
        raise ToolValidationError(f"query must be text, got {query!r:.80}", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolValidationError(
            f"query is {len(query)} characters, more than the {MAX_QUERY_CHARS} allowed; "
            "describe the tool you need in a sentence",
            field="query",
        )
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ToolValidationError(f"k must be an integer from 1 to {MAX_K}, got {k!r}", field="k")


SEARCH_TOOL_NAME = "search_tools"


def search_tools_tool(registry: SearchableLookup, *, name: str = SEARCH_TOOL_NAME, k: int = 5) -> ToolDef:
    """Add (in-process) and return the tool an agent calls to find tools: `{query, limit?}` -> the best
    matches as `[{name, tool_id, description}]`, itself and disabled tools left out.

    Args:
        registry: the catalogue searched (the tool is added to it, see `ToolRegistry.add`).
        name: the tool's name.
        k: how many tools it returns when the model gives no `limit`.
    """
    from echo_tools.models import ToolStatus

    def search_tools(
        query: Annotated[str, Field(max_length=MAX_QUERY_CHARS)], limit: int = k
    ) -> list[dict[str, str]]:
        """Find tools in the catalogue by what they do; returns the best matches, best first.

        Args:
            query: what the tool you need does, in a few words ("convert currency", "read a pdf").
            limit: how many tools to return (1 to 20).
        """
        found = []
        for tool in registry.search(query, k=min(max(int(limit), 1), 20) + 1):
            if tool.name != name and tool.status != ToolStatus.DISABLED:
                found.append(
                    {"name": tool.llm_name, "tool_id": tool.tool_id, "description": tool.description[:300]}
                )
        return found[: max(int(limit), 1)]

    return registry.add(search_tools, name=name, side_effect="pure")
