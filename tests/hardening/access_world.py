"""Random worlds for the access-control property, shared by the test and the bench.

Why a pool: embedding and indexing are the slow part, so a fixed pool of small datasets (code, web,
two rulebooks, each with its own made-up token) is ingested once, and every generated world only
rewrites who owns what in Postgres: dataset owners, global flags, shares granted and revoked,
documents moved between datasets. None of those changes go through the outbox, so the Qdrant payload
(dataset_id, project_id) stays exactly as it was at ingest: every world is a stale-payload world.
Each world runs inside a savepoint that is rolled back, so the pool survives between examples.

The expected accessible set is computed here from the generated world (a few set operations over the
model below), never from projects/access.py.

Channels checked per query: context query API (results, why, pack files and spans, log rows), rules
search API (results, candidate_ids, book filter, log rows), rules answer API (SSE context and
citations, log rows), and non-members (404, nothing logged). People search has no datasets: people
are one catalogue for every paying user; its access rule is card visibility, checked by
`check_people_world`.
"""
from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# --------------------------------------------------------------------------- the pool
TOKENS = ["zephyrine", "blorptex", "quandrivel", "morphalux", "snizzlewick", "trevanthor", "glimmerack",
          "voxtrundle"]
KINDS = ["code", "code", "code", "code", "web", "web", "rules", "rules"]
BOOKS = {6: "alpha-codex", 7: "beta-codex"}
COMMON = "lantern"  # every document mentions it, so one query reaches every dataset
HOME = -1  # the pool's own project, of which no generated user is a member
N_DS = len(TOKENS)


def _code_files(tok: str) -> dict[str, str]:
    return {
        f"{tok}/engine.py": textwrap.dedent(f'''\
            """The {tok} engine keeps the {COMMON} lit."""


            def {tok}_ignite(fuel):
                """Ignite the {tok} {COMMON} with fuel."""
                return fuel * 2


            def {tok}_douse(water):
                """Douse the {tok} flame."""
                return water - 1
            '''),
        f"{tok}/notes.py": textwrap.dedent(f'''\
            """Notes about {tok} and its {COMMON}."""

            {tok.upper()}_LIMIT = 7


            class {tok.title()}Keeper:
                """Keeps {tok} records for the {COMMON} room."""

                def count(self):
                    return {tok.upper()}_LIMIT
            '''),
    }


def _web_files(tok: str) -> dict[str, str]:
    return {
        f"{tok}/guide.html": textwrap.dedent(f'''\
            <html><head><title>{tok.title()} guide</title></head><body><article>
            <h1>{tok.title()} guide</h1><p>The {tok} guide explains how the {COMMON} works.</p>
            <h2>{tok.title()} care</h2><p>Clean the {tok} {COMMON} every week with a dry cloth.</p>
            </article></body></html>
            '''),
    }


def _rules_files(tok: str) -> dict[str, str]:
    return {
        "Rules.md": textwrap.dedent(f'''\
            # {tok.title()} Rules

            ## {tok.title()} Dash

            When you {tok}, you can move an extra 10 feet and carry a {COMMON}. Make a DC 12 saving throw or
            take 1d6 damage from the {tok} surge.

            ## {tok.title()} Ward

            A creature holding a {tok} {COMMON} has advantage on saving throws against fear. The ward ends
            after 1d4 rounds.
            '''),
    }


@dataclass
class Pool:
    home_id: int
    dataset_ids: list[int]  # index -> Dataset pk
    doc_ids: list[int]  # index -> Document pk
    doc_ds: list[int]  # document index -> dataset index at ingest
    chunk_doc: dict[int, int]  # chunk pk -> document index
    chunk_kind: dict[int, str]

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)


