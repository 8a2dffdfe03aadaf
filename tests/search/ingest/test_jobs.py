"""Ingest jobs: a file job survives a source that changes under it; progress counts every file; job types are a registry."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_file_removed_between_walk_and_read_is_skipped_not_fatal(make_user, make_project, tmp_path, monkeypatch):
    from search.ingest import files, jobs
    from search.models import Chunk, Dataset, IngestJob

    (tmp_path / "keep.py").write_text('def keep():\n    """Stays."""\n    return 1\n')
    (tmp_path / "gone.py").write_text('def gone():\n    return 2\n')
    real = files._source_files

    def walk_then_delete(kind, root):
        files = real(kind, root)
        (tmp_path / "gone.py").unlink()
        return files

    monkeypatch.setattr(files, "_source_files", walk_then_delete)
    ds = Dataset.objects.create(project=make_project("race", make_user()), name="code", kind="code")
    job = jobs.start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="code"), sync=True)
    assert job.status == "done"
    assert job.files_total == 2 and job.files_done == 2 and job.files_skipped == 1
    assert set(Chunk.objects.filter(dataset=ds).values_list("path", flat=True)) == {"keep.py"}


@pytest.mark.parametrize("kind", ["code", "rules"])
def test_progress_bar_counts_every_file_for_code_and_rules(make_user, make_project, tmp_path, kind):
    """The command's tqdm bar ends at files_total for both paths (rules used to stay at 0 files)."""
    from search.ingest.jobs import start_ingest
    from search.ingest.progress import file_progress
    from search.models import Dataset, IngestJob

    for i in range(3):
        body = f"def f{i}():\n    return {i}\n" if kind == "code" else f"# Rule {i}\n\nThe rule number {i} applies.\n"
        (tmp_path / f"f{i}.{'py' if kind == 'code' else 'md'}").write_text(body)
    ds = Dataset.objects.create(project=make_project(f"bar-{kind}", make_user()), name=kind, kind=kind)
    progress, bar = file_progress(dataset=ds, desc="test")
    job = start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind=kind,
                                     options={"ruleset_id": "r", "book_id": "b"} if kind == "rules" else {}),
                       sync=True, progress=progress)
    bar.close()
    assert job.status == "done" and job.files_total == 3
    assert bar.n == 3 and bar.total == 3
