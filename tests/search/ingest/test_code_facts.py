"""The code rows follow every write and delete of a document in its transaction (search.ingest.code_facts), and
`check` proves them equal to a fresh build from the chunks, finds drift and repairs it."""
from __future__ import annotations

from tests.search.code_fixtures import FILES, code_world, edge_index  # noqa: F401 - fixtures


def _qualnames(dataset, path):
    from search.models import Symbol

    return sorted(Symbol.objects.filter(dataset=dataset, path=path).values_list("qualname", flat=True))


def test_ingest_writes_a_code_file_for_every_document_and_symbols_for_parsed_ones(code_world):
    from search.ingest.code_facts import check
    from search.models import CodeFile, Document

    ds = code_world["dataset"]
    assert set(CodeFile.objects.filter(dataset=ds).values_list("path", flat=True)) == \
        set(Document.objects.filter(dataset=ds).values_list("path", flat=True)) == set(FILES)
    assert _qualnames(ds, "shop/service.py") == ["Checkout", "Checkout.notify", "Checkout.pay"]
    assert _qualnames(ds, "web/routes.js") == ["checkoutCart", "listProducts"]
    assert check().exact


def test_rewriting_a_file_replaces_only_its_rows_and_deleting_it_drops_them(code_world):
    from search.ingest.code import code_document
    from search.ingest.code_facts import check
    from search.ingest.writer import delete_documents, write_documents
    from search.models import CodeFile, Symbol, SymbolRef

    ds = code_world["dataset"]
    before_other = list(Symbol.objects.filter(dataset=ds, path="billing/ledger.py").values_list("pk", flat=True))
    draft, _ = code_document(rel="shop/jobs.py", data=b"def renamed():\n    return 1\n", repo="app")
    write_documents(dataset=ds, drafts=[draft])
    assert _qualnames(ds, "shop/jobs.py") == ["renamed"]
    assert list(Symbol.objects.filter(dataset=ds, path="billing/ledger.py").values_list("pk", flat=True)) == \
        before_other  # untouched files keep their rows
    assert check().exact
    delete_documents(dataset=ds, paths=["shop/jobs.py"])
    for model in (CodeFile, Symbol, SymbolRef):
        assert not model.objects.filter(dataset=ds, path="shop/jobs.py").exists()
    assert check().exact


def test_check_finds_drift_and_missing_rows_and_fix_rebuilds_them(code_world):
    from search.ingest.code_facts import check
    from search.models import CodeFile, Symbol, SymbolRef

    ds = code_world["dataset"]
    Symbol.objects.filter(dataset=ds, path="billing/ledger.py", name="deduct_credits").update(start_line=1)
    SymbolRef.objects.filter(dataset=ds, path="shop/jobs.py").first().delete()
    CodeFile.objects.filter(dataset=ds, path="web/routes.js").delete()
    found = check()
    assert not found.exact and len(found.drifted) == 2 and len(found.missing) == 1
    fixed = check(fix=True)
    assert fixed.fixed and fixed.exact and fixed.after is not None and fixed.after.as_dict()["drifted"] == 0
    assert check().exact


def test_a_deleted_dataset_leaves_no_rows(code_world):
    from search.models import CodeFile, Symbol, SymbolRef

    ds_id = code_world["dataset"].pk
    code_world["dataset"].delete()
    assert not any(m.objects.filter(dataset_id=ds_id).exists() for m in (CodeFile, Symbol, SymbolRef))


def test_reconcile_code_command_exits_1_on_drift_and_fix_makes_it_exact(code_world):
    import io
    import json

    import pytest
    from django.core.management import CommandError, call_command

    from search.models import Symbol

    Symbol.objects.filter(dataset=code_world["dataset"], name="Wallet").delete()
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("reconcile_code", json=True, stdout=out)
    assert json.loads(out.getvalue())["drifted"] == 1
    out = io.StringIO()
    call_command("reconcile_code", fix=True, stdout=out)
    assert "after fix: drifted 0  missing 0  orphans 0" in out.getvalue() and out.getvalue().endswith("exact\n")


def test_a_diff_sync_rewrites_only_the_changed_files_rows(db, edge_index, tmp_path, settings, make_project):
    from search.ingest.code_facts import check
    from search.models import Dataset, Symbol
    from search.sources.spec import SourceSpec
    from search.sources.sync import set_source, start_sync
    from tests.search.code_fixtures import JOBS_PY, SERVICE_PY
    from tests.search.sources.git_fixtures import GitRemote

    settings.SOURCES_GIT_DIR = tmp_path / "mirrors"
    remote = GitRemote(tmp_path / "remote")
    ds = Dataset.objects.create(project=make_project("gitshop"), name="repo", kind="code")
    remote.commit({"shop/service.py": SERVICE_PY, "shop/jobs.py": JOBS_PY})
    set_source(user=None, dataset=ds, spec=SourceSpec(type="git", config={"url": remote.url, "ref": "main",
                                                                          "subdir": ""}, local=True),
               interval_s=None, token=None)
    assert start_sync(dataset=ds, run_now=True).status == "done"
    kept = set(Symbol.objects.filter(dataset=ds, path="shop/service.py").values_list("pk", flat=True))
    remote.commit({"shop/service.py": SERVICE_PY, "shop/jobs.py": JOBS_PY.replace("def nightly", "def daily")})
    job = start_sync(dataset=ds, run_now=True)
    assert job.status == "done" and job.result["mode"] == "diff" and job.result["changed"] == ["shop/jobs.py"]
    assert set(Symbol.objects.filter(dataset=ds, path="shop/service.py").values_list("pk", flat=True)) == kept
    assert _qualnames(ds, "shop/jobs.py") == ["daily", "notify"]
    remote.commit({"shop/service.py": SERVICE_PY})
    assert start_sync(dataset=ds, run_now=True).result["deleted"] == ["shop/jobs.py"]
    assert _qualnames(ds, "shop/jobs.py") == [] and check(dataset_ids=[ds.pk]).exact