def build_pool(root: Path) -> Pool:
    """Ingest the pool for real (chunker, embeddings, outbox, Qdrant) into project `pool-home`."""
    from projects.models import Project
    from search.engine.applier import apply_outbox
    from search.ingest.jobs import start_ingest
    from search.models import Chunk, Dataset, Document, IngestJob
    from search.rules.ingest import ingest_rulebook

    home, _ = Project.objects.get_or_create(slug="pool-home", defaults={"name": "Pool home"})
    ds_ids = []
    for i, (tok, kind) in enumerate(zip(TOKENS, KINDS, strict=True)):
        src = root / f"ds{i}"
        files = {"code": _code_files, "web": _web_files, "rules": _rules_files}[kind](tok)
        for rel, text in files.items():
            p = src / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        ds = Dataset.objects.create(project=home, name=f"pool-{i}-{tok}", kind=kind)
        if kind == "rules":
            ingest_rulebook(dataset=ds, path=src, ruleset_id=f"rs-{tok}", book_id=BOOKS[i])
        else:
            start_ingest(job=IngestJob(dataset=ds, source=str(src), kind=kind, options={"repo": tok}), sync=True)
        ds_ids.append(ds.pk)
    apply_outbox()
    docs = list(Document.objects.filter(dataset_id__in=ds_ids).order_by("pk").values_list("pk", "dataset_id"))
    idx = {pk: i for i, pk in enumerate(ds_ids)}
    doc_index = {pk: n for n, (pk, _) in enumerate(docs)}
    chunk_doc, chunk_kind = {}, {}
    for pk, doc_id, kind in Chunk.objects.filter(dataset_id__in=ds_ids).values_list("pk", "document_id", "kind"):
        chunk_doc[pk] = doc_index[doc_id]
        chunk_kind[pk] = kind
    pool = Pool(home_id=home.pk, dataset_ids=ds_ids, doc_ids=[d for d, _ in docs],
                doc_ds=[idx[ds] for _, ds in docs], chunk_doc=chunk_doc, chunk_kind=chunk_kind)
    assert len(chunk_doc) <= 50, "the pool must fit one top_k=50 page for the completeness check"
    assert {pool.doc_ds[i] for i in range(pool.n_docs)} == set(range(N_DS)), "every pool dataset has documents"
    return pool


# --------------------------------------------------------------------------- generated worlds
_IDX = st.integers(0, 99)  # indexes are taken modulo the world's sizes, so shrinking stays simple
_query_text = st.one_of(
    st.sampled_from(TOKENS).map(lambda t: f"{t} {COMMON}"),
    st.tuples(st.sampled_from(TOKENS), st.sampled_from(TOKENS)).map(lambda t: f"{t[0]} and {t[1]}"),
    st.just(f"how does the {COMMON} work"),
    st.tuples(st.sampled_from(list(BOOKS.values())), st.sampled_from(TOKENS)).map(
        lambda t: f"in the {t[0].replace('-', ' ')}: {t[1]} dash saving throw"),
)
_mutation = st.one_of(
    st.tuples(st.just("grant"), _IDX, _IDX),  # dataset, project
    st.tuples(st.just("revoke"), _IDX, _IDX),
    st.tuples(st.just("owner"), _IDX, _IDX),  # dataset, project (last value = pool home)
    st.tuples(st.just("global"), _IDX, st.booleans()),
    st.tuples(st.just("move_doc"), _IDX, _IDX),  # document, dataset
)
_query = st.tuples(st.just("query"), _IDX, _IDX, st.sampled_from(["context", "context", "rules", "answer"]),
                   _query_text, st.booleans(), st.sampled_from([5, 50]))  # user, project, channel, q, global, top_k
_open = st.tuples(st.just("open"), _IDX, _IDX)  # user, chunk: the cited-section page /rules/chunk/<id>
# rounds of (a few Postgres-only mutations, one query, maybe opening cited sections), flattened into one op list
_ops = st.lists(st.tuples(st.lists(_mutation, max_size=3), _query, st.lists(_open, max_size=2)),
                min_size=1, max_size=5).map(lambda rounds: [op for muts, q, opens in rounds for op in (*muts, q, *opens)])
worlds = st.fixed_dictionaries({
    "n_projects": st.integers(1, 4),
    "n_users": st.integers(1, 3),
    "extra_members": st.lists(st.tuples(_IDX, _IDX), max_size=6),
    "owners": st.lists(_IDX, min_size=N_DS, max_size=N_DS),
    "globals": st.lists(st.integers(0, 3).map(lambda n: n == 0), min_size=N_DS, max_size=N_DS),
    "shares": st.lists(st.tuples(_IDX, _IDX), max_size=6),
    "ops": _ops,
})


