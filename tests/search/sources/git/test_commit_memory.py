"""search.sources.git.commit_memory: a git sync remembers the qualifying commits up to the commit it synced, reads
only the new ones on a re-sync, rebuilds after a force push, and stays inside its bounds."""
from __future__ import annotations

import numpy as np
from django.test import Client

from inference.encoders import dense_model_id, embed_cached
from search.models import CommitMemory, IngestJob, Source
from tests.search.sources.git.test_sync import (  # noqa: F401 - fixtures
    FIRST_TREE,
    LEDGER,
    UTILS,
    attach,
    dataset,
    edge_index,
    git_settings,
    remote,
    sync,
)

REFUSE = "Refuse negative amounts when deducting credits"
SLUGS = "Strip punctuation from slugs before joining the words"
CLAMP = "Clamp values that exceed the upper bound"


def _history(remote) -> list[str]:
    """A tree (skipped: it adds files only), then two qualifying changes and one with a one-word subject."""
    shas = [remote.commit(FIRST_TREE, "Add the ledger, the routes and the text helpers")]
    shas.append(remote.commit({**FIRST_TREE, "billing/ledger.py": LEDGER + "\n# negative amounts refused\n"},
                              f"{REFUSE}\n\nSigned-off-by: Someone <s@example.com>"))
    shas.append(remote.commit({**remote.files, "util/text.py": UTILS + "\n# punctuation stripped\n"},
                              f"{SLUGS} (#12)\n\nThe body says more."))
    shas.append(remote.commit({**remote.files, "util/text.py": UTILS + "\n# punctuation stripped twice\n"}, "wip"))
    return shas


def _memory(dataset) -> list[tuple[str, str, list[str]]]:
    return list(CommitMemory.objects.filter(dataset=dataset).order_by("pk")
                .values_list("sha", "subject", "files"))


def test_a_sync_remembers_each_qualifying_commit_with_its_files_and_embedded_message(dataset, remote):
    shas = _history(remote)
    attach(dataset, remote.url)
    job = sync(dataset)
    assert job.status == "done", job.error
    assert _memory(dataset) == [(shas[1], REFUSE, ["billing/ledger.py"]), (shas[2], SLUGS, ["util/text.py"])]
    row = CommitMemory.objects.get(dataset=dataset, sha=shas[1])
    assert row.query == REFUSE and row.model_id == dense_model_id()  # trailers out: what is embedded
    assert np.allclose(np.asarray(row.embedding), embed_cached([REFUSE])[0], atol=1e-5)
    assert job.result["history"]["added"] == 2 and job.result["history"]["remembered"] == 2


def test_a_re_sync_reads_only_the_new_commits(dataset, remote):
    shas = _history(remote)
    attach(dataset, remote.url)
    sync(dataset)
    first = {sha: pk for sha, pk in CommitMemory.objects.filter(dataset=dataset).values_list("sha", "pk")}
    shas.append(remote.commit({**remote.files, "util/text.py": UTILS + "\n# clamped\n"}, CLAMP))
    job = sync(dataset)
    assert job.result["history"]["added"] == 1 and not job.result["history"]["rebuilt"]
    assert [s for s, _, _ in _memory(dataset)] == [shas[1], shas[2], shas[4]]
    assert {sha: pk for sha, pk in CommitMemory.objects.filter(dataset=dataset, sha__in=first)
            .values_list("sha", "pk")} == first  # the remembered rows were kept, not rewritten


def test_an_unchanged_re_sync_fills_a_memory_the_dataset_lacks(dataset, remote):
    shas = _history(remote)
    attach(dataset, remote.url)
    sync(dataset)
    CommitMemory.objects.filter(dataset=dataset).delete()  # a dataset synced before the memory existed
    job = sync(dataset)
    assert job.result["mode"] == "unchanged"
    assert [s for s, _, _ in _memory(dataset)] == [shas[1], shas[2]]


def test_a_force_push_rebuilds_the_memory_from_the_new_history(dataset, remote):
    shas = _history(remote)
    attach(dataset, remote.url)
    sync(dataset)
    remote.reset_hard(shas[1])
    remote.files = {**FIRST_TREE, "billing/ledger.py": LEDGER + "\n# negative amounts refused\n"}
    new = remote.commit({**remote.files, "billing/ledger.py": LEDGER + "\n# bonus\n"},
                        "Grant a larger bonus to new wallets", force=True)
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["history"]["rebuilt"] is True
    assert [s for s, _, _ in _memory(dataset)] == [shas[1], new]  # the slug commit is no longer history


