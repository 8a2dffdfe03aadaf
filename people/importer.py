"""Bulk import of people from JSONL records (also what the demo generator feeds).

Why COPY and not bulk_create: 384-d vectors through bulk_create run ~50x
slower. Why embed before insert: each row is written once, with its vector, and
a large load drops and rebuilds the HNSW index once instead of maintaining it
row by row. Texts go through the EmbeddingCache, so repeated template texts
(demo and benchmark directories) are embedded once.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from tqdm import tqdm

from people.indexing import refresh_search_documents, vector_literal
from people.normalize import normalize_company
from search.encoders import embed_cached

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

PERSON_COLS = ("id", "display_name", "headline", "email", "phone", "linkedin_url", "external_id", "created_at")
PROFILE_COLS = ("person_id", "bio", "current_city", "open_to_work", "open_to_contact", "work_preferred_locations",
                "work_preferred_salary_min", "contact_email", "contact_phone")
CARD_COLS = ("id", "person_id", "title", "summary", "search_phrases", "embedding", "company_norm", "team_norm",
             "intent_primary", "domain", "sub_domain", "employment_type", "seniority_level", "city", "country",
             "location_text", "start_date", "end_date", "is_current", "visibility", "created_at", "updated_at")
CHILD_COLS = ("id", "parent_id", "person_id", "child_type", "title", "summary", "search_phrases", "embedding",
              "created_at", "updated_at")


class RecordError(ValueError):
    pass


@dataclass
class ImportReport:
    people: int = 0
    cards: int = 0
    children: int = 0
    errors: list[str] = field(default_factory=list)
    embedded: int = 0


def _s(v: Any, n: int) -> str:
    return ("" if v is None else str(v)).strip()[:n]


def _d(v: Any, name: str) -> date | None:
    if v in (None, ""):
        return None
    try:
        return date.fromisoformat(str(v)[:10]) if len(str(v)) >= 10 else date.fromisoformat(
            (str(v) + "-01-01")[:10] if len(str(v)) == 4 else (str(v) + "-01")[:10])
    except ValueError:
        raise RecordError(f"{name}: not a date: {v!r}") from None


def _phrases(v: Any) -> list[str]:
    if not isinstance(v, list):
        return []
    return [_s(x, 200) for x in v if isinstance(x, str) and x.strip()][:30]


def _text(title: str, summary: str, phrases: list[str]) -> str:
    return " | ".join(p for p in [title, summary, ", ".join(phrases)] if p)


def validate_record(rec: Any) -> dict[str, Any]:
    """One JSON record -> rows for every table (raises RecordError with the reason)."""
    if not isinstance(rec, dict):
        raise RecordError("record is not an object")
    name = _s(rec.get("display_name") or rec.get("name"), 200)
    if not name:
        raise RecordError("display_name is required")
    try:
        pid = uuid.UUID(str(rec["id"])) if rec.get("id") else uuid.uuid4()
    except ValueError:
        raise RecordError("id is not a UUID") from None
    prof = rec.get("profile") or {}
    if not isinstance(prof, dict):
        raise RecordError("profile is not an object")
    sal = prof.get("work_preferred_salary_min")
    if sal is not None and (isinstance(sal, bool) or not isinstance(sal, (int, float)) or sal < 0):
        raise RecordError("profile.work_preferred_salary_min must be a non-negative number (INR/year)")
    cards_in = rec.get("cards") or []
    if not isinstance(cards_in, list):
        raise RecordError("cards is not a list")
    cards, children = [], []
    for i, c in enumerate(cards_in):
        if not isinstance(c, dict):
            raise RecordError(f"cards[{i}] is not an object")
        cid = uuid.uuid4()
        title, summary, phrases = _s(c.get("title"), 300), _s(c.get("summary"), 5000), _phrases(c.get("search_phrases"))
        vis = c.get("visibility") or "public"
        if vis not in ("public", "hidden"):
            raise RecordError(f"cards[{i}].visibility must be public or hidden")
        sd, ed = _d(c.get("start_date"), f"cards[{i}].start_date"), _d(c.get("end_date"), f"cards[{i}].end_date")
        if sd and ed and sd > ed:
            sd, ed = ed, sd
        cards.append({"id": cid, "person_id": pid, "title": title, "summary": summary, "search_phrases": phrases,
                      "company_norm": normalize_company(c.get("company_norm") or c.get("company") or ""),
                      "team_norm": _s(c.get("team_norm"), 120).lower(),
                      "intent_primary": _s(c.get("intent_primary"), 40).lower(), "domain": _s(c.get("domain"), 80).lower(),
                      "sub_domain": _s(c.get("sub_domain"), 80).lower(),
                      "employment_type": _s(c.get("employment_type"), 40).lower(),
                      "seniority_level": _s(c.get("seniority_level"), 40).lower(), "city": _s(c.get("city"), 100).lower(),
                      "country": _s(c.get("country"), 100).lower(), "location_text": _s(c.get("location_text"), 200),
                      "start_date": sd, "end_date": ed, "is_current": bool(c.get("is_current")), "visibility": vis,
                      "text": _text(title, summary, phrases)})
        for j, ch in enumerate(c.get("children") or []):
            if not isinstance(ch, dict):
                raise RecordError(f"cards[{i}].children[{j}] is not an object")
            t, s, ph = _s(ch.get("title"), 300), _s(ch.get("summary"), 5000), _phrases(ch.get("search_phrases"))
            children.append({"id": uuid.uuid4(), "parent_id": cid, "person_id": pid,
                             "child_type": _s(ch.get("child_type") or "evidence", 40), "title": t, "summary": s,
                             "search_phrases": ph, "text": _text(t, s, ph)})
    return {
        "person": {"id": pid, "display_name": name, "headline": _s(rec.get("headline"), 300),
                   "email": _s(rec.get("email"), 254), "phone": _s(rec.get("phone"), 40),
                   "linkedin_url": _s(rec.get("linkedin_url"), 200), "external_id": _s(rec.get("external_id"), 100)},
        "profile": {"person_id": pid, "bio": _s(prof.get("bio"), 5000), "current_city": _s(prof.get("current_city"), 100),
                    "open_to_work": bool(prof.get("open_to_work")), "open_to_contact": bool(prof.get("open_to_contact")),
                    "work_preferred_locations": [_s(x, 100).lower() for x in prof.get("work_preferred_locations") or []
                                                 if isinstance(x, str) and x.strip()],
                    "work_preferred_salary_min": int(sal) if sal is not None else None,
                    "contact_email": _s(prof.get("contact_email"), 254), "contact_phone": _s(prof.get("contact_phone"), 40)},
        "cards": cards, "children": children,
    }


def _copy(cur: CursorWrapper, table: str, cols: tuple[str, ...], rows: Iterable[tuple]) -> None:
    with cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as cp:
        for row in rows:
            cp.write_row(row)


def _write_batch(batch: list[dict[str, Any]], *, embed: bool, show_progress: bool) -> tuple[int, int, int]:
    from django.utils import timezone

    now = timezone.now()
    cards = [c for b in batch for c in b["cards"]]
    children = [c for b in batch for c in b["children"]]
    if embed:
        vecs = embed_cached([c["text"] for c in cards] + [c["text"] for c in children], show_progress=show_progress)
        for c, v in zip(cards + children, vecs, strict=True):
            c["embedding"] = vector_literal(v)
    with transaction.atomic(), connection.cursor() as cur:
        _copy(cur, "people_person", PERSON_COLS,
              ((b["person"]["id"], b["person"]["display_name"], b["person"]["headline"], b["person"]["email"],
                b["person"]["phone"], b["person"]["linkedin_url"], b["person"]["external_id"], now) for b in batch))
        _copy(cur, "people_personprofile", PROFILE_COLS,
              (tuple(b["profile"][k] for k in PROFILE_COLS) for b in batch))
        _copy(cur, "people_experiencecard", CARD_COLS,
              (tuple(now if k in ("created_at", "updated_at") else c.get(k) for k in CARD_COLS) for c in cards))
        _copy(cur, "people_experiencecardchild", CHILD_COLS,
              (tuple(now if k in ("created_at", "updated_at") else c.get(k) for k in CHILD_COLS) for c in children))
        refresh_search_documents(person_ids=[b["person"]["id"] for b in batch])
    return len(batch), len(cards), len(children)


HNSW_INDEXES = {
    "card_embedding_hnsw": "people_experiencecard",
    "child_embedding_hnsw": "people_experiencecardchild",
}


def rebuild_hnsw() -> None:
    with connection.cursor() as cur:
        cur.execute("SET maintenance_work_mem = '512MB'")
        for name, table in HNSW_INDEXES.items():
            cur.execute(f"DROP INDEX IF EXISTS {name}")
            cur.execute(f"CREATE INDEX {name} ON {table} USING hnsw (embedding vector_cosine_ops) "
                        "WITH (m = 16, ef_construction = 64)")
        cur.execute("ANALYZE people_experiencecard; ANALYZE people_experiencecardchild; ANALYZE people_personprofile")


def import_records(records: Iterable[tuple[int, Any]], *, embed: str = "inline", batch_size: int = 1000,
                   total: int | None = None, show_progress: bool = True, rebuild_index: bool = False) -> ImportReport:
    """records: (line number, parsed JSON). embed: inline | celery | none. Invalid records are reported, not
    loaded; each batch commits on its own (a crash loses at most one batch)."""
    report = ImportReport()
    batch: list[dict[str, Any]] = []
    bar = tqdm(total=total, unit="people", desc="import", disable=not show_progress)

    def flush() -> None:
        if not batch:
            return
        p, c, ch = _write_batch(batch, embed=(embed == "inline"), show_progress=False)
        report.people += p
        report.cards += c
        report.children += ch
        if embed == "inline":
            report.embedded += c + ch
        elif embed == "celery":
            from people.tasks import embed_cards_task

            ids_p = [str(x["id"]) for b in batch for x in b["cards"]]
            ids_c = [str(x["id"]) for b in batch for x in b["children"]]
            transaction.on_commit(lambda: embed_cards_task.delay(parent_ids=ids_p, child_ids=ids_c))
        bar.update(p)
        batch.clear()

    for lineno, rec in records:
        try:
            if isinstance(rec, RecordError):
                raise rec
            batch.append(validate_record(rec))
        except RecordError as exc:
            report.errors.append(f"line {lineno}: {exc}")
            continue
        if len(batch) >= batch_size:
            flush()
    flush()
    bar.close()
    if report.people:
        from people.vocabulary import rebuild_vocabulary

        rebuild_vocabulary()  # the parser learns the new companies, cities and skills at once
    if rebuild_index:
        rebuild_hnsw()
    return report


def read_jsonl(path: str) -> Iterator[tuple[int, Any]]:
    import json

    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except ValueError as exc:
                yield lineno, RecordError(f"invalid JSON: {exc}")