@dataclass
class Model:
    """The world as the test believes it to be; `expected` is the specification of access."""

    n_projects: int
    owner: list[int]  # dataset index -> project index or HOME
    is_global: list[bool]
    shares: set[tuple[int, int]] = field(default_factory=set)  # active (dataset, project)
    doc_ds: list[int] = field(default_factory=list)

    def expected(self, p: int, include_global: bool = True) -> set[int]:
        return ({d for d in range(N_DS) if self.owner[d] == p}
                | ({d for d in range(N_DS) if self.is_global[d]} if include_global else set())
                | {d for d, q in self.shares if q == p})


@dataclass
class Stats:
    worlds: int = 0
    queries: int = 0
    non_member_queries: int = 0
    results_checked: int = 0  # results + candidate ids + pack spans + citations + log rows
    log_rows_checked: int = 0
    leaks: list[str] = field(default_factory=list)
    completeness_checks: int = 0
    pages_opened: int = 0
    mutations: int = 0
    people_searches: int = 0
    people_checked: int = 0

    def merge(self, other: Stats) -> None:
        for k, v in vars(other).items():
            if isinstance(v, list):
                getattr(self, k).extend(v)
            else:
                setattr(self, k, getattr(self, k) + v)


class _Rollback(Exception):
    pass


def _parse_sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        event, data = "message", ""
        for line in block.splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data += line[6:]
        events.append((event, json.loads(data)))
    return events


