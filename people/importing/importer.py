"""Bulk import of people from JSONL or CSV records (also what the demo generator feeds).

The schema is documented in README ("Importing a directory"): one JSON object per person (JSONL), or one CSV row
per experience card with the person's columns repeated (rows sharing `external_id` or `id` are one person).
Why a report and not an exception: one bad row of a 100k-row file must not stop the other 99,999; every rejected
row is reported with its line, field and reason, and the good rows are written.
Why deterministic ids and a content hash: re-importing the same file must change nothing (the same ids, and an
unchanged hash skips the person), and a changed row replaces that person's cards in place, keeping their
searches and unlocks.

Why COPY and not bulk_create: 384-d vectors through bulk_create run ~50x
slower. Why embed before insert: each row is written once, with its vector, and
a large load drops and rebuilds the HNSW index once instead of maintaining it
row by row. Texts go through the EmbeddingCache, so repeated template texts
(demo and benchmark directories) are embedded once.
"""
from __future__ import annotations

import csv
import hashlib
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.utils import timezone
from tqdm import tqdm

from inference.encoders import embed_cached
from people.models import ImportJob
from people.parsing.normalize import normalize_company
from people.parsing.vocabulary import rebuild_vocabulary
from people.retrieval.indexing import refresh_search_documents, vector_literal
from people.tasks import embed_cards_task

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

PERSON_COLS = ("id", "display_name", "headline", "email", "phone", "linkedin_url", "external_id", "import_hash",
               "created_at")
PROFILE_COLS = ("person_id", "bio", "current_city", "open_to_work", "open_to_contact", "work_preferred_locations",
                "work_preferred_salary_min", "contact_email", "contact_phone")
CARD_COLS = ("id", "person_id", "title", "summary", "search_phrases", "embedding", "company_norm", "team_norm",
             "intent_primary", "domain", "sub_domain", "employment_type", "seniority_level", "city", "country",
             "location_text", "start_date", "end_date", "is_current", "visibility", "created_at", "updated_at")
CHILD_COLS = ("id", "parent_id", "person_id", "child_type", "title", "summary", "search_phrases", "embedding",
              "created_at", "updated_at")


class RecordError(ValueError):
    """A rejected row: which line (for CSV, the card's own row), which field, why."""

    def __init__(self, reason: str, *, field: str = "", line: int | None = None) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.reason, self.field, self.line = reason, field, line


# uuid5 namespace of imported rows: person ids from external_id (or the record's content), card ids from the person
IMPORT_NAMESPACE = uuid.UUID("8d3c1f0e-6f7a-4c55-9a43-2b1e0c9d7a11")


@dataclass
class ImportReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    cards: int = 0
    children: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)  # {line, field, reason}
    embedded: int = 0
    to_embed: int = 0

    @property
    def people(self) -> int:
        """People written (created or updated)."""
        return self.created + self.updated

    def as_dict(self) -> dict[str, Any]:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged, "cards": self.cards,
                "children": self.children, "rejected": len(self.errors), "errors": self.errors,
                "embedded": self.embedded, "to_embed": self.to_embed}


def _s(v: Any, n: int) -> str:
    return ("" if v is None else str(v)).strip()[:n]


def _d(v: Any, name: str, line: int | None = None) -> date | None:
    if v in (None, ""):
        return None
    try:
        return date.fromisoformat(str(v)[:10]) if len(str(v)) >= 10 else date.fromisoformat(
            (str(v) + "-01-01")[:10] if len(str(v)) == 4 else (str(v) + "-01")[:10])
    except ValueError:
        raise RecordError(f"not a date (YYYY, YYYY-MM or YYYY-MM-DD): {v!r}", field=name, line=line) from None


def _flag(v: Any, name: str, line: int | None = None) -> bool:
    """JSON booleans, and the CSV spellings true/false, yes/no, 1/0 (empty is false)."""
    if isinstance(v, bool) or v is None:
        return bool(v)
    s = str(v).strip().lower()
    if s in ("", "false", "no", "0", "n"):
        return False
    if s in ("true", "yes", "1", "y"):
        return True
    raise RecordError(f"not a yes/no value: {v!r}", field=name, line=line)


