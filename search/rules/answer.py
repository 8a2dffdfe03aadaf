"""Streamed rules answers as Server-Sent Events.

Why SSE in this order (search -> context -> generation -> token... -> complete | error):
a client can show what was searched and which passages will be used before the
first token arrives, and a `complete` event is the one place the citations live,
so a truncated stream is never mistaken for a full answer.

With an LLM configured (inference.llm) the answer is generated from the numbered
context; without one (or if it fails before its first token) the answer is
extractive: the best sentences of the top chunks, each followed by its citation
marker. Closing the generator (the client went away) stops generation at once.
"""
from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings

from config.errors import ApiError
from inference import llm
from search.engine.pages import cite, prompt_pages
from search.engine.sparse import tokenize

log = logging.getLogger(__name__)

MAX_CONTEXT_CHUNKS = 5
MAX_CONTEXT_CHARS = 1800
EXTRACTIVE_SENTENCES = 4
SYSTEM_PROMPT = (
    "You are a rules lawyer for tabletop role-playing games. Answer the question using only the numbered "
    "rulebook passages. Cite every claim with its passage number in square brackets, like [1]. If the "
    "passages do not answer the question, say so."
)
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z*\"(])")
_MARK = re.compile(r"\[(\d+)\]")


def _public_error(exc: Exception, *, fallback_code: str, fallback_detail: str) -> dict[str, Any]:
    """What an `error` event may say: an ApiError's code and detail, else a fixed code and sentence."""
    if isinstance(exc, ApiError):
        return {"code": exc.code, "detail": exc.detail}
    return {"code": fallback_code, "detail": fallback_detail}


def citation(n: int, r: dict[str, Any]) -> dict[str, Any]:
    """One cited passage; `cite` names it as a reader looks it up: the book and, for a paged book, its page;
    `page_url` opens that page where the book's original is reachable (search.engine.page_links), else None."""
    book, page = r.get("book_id", ""), r.get("page", "")
    return {"n": n, "chunk_id": r["chunk_id"], "book": book, "ruleset": r.get("ruleset_id", ""),
            "section_path": r.get("section_path") or r.get("heading_path") or [], "page": page,
            "cite": cite(book=book, page=page), "page_url": r.get("page_url"),
            "file": r.get("path", ""), "span": r.get("span", ""), "content_kind": r.get("content_kind", "")}


def _sentences(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("#", "|")) or set(s) <= set("-|: "):
            continue
        s = re.sub(r"^[-*]\s+", "", s)
        s = re.sub(r"[*_]{1,3}([^*_]+)[*_]{1,3}", r"\1", s)
        out.extend(p.strip() for p in _SENT.split(s) if len(p.strip()) > 20)
    return out


def extractive_answer(*, q: str, results: list[dict[str, Any]], max_sentences: int = EXTRACTIVE_SENTENCES
                      ) -> tuple[str, list[int]]:
    """The best sentences of the top chunks, each cited; -> (answer text, cited context numbers).

    Score = share of query terms a sentence covers, plus a small prior for higher-ranked chunks,
    so the top passage wins ties. At most two sentences per chunk keep the answer spread out.
    """
    qterms = set(tokenize(q, code=False))
    scored: list[tuple[float, int, int, str]] = []
    for n, r in enumerate(results[:MAX_CONTEXT_CHUNKS], start=1):
        for i, sent in enumerate(_sentences(r.get("text", ""))):
            terms = set(tokenize(sent, code=False))
            cover = len(qterms & terms) / max(1, len(qterms))
            prior = 0.25 / n + (0.05 if i == 0 else 0.0)
            scored.append((cover + prior, n, i, sent))
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    picked: list[tuple[int, int, str]] = []
    per_chunk: dict[int, int] = {}
    for _score, n, i, sent in scored:
        if per_chunk.get(n, 0) >= 2:
            continue
        per_chunk[n] = per_chunk.get(n, 0) + 1
        picked.append((n, i, sent))
        if len(picked) >= max_sentences:
            break
    picked.sort(key=lambda t: (t[0], t[1]))
    if not picked:
        return "No passage in the indexed rulebooks answers this question.", []
    text = " ".join(f"{sent} [{n}]" for n, _, sent in picked)
    return text, sorted({n for n, _, _ in picked})