class WorldRunner:
    """Applies one generated world to Postgres (inside a savepoint), runs its queries, records leaks."""

    def __init__(self, pool: Pool, world: dict[str, Any], stats: Stats) -> None:
        self.pool, self.w, self.stats = pool, world, stats
        self.ds_index = {pk: i for i, pk in enumerate(pool.dataset_ids)}

    # ---- setup
    def build(self) -> None:
        from rest_framework.test import APIClient

        from accounts.apikeys import issue_api_key
        from accounts.models import User
        from projects.models import Membership, Project
        from search.models import Dataset, ProjectShare

        w, pool = self.w, self.pool
        n = w["n_projects"]
        self.projects = [Project.objects.create(slug=f"w-p{i}", name=f"P{i}") for i in range(n)]
        self.users, self.clients, self.member = [], [], set()
        for u in range(w["n_users"]):
            user = User.objects.create_user(email=f"w-u{u}@example.com", password="pw-secret-123")
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(user=user).secret}")
            self.users.append(user)
            self.clients.append(client)
            self.member.add((u, u % n))
        for u, p in w["extra_members"]:
            self.member.add((u % w["n_users"], p % n))
        Membership.objects.bulk_create([Membership(project=self.projects[p], user=self.users[u], role="viewer")
                                        for u, p in sorted(self.member)])
        owners = [o % (n + 1) for o in w["owners"]]
        owners = [HOME if o == n else o for o in owners]
        self.model = Model(n_projects=n, owner=owners, is_global=list(w["globals"]), doc_ds=list(pool.doc_ds))
        for d in range(N_DS):
            Dataset.objects.filter(pk=pool.dataset_ids[d]).update(
                project_id=pool.home_id if owners[d] == HOME else self.projects[owners[d]].pk,
                is_global=self.model.is_global[d])
        for d, p in w["shares"]:
            d, p = d % N_DS, p % n
            if (d, p) not in self.model.shares:
                ProjectShare.objects.create(dataset_id=pool.dataset_ids[d], project=self.projects[p])
                self.model.shares.add((d, p))

    # ---- mutations (Postgres only: the outbox is not written, so Qdrant keeps its old payload)
    def mutate(self, op: tuple) -> None:
        from django.utils import timezone

        from search.models import Chunk, Dataset, Document, ProjectShare

        m, pool, n = self.model, self.pool, self.model.n_projects
        kind = op[0]
        self.stats.mutations += 1
        if kind == "grant":
            d, p = op[1] % N_DS, op[2] % n
            if (d, p) not in m.shares:
                ProjectShare.objects.create(dataset_id=pool.dataset_ids[d], project=self.projects[p])
                m.shares.add((d, p))
        elif kind == "revoke":
            d, p = op[1] % N_DS, op[2] % n
            if (d, p) in m.shares:
                ProjectShare.objects.filter(dataset_id=pool.dataset_ids[d], project=self.projects[p],
                                            revoked_at__isnull=True).update(revoked_at=timezone.now())
                m.shares.discard((d, p))
        elif kind == "owner":
            d, p = op[1] % N_DS, op[2] % (n + 1)
            m.owner[d] = HOME if p == n else p
            Dataset.objects.filter(pk=pool.dataset_ids[d]).update(
                project_id=pool.home_id if p == n else self.projects[p].pk)
        elif kind == "global":
            d = op[1] % N_DS
            m.is_global[d] = op[2]
            Dataset.objects.filter(pk=pool.dataset_ids[d]).update(is_global=op[2])
        elif kind == "move_doc":
            doc, d = op[1] % pool.n_docs, op[2] % N_DS
            m.doc_ds[doc] = d
            Document.objects.filter(pk=pool.doc_ids[doc]).update(dataset_id=pool.dataset_ids[d])
            Chunk.objects.filter(document_id=pool.doc_ids[doc]).update(dataset_id=pool.dataset_ids[d])

    # ---- checks
    def true_ds(self, chunk_id: int) -> int | None:
        doc = self.pool.chunk_doc.get(chunk_id)
        return None if doc is None else self.model.doc_ds[doc]

    def _check_chunk(self, where: str, chunk_id: Any, allowed: set[int], dataset_pk: Any = None) -> None:
        self.stats.results_checked += 1
        d = self.true_ds(chunk_id)
        if d is None or d not in allowed:
            self.stats.leaks.append(f"{where}: chunk {chunk_id} of dataset index {d} not in {sorted(allowed)}")
        if dataset_pk is not None and self.ds_index.get(dataset_pk) not in allowed:
            self.stats.leaks.append(f"{where}: dataset_id {dataset_pk} (index {self.ds_index.get(dataset_pk)}) "
                                    f"not in {sorted(allowed)}")

    def _check_log(self, where: str, session_id: str | None, p: int, allowed: set[int]) -> None:
        from search.models import QuerySession, RerankResult

        if session_id is None:
            self.stats.leaks.append(f"{where}: no search_session_id")
            return
        s = QuerySession.objects.get(pk=session_id)
        if s.project_id != self.projects[p].pk:
            self.stats.leaks.append(f"{where}: session logged under project {s.project_id}")
        for chunk_id, ds_pk, proj_pk in RerankResult.objects.filter(session_id=session_id).values_list(
                "chunk_id", "dataset_id", "project_id"):
            self.stats.log_rows_checked += 1
            self._check_chunk(f"{where} log row", chunk_id, allowed, ds_pk)
            if proj_pk != self.projects[p].pk:
                self.stats.leaks.append(f"{where} log row: project_id {proj_pk}")

    def query(self, op: tuple) -> None:
        from search.models import QuerySession

        _, u, p, channel, q, include_global, top_k = op
        u, p = u % len(self.users), p % self.model.n_projects
        client, slug = self.clients[u], self.projects[p].slug
        where = f"{channel} u{u}@p{p} {q!r} global={include_global} top_k={top_k}"
        is_member = (u, p) in self.member
        before = QuerySession.objects.count()
        if channel == "context":
            resp = client.post(f"/api/projects/{slug}/query", {"q": q, "include_global": include_global,
                                                                "top_k": top_k, "candidates": 200}, format="json")
        else:
            include_global = True  # rules search and answers always see global rulebooks
            url = f"/api/projects/{slug}/{'rules/search' if channel == 'rules' else 'answer'}"
            resp = client.post(url, {"q": q, "top_k": min(top_k, 8)}, format="json")
        self.stats.queries += 1
        if not is_member:
            self.stats.non_member_queries += 1
            if resp.status_code != 404 or QuerySession.objects.count() != before:
                self.stats.leaks.append(f"{where}: non-member got {resp.status_code} or a logged session")
            return
        assert resp.status_code == 200, (where, resp.status_code, getattr(resp, "content", b"")[:500])
        allowed = self.model.expected(p, include_global)
        if channel == "context":
            data = resp.json()
            got = set()
            for r in data["results"]:
                self._check_chunk(where, r["chunk_id"], allowed, r["dataset_id"])
                got.add(r["chunk_id"])
                if self.ds_index.get(r["why"]["dataset_id"]) not in allowed:
                    self.stats.leaks.append(f"{where}: why.dataset_id {r['why']['dataset_id']}")
            for f in data["pack"]["files"]:
                if self.ds_index.get(f["dataset_id"]) not in allowed:
                    self.stats.leaks.append(f"{where}: pack file {f['path']} of dataset {f['dataset_id']}")
                for s in f["spans"]:
                    for cid in s["chunk_ids"]:
                        self._check_chunk(f"{where} pack", cid, allowed)
                        if cid not in got:
                            self.stats.leaks.append(f"{where}: pack chunk {cid} is not a result")
            self._check_log(where, data["search_session_id"], p, allowed)
            if top_k == 50:
                # completeness (the filter is not simply empty): with every candidate admitted, the results are
                # exactly the chunks whose ingest-time payload AND current Postgres row are both accessible
                want = {c for c, doc in self.pool.chunk_doc.items()
                        if self.pool.doc_ds[doc] in allowed and self.model.doc_ds[doc] in allowed}
                self.stats.completeness_checks += 1
                assert got == want, (where, "missing", sorted(want - got), "extra", sorted(got - want))
        elif channel == "rules":
            data = resp.json()
            for r in data["results"]:
                self._check_chunk(where, r["chunk_id"], allowed, r["dataset_id"])
                if self.pool.chunk_kind.get(r["chunk_id"]) != "rules":
                    self.stats.leaks.append(f"{where}: non-rules chunk {r['chunk_id']} in rules search")
            for cid in data["candidate_ids"]:
                self._check_chunk(f"{where} candidate", cid, allowed)
            allowed_books = {BOOKS[d] for d in allowed if d in BOOKS}
            if data["filters"]["book_from_query"] and not set(data["filters"]["book"]) <= allowed_books:
                self.stats.leaks.append(f"{where}: book filter names {data['filters']['book']}")
            self._check_log(where, data["search_session_id"], p, allowed)
        else:
            events = _parse_sse(b"".join(resp.streaming_content))
            kinds = [e for e, _ in events]
            assert kinds[0] == "search" and kinds[-1] == "complete", (where, kinds)
            for e, d in events:
                if e == "context":
                    for c in d["chunks"]:
                        self._check_chunk(f"{where} context", c["chunk_id"], allowed)
                elif e == "complete":
                    for c in d["citations"]:
                        self._check_chunk(f"{where} citation", c["chunk_id"], allowed)
            self._check_log(where, events[0][1]["search_session_id"], p, allowed)

    def open_chunk(self, op: tuple) -> None:
        """The page a citation links to: 200 iff one of the user's projects may see the chunk, else 404."""
        from django.test import Client

        u = op[1] % len(self.users)
        chunk_ids = sorted(self.pool.chunk_doc)
        chunk_id = chunk_ids[op[2] % len(chunk_ids)]
        visible = set().union(*[self.model.expected(p) for (v, p) in self.member if v == u])
        client = Client()
        client.force_login(self.users[u])
        status = client.get(f"/rules/chunk/{chunk_id}").status_code
        self.stats.pages_opened += 1
        self.stats.results_checked += 1
        if status == 200 and self.true_ds(chunk_id) not in visible:
            self.stats.leaks.append(f"u{u} opened chunk {chunk_id} of dataset index {self.true_ds(chunk_id)}")
        assert status == (200 if self.true_ds(chunk_id) in visible else 404), ("open", u, chunk_id, status)

    def run(self) -> None:
        self.build()
        ops = list(self.w["ops"])
        for op in ops:
            if op[0] == "query":
                self.query(op)
            elif op[0] == "open":
                self.open_chunk(op)
            else:
                self.mutate(op)