def _phrases(v: Any) -> list[str]:
    if not isinstance(v, list):
        return []
    return [_s(x, 200) for x in v if isinstance(x, str) and x.strip()][:30]


def _text(title: str, summary: str, phrases: list[str]) -> str:
    return " | ".join(p for p in [title, summary, ", ".join(phrases)] if p)


def validate_record(rec: Any) -> dict[str, Any]:  # noqa: C901, PLR0912 - one check per documented field
    """One JSON record -> rows for every table (raises RecordError naming the field and the reason)."""
    if not isinstance(rec, dict):
        raise RecordError("record is not an object")
    name = _s(rec.get("display_name") or rec.get("name"), 200)
    if not name:
        raise RecordError("is required", field="display_name")
    external_id = _s(rec.get("external_id"), 100)
    try:
        given = uuid.UUID(str(rec["id"])) if rec.get("id") else None
    except ValueError:
        raise RecordError("not a UUID", field="id") from None
    prof = rec.get("profile") or {}
    if not isinstance(prof, dict):
        raise RecordError("is not an object", field="profile")
    sal = prof.get("work_preferred_salary_min")
    if isinstance(sal, str) and sal.strip():
        try:
            sal = float(sal.replace(",", ""))
        except ValueError:
            raise RecordError(f"not a number: {sal!r}", field="profile.work_preferred_salary_min") from None
    elif isinstance(sal, str):
        sal = None
    if sal is not None and (isinstance(sal, bool) or not isinstance(sal, (int, float)) or sal < 0):
        raise RecordError("must be a non-negative number (INR/year)", field="profile.work_preferred_salary_min")
    locs = prof.get("work_preferred_locations") or []
    if isinstance(locs, str):
        locs = [x for x in locs.split(";")]
    cards_in = rec.get("cards") or []
    if not isinstance(cards_in, list):
        raise RecordError("is not a list", field="cards")
    cards, children = [], []
    for i, c in enumerate(cards_in):
        if not isinstance(c, dict):
            raise RecordError("is not an object", field=f"cards[{i}]")
        line = c.get("_line")
        title, summary, phrases = _s(c.get("title"), 300), _s(c.get("summary"), 5000), _phrases(c.get("search_phrases"))
        vis = c.get("visibility") or "public"
        if vis not in ("public", "hidden"):
            raise RecordError("must be public or hidden", field=f"cards[{i}].visibility", line=line)
        sd = _d(c.get("start_date"), f"cards[{i}].start_date", line)
        ed = _d(c.get("end_date"), f"cards[{i}].end_date", line)
        if sd and ed and sd > ed:
            sd, ed = ed, sd
        kids = c.get("children") or []
        if not isinstance(kids, list):
            raise RecordError("is not a list", field=f"cards[{i}].children", line=line)
        cards.append({"person_id": None, "title": title, "summary": summary, "search_phrases": phrases,
                      "company_norm": normalize_company(c.get("company_norm") or c.get("company") or ""),
                      "team_norm": _s(c.get("team_norm") or c.get("team"), 120).lower(),
                      "intent_primary": _s(c.get("intent_primary"), 40).lower(), "domain": _s(c.get("domain"), 80).lower(),
                      "sub_domain": _s(c.get("sub_domain"), 80).lower(),
                      "employment_type": _s(c.get("employment_type"), 40).lower(),
                      "seniority_level": _s(c.get("seniority_level"), 40).lower(), "city": _s(c.get("city"), 100).lower(),
                      "country": _s(c.get("country"), 100).lower(), "location_text": _s(c.get("location_text"), 200),
                      "start_date": sd, "end_date": ed,
                      "is_current": _flag(c.get("is_current"), f"cards[{i}].is_current", line), "visibility": vis,
                      "text": _text(title, summary, phrases)})
        for j, ch in enumerate(kids):
            if isinstance(ch, str):
                ch = {"summary": ch}
            if not isinstance(ch, dict):
                raise RecordError("is not an object", field=f"cards[{i}].children[{j}]", line=line)
            t, s, ph = _s(ch.get("title"), 300), _s(ch.get("summary"), 5000), _phrases(ch.get("search_phrases"))
            children.append({"card": i, "person_id": None, "child_type": _s(ch.get("child_type") or "evidence", 40),
                             "title": t, "summary": s, "search_phrases": ph, "text": _text(t, s, ph)})
    out = {
        "person": {"display_name": name, "headline": _s(rec.get("headline"), 300),
                   "email": _s(rec.get("email"), 254), "phone": _s(rec.get("phone"), 40),
                   "linkedin_url": _s(rec.get("linkedin_url"), 200), "external_id": external_id},
        "profile": {"bio": _s(prof.get("bio"), 5000), "current_city": _s(prof.get("current_city"), 100),
                    "open_to_work": _flag(prof.get("open_to_work"), "profile.open_to_work"),
                    "open_to_contact": _flag(prof.get("open_to_contact"), "profile.open_to_contact"),
                    "work_preferred_locations": [_s(x, 100).lower() for x in locs if isinstance(x, str) and x.strip()],
                    "work_preferred_salary_min": int(sal) if sal is not None else None,
                    "contact_email": _s(prof.get("contact_email"), 254), "contact_phone": _s(prof.get("contact_phone"), 40)},
        "cards": cards, "children": children,
    }
    # identity: the given id, else the external id, else the content itself; card ids follow from the person
    digest = hashlib.sha256(json.dumps(out, sort_keys=True, default=str).encode()).hexdigest()
    pid = given or uuid.uuid5(IMPORT_NAMESPACE, f"external:{external_id}" if external_id else f"record:{digest}")
    out["person"]["id"] = pid
    out["profile"]["person_id"] = pid
    out["hash"] = digest
    for i, c in enumerate(cards):
        c["id"], c["person_id"] = uuid.uuid5(pid, f"card:{i}"), pid
    for j, ch in enumerate(children):
        ch["id"], ch["person_id"] = uuid.uuid5(pid, f"child:{ch['card']}:{j}"), pid
        ch["parent_id"] = cards[ch.pop("card")]["id"]
    return out