def test_the_memory_keeps_only_the_newest_commits_and_can_be_off(dataset, remote, settings):
    shas = _history(remote)
    attach(dataset, remote.url)
    settings.SOURCES_GIT_COMMIT_MEMORY = 1
    sync(dataset)
    assert [s for s, _, _ in _memory(dataset)] == [shas[2]]
    settings.SOURCES_GIT_COMMIT_MEMORY = 0
    remote.commit({**remote.files, "util/text.py": UTILS + "\n# clamped\n"}, CLAMP)
    job = sync(dataset)
    assert job.status == "done" and job.result["history"] == {"off": True}
    assert [s for s, _, _ in _memory(dataset)] == [shas[2]]


def test_a_spent_time_budget_stops_the_walk_and_the_tree_is_still_synced(dataset, remote, settings):
    shas = _history(remote)
    attach(dataset, remote.url)
    settings.SOURCES_GIT_COMMIT_MEMORY_S = 0.0
    job = sync(dataset)
    assert job.status == "done", job.error
    assert job.result["history"]["stopped"] == "time budget" and job.result["history"]["added"] == 0
    assert Source.objects.get(dataset=dataset).state["commit"] == shas[-1]
    assert not CommitMemory.objects.filter(dataset=dataset).exists()


def test_a_web_dataset_following_git_keeps_no_memory(dataset, remote):
    dataset.kind = "web"
    dataset.save(update_fields=["kind"])
    _history(remote)
    attach(dataset, remote.url)
    job = sync(dataset)
    assert job.status == "done" and "history" not in job.result
    assert not CommitMemory.objects.filter(dataset=dataset).exists()


def test_paths_are_remembered_relative_to_the_subdir_and_commits_outside_it_are_not(dataset, remote):
    shas = _history(remote)
    attach(dataset, remote.url, subdir="util")
    job = sync(dataset)
    assert job.status == "done", job.error
    assert _memory(dataset) == [(shas[2], SLUGS, ["text.py"])]
    assert IngestJob.objects.filter(dataset=dataset).count() == 1


def test_each_commit_names_the_definitions_it_changed_relative_to_the_subdir(dataset, remote):
    remote.commit(FIRST_TREE, "Add the ledger, the routes and the text helpers")
    both = remote.commit({**remote.files, "util/text.py": UTILS.replace("max(lo, min(hi, value))", "min(hi, value)")
                          .replace('"-".join', '"_".join')}, "Join slugs with underscores and clamp above only")
    attach(dataset, remote.url, subdir="util")
    sync(dataset)
    row = CommitMemory.objects.get(dataset=dataset, sha=both)
    assert row.files == ["text.py"] and row.functions == [["text.py", "slugify"], ["text.py", "clamp"]]


def test_definitions_a_sync_left_unnamed_are_named_at_the_next_sync(dataset, remote, settings):
    remote.commit(FIRST_TREE, "Add the ledger, the routes and the text helpers")
    fix = remote.commit({**remote.files, "billing/ledger.py": LEDGER.replace("amount > wallet.balance",
                                                                             "amount >= wallet.balance")},
                        REFUSE)
    attach(dataset, remote.url)
    sync(dataset)
    CommitMemory.objects.filter(dataset=dataset).update(functions=None)  # as an older version remembered them
    settings.SOURCES_GIT_COMMIT_MEMORY_S = 0.0  # a spent budget names nothing ...
    spent = sync(dataset).result["history"]
    assert spent["functions_named"] == 0 and spent["functions_pending"] == 1
    assert CommitMemory.objects.get(dataset=dataset, sha=fix).functions is None
    settings.SOURCES_GIT_COMMIT_MEMORY_S = 120.0  # ... the next sync with time does
    job = sync(dataset)
    assert job.result["mode"] == "unchanged" and job.result["history"]["functions_named"] == 1
    assert "functions_pending" not in job.result["history"]
    assert CommitMemory.objects.get(dataset=dataset, sha=fix).functions == [["billing/ledger.py", "deduct_credits"]]


def test_staff_see_the_functions_each_remembered_commit_changed_or_that_they_are_not_read_yet(dataset, remote,
                                                                                            make_user):
    remote.commit(FIRST_TREE, "Add the ledger, the routes and the text helpers")
    remote.commit({**remote.files, "billing/ledger.py": LEDGER.replace("amount > wallet.balance",
                                                                       "amount >= wallet.balance")}, REFUSE)
    remote.commit({**remote.files, "util/text.py": UTILS.replace('"-".join', '"_".join')}, SLUGS)
    attach(dataset, remote.url)
    sync(dataset)
    CommitMemory.objects.filter(dataset=dataset, subject=SLUGS).update(functions=None)
    client = Client()
    client.force_login(make_user("staff@example.com", staff=True))
    page = client.get("/admin/search/commitmemory/").content.decode()
    assert "Functions changed" in page and ">deduct_credits<" in page and ">not read yet<" in page