def check_world(pool: Pool, world: dict[str, Any]) -> Stats:
    """Run one world in a savepoint that is always rolled back; returns its stats (leaks listed, not raised)."""
    from django.core.cache import cache
    from django.db import transaction

    stats = Stats(worlds=1)
    cache.clear()  # rate-limit counters: every world starts fresh
    try:
        with transaction.atomic():
            WorldRunner(pool, world, stats).run()
            raise _Rollback
    except _Rollback:
        pass
    return stats


# --------------------------------------------------------------------------- people: card visibility
PEOPLE_QUERIES = ["backend engineer who built payment services", "data scientist working on fraud models",
                  "frontend developer with react experience", "engineer in bangalore"]


@dataclass
class PeoplePool:
    card_person: dict[str, str]  # card id -> person id
    child_parent: dict[str, str]  # child card id -> parent card id

    @property
    def cards(self) -> list[str]:
        return sorted(self.card_person)


def build_people_pool() -> PeoplePool:
    from people.models import ExperienceCard, ExperienceCardChild, Person, PersonProfile
    from people.retrieval.indexing import embed_cards

    specs = [("Asha", "backend", "Backend Engineer", "Payment services in Java and Kafka"),
             ("Ravi", "backend", "Backend Engineer", "Go microservices for search"),
             ("Meera", "data", "Data Scientist", "Fraud models with gradient boosting"),
             ("Kiran", "data", "Data Scientist", "Forecasting demand for groceries"),
             ("Tara", "frontend", "Frontend Developer", "React dashboards for payments"),
             ("Vikram", "frontend", "Frontend Developer", "Design systems in React")]
    card_person, child_parent = {}, {}
    for i, (name, intent, title, summary) in enumerate(specs):
        person = Person.objects.create(display_name=name, headline=title)
        PersonProfile.objects.create(person=person, open_to_work=True, open_to_contact=True, current_city="bangalore")
        for j in range(2):
            card = ExperienceCard.objects.create(person=person, title=title, summary=f"{summary} ({j})",
                                                 intent_primary=intent, city="bangalore", country="india",
                                                 company_norm=f"co{i}{j}", search_phrases=[title.lower()])
            card_person[str(card.pk)] = str(person.pk)
            child = ExperienceCardChild.objects.create(parent=card, person=person, title="Impact",
                                                       summary=f"{summary}: shipped to production")
            child_parent[str(child.pk)] = str(card.pk)
    embed_cards(parent_ids=[c for c in card_person], child_ids=[c for c in child_parent])
    return PeoplePool(card_person=card_person, child_parent=child_parent)