def _copy(cur: CursorWrapper, table: str, cols: tuple[str, ...], rows: Iterable[tuple]) -> None:
    with cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as cp:
        for row in rows:
            cp.write_row(row)


def _write_batch(batch: list[dict[str, Any]], *, embed: bool, show_progress: bool) -> dict[str, Any]:
    """Write one batch: new people by COPY; changed people (same id, other content hash) get their row and
    profile updated and their cards replaced; unchanged people are skipped. Returns counts and the new card ids."""
    now = timezone.now()
    ids = [b["person"]["id"] for b in batch]
    with connection.cursor() as cur:
        cur.execute("SELECT id, import_hash FROM people_person WHERE id = ANY(%s)", [ids])
        existing = dict(cur.fetchall())
    unchanged = [b for b in batch if existing.get(b["person"]["id"]) == b["hash"]]
    changed = [b for b in batch if b["person"]["id"] in existing and existing[b["person"]["id"]] != b["hash"]]
    new = [b for b in batch if b["person"]["id"] not in existing]
    todo = changed + new
    cards = [c for b in todo for c in b["cards"]]
    children = [c for b in todo for c in b["children"]]
    if embed and (cards or children):
        vecs = embed_cached([c["text"] for c in cards] + [c["text"] for c in children], show_progress=show_progress)
        for c, v in zip(cards + children, vecs, strict=True):
            c["embedding"] = vector_literal(v)
    with transaction.atomic(), connection.cursor() as cur:
        if changed:
            cids = [b["person"]["id"] for b in changed]
            cur.execute("DELETE FROM people_experiencecardchild WHERE person_id = ANY(%s)", [cids])
            cur.execute("DELETE FROM people_experiencecard WHERE person_id = ANY(%s)", [cids])
            cur.execute("DELETE FROM people_personprofile WHERE person_id = ANY(%s)", [cids])
            cur.executemany(
                "UPDATE people_person SET display_name = %s, headline = %s, email = %s, phone = %s, linkedin_url = %s,"
                " external_id = %s, import_hash = %s WHERE id = %s",
                [(b["person"]["display_name"], b["person"]["headline"], b["person"]["email"], b["person"]["phone"],
                  b["person"]["linkedin_url"], b["person"]["external_id"], b["hash"], b["person"]["id"])
                 for b in changed])
        _copy(cur, "people_person", PERSON_COLS,
              ((b["person"]["id"], b["person"]["display_name"], b["person"]["headline"], b["person"]["email"],
                b["person"]["phone"], b["person"]["linkedin_url"], b["person"]["external_id"], b["hash"], now)
               for b in new))
        _copy(cur, "people_personprofile", PROFILE_COLS,
              (tuple(b["profile"][k] for k in PROFILE_COLS) for b in todo))
        _copy(cur, "people_experiencecard", CARD_COLS,
              (tuple(now if k in ("created_at", "updated_at") else c.get(k) for k in CARD_COLS) for c in cards))
        _copy(cur, "people_experiencecardchild", CHILD_COLS,
              (tuple(now if k in ("created_at", "updated_at") else c.get(k) for k in CHILD_COLS) for c in children))
        refresh_search_documents(person_ids=[b["person"]["id"] for b in todo])
    return {"created": len(new), "updated": len(changed), "unchanged": len(unchanged), "cards": len(cards),
            "children": len(children), "card_ids": [str(c["id"]) for c in cards],
            "child_ids": [str(c["id"]) for c in children]}


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
                   total: int | None = None, show_progress: bool = True, rebuild_index: bool = False,
                   job_id: str | None = None) -> ImportReport:
    """records: (line number, parsed record or RecordError). embed: inline | celery | none (celery: one task per
    batch, which advances ImportJob `job_id`'s progress). Invalid records are reported (line, field, reason), not
    loaded; each batch commits on its own (a crash loses at most one batch)."""
    report = ImportReport()
    batch: list[dict[str, Any]] = []
    seen: dict[Any, int] = {}
    bar = tqdm(total=total, unit="people", desc="import", disable=not show_progress)

    def flush() -> None:
        if not batch:
            return
        got = _write_batch(batch, embed=(embed == "inline"), show_progress=False)
        for key in ("created", "updated", "unchanged", "cards", "children"):
            setattr(report, key, getattr(report, key) + got[key])
        n_vec = got["cards"] + got["children"]
        if embed == "inline":
            report.embedded += n_vec
        elif embed == "celery" and n_vec:

            report.to_embed += n_vec
            ids_p, ids_c = got["card_ids"], got["child_ids"]
            transaction.on_commit(lambda: embed_cards_task.delay(parent_ids=ids_p, child_ids=ids_c, job_id=job_id))
        bar.update(len(batch))
        batch.clear()

    for lineno, rec in records:
        try:
            if isinstance(rec, RecordError):
                raise rec
            row = validate_record(rec)
            pid = row["person"]["id"]
            if pid in seen:
                raise RecordError(f"the same person (id or external_id) as line {seen[pid]}; one line per person",
                                  field="external_id" if row["person"]["external_id"] else "id")
            seen[pid] = lineno
            batch.append(row)
        except RecordError as exc:
            report.errors.append({"line": exc.line or lineno, "field": exc.field, "reason": exc.reason})
            continue
        if len(batch) >= batch_size:
            flush()
    flush()
    bar.close()
    if report.people:

        rebuild_vocabulary()  # the parser learns the new companies, cities and skills at once
    if rebuild_index:
        rebuild_hnsw()
    return report