def _context_prompt(q: str, results: list[dict[str, Any]]) -> str:
    parts = []
    for n, r in enumerate(results[:MAX_CONTEXT_CHUNKS], start=1):
        where = " > ".join(r.get("section_path") or []) or r.get("path", "")
        # the page where known, so the model can say where the rule is printed ("Page 112")
        page = prompt_pages(page=r.get("page", ""))
        where = f"{where}, {page}" if page else where
        parts.append(f"[{n}] ({r.get('book_id', '')}: {where})\n{r.get('text', '')[:MAX_CONTEXT_CHARS]}")
    return "Passages:\n\n" + "\n\n".join(parts) + f"\n\nQuestion: {q}\nAnswer with citations:"


def _words(text: str) -> Iterator[str]:
    for m in re.finditer(r"\S+\s*", text):
        yield m.group(0)


def stream_answer(*, q: str, search: Callable[[], dict[str, Any]],
                  on_finish: Callable[[str, dict[str, Any]], None] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events of one answer as (event, data) pairs: search, context, generation, token..., complete | error.
    `search()` runs the (already validated and authorised) rules search.

    Why pairs and not SSE text: the wire format is the HTTP layer's business (search.edge.api.rules.encode_sse); the
    page that renders a whole answer without JavaScript reads the same events without parsing frames back.

    on_finish(status, info) is called exactly once with status complete | error | disconnected.
    """
    t0 = time.perf_counter()
    status, info = "disconnected", {"tokens": 0}
    try:
        try:
            found = search()
        except Exception as exc:  # noqa: BLE001 - the stream has started: errors become an `error` event
            # an ApiError's detail is written for the caller; anything else is internal and stays in the log
            status, info = "error", _public_error(exc, fallback_code="search_failed",
                                                  fallback_detail="The search failed; try again.")
            log.warning("answer search failed: %r", exc)
            yield ("error", info)
            return
        results = found.get("results", [])
        yield ("search", {"query": q, "search_session_id": found.get("search_session_id"),
                             "analysis": found.get("analysis"), "filters": found.get("filters"),
                             "result_count": len(results)})
        context = results[:MAX_CONTEXT_CHUNKS]
        yield ("context", {"chunks": [{**citation(n, r), "score": r.get("score"),
                                          "graph_boost": r.get("graph_boost", 0.0)}
                                         for n, r in enumerate(context, start=1)]})
        mode, model = ("llm", settings.LLM_MODEL) if (llm.is_configured() and context) else ("extractive", "")
        answer = ""
        if mode == "llm":
            gen = llm.stream_chat(system=SYSTEM_PROMPT, user=_context_prompt(q, context))
            try:
                # the `generation` event waits for the first token, so it names the mode that really
                # answers: a failure before any token falls back to extractive with ONE generation event
                first = next(gen, None)
                yield ("generation", {"mode": "llm", "model": model})
                if first is not None:
                    answer += first
                    info["tokens"] += 1
                    yield ("token", {"text": first})
                for tok in gen:
                    if time.perf_counter() - t0 > settings.STREAM_MAX_S:
                        # the model's client times out per read, not per answer: one that trickles tokens
                        # would hold this stream (a thread, a socket) for ever (docs/security.md)
                        status, info = "error", {"code": "stream_timeout", "tokens": info["tokens"],
                                                 "detail": f"The answer did not finish within "
                                                           f"{settings.STREAM_MAX_S:g} s; try again."}
                        yield ("error", info)
                        return
                    answer += tok
                    info["tokens"] += 1
                    yield ("token", {"text": tok})
            except llm.LLMError as exc:
                log.warning("answer LLM failed: %s", exc)
                if answer:
                    status, info = "error", {"code": "llm_failed", "tokens": info["tokens"],
                                             "detail": "The language model stopped mid-answer; try again."}
                    yield ("error", info)
                    return
                mode = "extractive"  # failed before its first token: fall back, same events
                info["llm_error"] = "llm_failed"  # the reason stays in the log: it may name hosts
            finally:
                gen.close()  # a disconnect closes us; closing the LLM stream stops its generation
        if mode == "extractive":
            yield ("generation", {"mode": "extractive", "model": "", **(
                {"fallback_reason": info["llm_error"]} if "llm_error" in info else {})})
            answer, _ = extractive_answer(q=q, results=context)
            for tok in _words(answer):
                info["tokens"] += 1
                yield ("token", {"text": tok})
        cited = sorted({int(n) for n in _MARK.findall(answer) if 1 <= int(n) <= len(context)})
        citations = [citation(n, context[n - 1]) for n in (cited or range(1, len(context) + 1))]
        status = "complete"
        info = {"answer": answer, "citations": citations, "mode": mode, "model": model, "tokens": info["tokens"],
                "elapsed_ms": round((time.perf_counter() - t0) * 1000, 1)}
        yield ("complete", info)
    finally:
        if on_finish is not None:
            on_finish(status, info)
