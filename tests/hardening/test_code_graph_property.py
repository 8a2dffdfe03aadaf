"""Property: random sequences of pushes, uploads, git syncs (full, then diffs) and deletes keep the symbol graph
and grep's trigrams exactly equal to a fresh build of the content each document holds.

Each hypothesis example is a fresh world inside a rolled-back savepoint, with its own embedded store and git
remote. After every step the pending jobs run as the worker runs them, then, for every document: its stored
CodeFile, Symbol and SymbolRef rows equal what ingesting its source text from scratch gives (the text is known
by its content hash), no row belongs to a document that is gone, and `reconcile_code`'s check finds it exact.
"""
from __future__ import annotations

import hashlib
import io
import textwrap
import zipfile

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.search.code_fixtures import JOBS_PY, SERVICE_PY
from tests.search.ctx_fixtures import LEDGER_PY, ROUTES_JS
from tests.search.sources.git_fixtures import GitRemote

# path -> its versions: definitions renamed, imports dropped, a base class changed, functions added
VERSIONS = {
    "billing/ledger.py": [LEDGER_PY, LEDGER_PY.replace("def deduct_credits", "def take_credits")
                          .replace("class Wallet:", "class Wallet(Base):")],
    "shop/service.py": [SERVICE_PY, SERVICE_PY.replace("import billing.ledger as ledger\n", "")],
    "shop/jobs.py": [JOBS_PY, JOBS_PY + textwrap.dedent('''\


        def weekly(wallets):
            return [notify(w) for w in wallets]
        ''')],
    "web/routes.js": [ROUTES_JS, ROUTES_JS + "\nexport function refund(req, res) {\n  res.json(checkoutCart(req));\n}\n"],
}
BY_HASH = {hashlib.sha256(t.encode()).hexdigest(): (p, t) for p, vs in VERSIONS.items() for t in vs}
TREE = st.dictionaries(st.sampled_from(sorted(VERSIONS)), st.integers(0, 1), min_size=1)
EXAMPLES = 12
OPS = st.one_of(
    st.tuples(st.just("create")),
    st.tuples(st.just("push"), st.integers(0, 3), TREE),
    st.tuples(st.just("upload"), st.integers(0, 3), TREE),
    st.tuples(st.just("delete_doc"), st.integers(0, 3), st.sampled_from(sorted(VERSIONS))),
    st.tuples(st.just("delete_dataset"), st.integers(0, 3)),
    st.tuples(st.just("sync"), TREE),
)


def _zip(tree: dict[str, int]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, v in sorted(tree.items()):
            zf.writestr(f"repo/{path}", VERSIONS[path][v])
    return buf.getvalue()


def _run_pending() -> None:
    from search.ingest.jobs import run_job
    from search.models import IngestJob

    for job in IngestJob.objects.filter(status="pending"):
        try:
            run_job(job=job)
        except Exception:  # noqa: BLE001 - a failed job must leave the graph exact too; the check says
            pass


def _step(op: tuple, w: dict) -> None:
    from search.ingest import content
    from search.ingest.sharing import create_dataset
    from search.models import Dataset
    from search.sources.spec import SourceSpec
    from search.sources.sync import set_source, start_sync

    kind = op[0]
    if kind == "create":
        w["created"] += 1
        create_dataset(user=w["owner"], project=w["project"], name=f"ds{w['created']}", kind="code")
        return
    if kind == "sync":
        w["remote"].commit({p: VERSIONS[p][v] for p, v in op[1].items()})
        if not hasattr(w["git"], "source"):
            set_source(user=None, dataset=w["git"], spec=SourceSpec(type="git", config={"url": w["remote"].url,
                       "ref": "main", "subdir": ""}, local=True), interval_s=None, token=None)
        try:
            start_sync(dataset=w["git"], run_now=True)
        except Exception:  # noqa: BLE001 - a failed sync must leave the graph exact too
            pass
        w["git"].refresh_from_db()
        return
    pushable = list(Dataset.objects.filter(project=w["project"]).exclude(pk=w["git"].pk).order_by("pk"))
    if not pushable:
        return
    pick = pushable[op[1] % len(pushable)]
    if kind == "push":
        docs = [{"external_id": p, "path": p, "text": VERSIONS[p][v]} for p, v in sorted(op[2].items())]
        content.push_documents(user=w["owner"], dataset=pick, documents=docs)
    elif kind == "upload":
        content.upload(user=w["owner"], dataset=pick, filename="repo.zip", data=_zip(op[2]))
    elif kind == "delete_doc":
        content.delete_documents(user=w["owner"], dataset=pick, external_ids=[op[2]], paths=[op[2]])
    elif kind == "delete_dataset":
        pick.delete()


def _fresh(path: str, text: str, lang: str):
    """What ingesting `text` at `path` from scratch writes: the chunker, then the facts of the indexed text."""
    from search.engine.grep import trigrams
    from search.ingest.code import chunk_file
    from search.ingest.code_facts import facts_of
    from search.ingest.symbols import indexed_text

    chunks, _ = chunk_file(path=path, text=text, lang=lang)
    indexed = indexed_text((c.start_line, c.end_line, c.text) for c in chunks)
    return facts_of(path=path, lang=lang, text=indexed), trigrams(indexed)


def _check(w: dict) -> int:
    from search.ingest.code_facts import check, stored_facts
    from search.models import CodeFile, Document, Symbol, SymbolRef

    docs = list(Document.objects.filter(dataset__project=w["project"]))
    stored = stored_facts(d.pk for d in docs)
    files = {f.document_id: f for f in CodeFile.objects.filter(document__in=docs)}
    for doc in docs:
        path, text = BY_HASH[doc.content_hash]
        assert path == doc.path
        facts, grams = _fresh(doc.path, text, doc.lang)
        assert stored[doc.pk] == facts, doc.path
        assert list(files[doc.pk].trigrams) == grams and files[doc.pk].symbols_digest == facts.digest()
    live = {d.pk for d in Document.objects.all()}
    for model in (CodeFile, Symbol, SymbolRef):
        assert set(model.objects.values_list("document_id", flat=True)) <= live
    assert check().exact
    return len(docs)


@pytest.mark.slow
@pytest.mark.django_db
def test_random_content_changes_keep_the_symbol_graph_equal_to_a_fresh_build(make_user, make_project, tmp_path,
                                                                            settings):
    from django.db import transaction

    from search.engine.index import open_index, set_index
    from search.models import Dataset

    settings.SOURCES_GIT_DIR = tmp_path / "mirrors"
    stats = {"examples": 0, "steps": 0, "documents": 0, "syncs": 0}

    @hsettings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))
    @given(st.lists(OPS, min_size=3, max_size=7))
    def run(ops: list[tuple]) -> None:
        stats["examples"] += 1
        n = stats["examples"]
        index = open_index(path=tmp_path / f"q{n}")
        set_index(index)
        try:
            with transaction.atomic():
                owner = make_user(f"owner{n}@example.com")
                project = make_project(f"p{n}", owner)
                w = {"owner": owner, "project": project, "remote": GitRemote(tmp_path / f"remote{n}"),
                     "git": Dataset.objects.create(project=project, name="git", kind="code"), "created": 0}
                for op in ops:
                    _step(op, w)
                    _run_pending()
                    stats["documents"] += _check(w)
                    stats["steps"] += 1
                    stats["syncs"] += op[0] == "sync"
                transaction.set_rollback(True)
        finally:
            set_index(None)
            index.close()

    run()
    assert stats["steps"] >= 40 and stats["documents"] > 0 and stats["syncs"] > 0, stats