def read_jsonl(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    """One JSON object per line; a line that is not JSON becomes a RecordError for the report."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except ValueError as exc:
            yield lineno, RecordError(f"invalid JSON: {exc}", line=lineno)


PERSON_CSV = ("id", "external_id", "display_name", "headline", "email", "phone", "linkedin_url")
PROFILE_CSV = ("bio", "current_city", "open_to_work", "open_to_contact", "work_preferred_locations",
               "work_preferred_salary_min", "contact_email", "contact_phone")
CARD_CSV = ("title", "summary", "company", "team", "intent_primary", "domain", "sub_domain", "employment_type",
            "seniority_level", "city", "country", "location_text", "start_date", "end_date", "is_current",
            "visibility", "search_phrases", "evidence")
CSV_COLUMNS = PERSON_CSV + PROFILE_CSV + CARD_CSV


def read_csv(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    """One row per experience card; rows with the same `external_id` (or `id`) are one person, whose columns are
    taken from their first row. `search_phrases`, `evidence` and `work_preferred_locations` are `;`-separated.
    A row without a card title, summary or company only carries the person. Unknown columns are a RecordError."""
    reader = csv.DictReader(lines)
    header = reader.fieldnames or []
    unknown = [h for h in header if h not in CSV_COLUMNS]
    if unknown or "display_name" not in header:
        reason = (f"unknown column(s) {', '.join(unknown)}; the columns are: {', '.join(CSV_COLUMNS)}" if unknown
                  else "the header must name display_name (and external_id or id to group a person's rows)")
        yield 1, RecordError(reason, field="header", line=1)
        return
    people: dict[str, tuple[int, dict[str, Any]]] = {}
    for row in reader:
        line = reader.line_num
        if None in row:
            yield line, RecordError("more values than columns", field="row", line=line)
            continue
        key = (row.get("external_id") or row.get("id") or "").strip() or f"line:{line}"
        if key not in people:
            rec: dict[str, Any] = {k: row.get(k) for k in PERSON_CSV if row.get(k)}
            rec["profile"] = {k: row.get(k) for k in PROFILE_CSV if row.get(k) not in (None, "")}
            rec["cards"] = []
            people[key] = (line, rec)
        rec = people[key][1]
        if any((row.get(k) or "").strip() for k in ("title", "summary", "company")):
            card = {k: row.get(k) for k in CARD_CSV if row.get(k) not in (None, "")}
            card["search_phrases"] = [x.strip() for x in (row.get("search_phrases") or "").split(";") if x.strip()]
            card["children"] = [x.strip() for x in (row.get("evidence") or "").split(";") if x.strip()]
            card.pop("evidence", None)
            card["_line"] = line
            rec["cards"].append(card)
    for line, rec in people.values():
        yield line, rec


def import_file(*, lines: Iterable[str], job: ImportJob, embed: str = "celery", batch_size: int = 1000,
                total: int | None = None, show_progress: bool = False,
                rebuild_index: bool = False) -> tuple[ImportJob, ImportReport]:
    """What `manage.py import_people` and the admin upload both run: an ImportJob row, the import, its report.

    `job`: the import as asked, unsaved: its file_format, source_name and created_by (the admin's upload form builds
    exactly this row). It is saved before the first batch commits, so the Celery embedding tasks can advance its
    progress."""
    if job.file_format not in ("jsonl", "csv"):
        raise ValueError(f"unknown format {job.file_format!r}: jsonl or csv")
    job.source_name = (job.source_name or "")[:300]
    job.save()
    reader = read_csv if job.file_format == "csv" else read_jsonl
    report = import_records(reader(lines), embed=embed, batch_size=batch_size, total=total,
                            show_progress=show_progress, rebuild_index=rebuild_index, job_id=str(job.pk))
    done = report.embedded if embed == "inline" else 0
    # an update of the counted fields only: embed_done may already be advancing from the worker
    ImportJob.objects.filter(pk=job.pk).update(
        created=report.created, updated=report.updated, unchanged=report.unchanged, cards=report.cards,
        rejected=len(report.errors), errors=report.errors[:1000], embed_total=report.to_embed + done)
    if done:
        ImportJob.objects.filter(pk=job.pk).update(embed_done=done)
    job.refresh_from_db()
    return job, report
