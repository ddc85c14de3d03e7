"""Text operations without a model: chunking, BM25 keyword retrieval and an extractive summary."""

from __future__ import annotations

import math
import re
from collections import Counter

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n{2,}")
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also may might must shall us""".split()
)


def words(text: str) -> list[str]:
    """Lower-cased words without stopwords."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOPWORDS]


def chunk_text(text: str, size: int = 1000, overlap: int = 200) -> list[str]:
    """Split `text` into chunks of about `size` characters that overlap by `overlap`, at whitespace."""
    if size < 50:
        raise ValueError(f"chunk_size must be at least 50, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk_overlap must be between 0 and chunk_size - 1 ({size - 1}), got {overlap}")
    text = text.strip()
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        chunk = text[start:end].strip()
        if chunk:
            chunks.append(chunk)
        if end >= len(text):
            break
        next_start = end - overlap
        space = text.find(" ", next_start, end)
        start = space + 1 if overlap and space != -1 else max(next_start, start + 1)
    return chunks


def bm25_rank(chunks: list[str], query: str, top_k: int = 3) -> list[tuple[int, float]]:
    """The `top_k` (index, score) pairs of `chunks` by Okapi BM25 against `query`; zero scores dropped."""
    terms = words(query)
    if not terms or not chunks:
        return []
    docs = [Counter(words(c)) for c in chunks]
    lengths = [sum(d.values()) for d in docs]
    avg = (sum(lengths) / len(lengths)) or 1.0
    k1, b = 1.5, 0.75
    scores = []
    for index, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
        score = 0.0
        for term in set(terms):
            tf = doc.get(term, 0)
            if not tf:
                continue
            df = sum(1 for d in docs if term in d)
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        if score > 0:
            scores.append((index, round(score, 4)))
    scores.sort(key=lambda pair: (-pair[1], pair[0]))
    return scores[:top_k]


def sentences(text: str) -> list[str]:
    """Split prose into sentences (and paragraphs without end punctuation)."""
    parts = _SENTENCE_END.split(re.sub(r"[ \t]+", " ", text))
    return [p.strip().replace("\n", " ") for p in parts if p and len(p.strip()) > 1]


def summarize(text: str, max_sentences: int = 5) -> str:
    """An extractive summary: the highest-scoring sentences by word frequency, in document order."""
    found = sentences(text)[:5000]
    if len(found) <= max_sentences:
        return " ".join(found)
    freq = Counter(words(text))
    top = max(freq.values(), default=1)
    scored = []
    for index, sentence in enumerate(found):
        tokens = words(sentence)
        if not tokens:
            continue
        score = sum(freq[t] / top for t in tokens) / (len(tokens) ** 0.5)
        score *= 1.2 if index == 0 else 1.0  # the opening sentence usually states the subject
        scored.append((score, index))
    chosen = sorted(index for _, index in sorted(scored, reverse=True)[:max_sentences])
    return " ".join(found[i] for i in chosen)