people_worlds = st.fixed_dictionaries({
    "hidden": st.lists(st.booleans(), min_size=12, max_size=12),
    "queries": st.lists(st.sampled_from(PEOPLE_QUERIES), min_size=1, max_size=2),
})


def check_people_world(pool: PeoplePool, world: dict[str, Any]) -> Stats:
    """Hide a random set of cards; no search result, matched card or logged match may come from a hidden card."""
    from django.core.cache import cache
    from django.db import transaction
    from rest_framework.test import APIClient

    from accounts.apikeys import issue_api_key
    from accounts.models import User
    from credits.ledger import grant
    from people.models import ExperienceCard, SearchResult

    stats = Stats(worlds=1)
    cache.clear()
    try:
        with transaction.atomic():
            cards = pool.cards
            hidden = {c for c, h in zip(cards, world["hidden"], strict=False) if h}
            ExperienceCard.objects.filter(pk__in=list(hidden)).update(visibility="hidden")
            visible_people = {pool.card_person[c] for c in cards if c not in hidden}
            user = User.objects.create_user(email="w-people@example.com", password="pw-secret-123")
            grant(user=user, amount=10, reason="test")
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(user=user).secret}")
            for q in world["queries"]:
                resp = client.post("/api/search", {"query": q}, format="json")
                assert resp.status_code == 200, (q, resp.status_code, resp.content[:500])
                stats.people_searches += 1
                stats.queries += 1
                body = resp.json()
                for person in body["people"]:
                    stats.people_checked += 1
                    stats.results_checked += 1
                    if person["id"] not in visible_people:
                        stats.leaks.append(f"people {q!r}: {person['name']} has only hidden cards")
                    for card in person["matched_cards"]:
                        stats.results_checked += 1
                        if card["id"] in hidden:
                            stats.leaks.append(f"people {q!r}: hidden card {card['id']} shown")
                for extra in SearchResult.objects.filter(search_id=body["search_id"]).values_list("extra", flat=True):
                    stats.log_rows_checked += 1
                    stats.results_checked += 1
                    bad = [c for c in extra.get("matched_parent_ids", []) if c in hidden]
                    bad += [c for c in extra.get("matched_child_ids", []) if pool.child_parent.get(c) in hidden]
                    if bad:
                        stats.leaks.append(f"people {q!r}: logged match on hidden cards {bad}")
            raise _Rollback
    except _Rollback:
        pass
    return stats
