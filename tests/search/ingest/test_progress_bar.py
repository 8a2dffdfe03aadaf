"""The terminal's progress bar of a sync or an ingest (search.ingest.progress.file_progress): its total is the job's,
read again while the job runs, so tqdm's rate and time left describe the work known now."""
from __future__ import annotations

import pytest

from search.models import IngestJob


@pytest.mark.django_db
def test_command_line_bar_follows_a_growing_total_so_its_time_left_stays_right(make_user, make_project, monkeypatch):
    """A crawl's total is what it has found so far: the terminal bar (manage.py sync, ingest --sync) reads it again
    while the job runs, so the time left tqdm shows is for the work known now, not for the first count."""
    from search.ingest.progress import file_progress
    from search.models import Dataset

    ds = Dataset.objects.create(project=make_project("eta-bar", make_user()), name="site", kind="web")
    job = IngestJob.objects.create(dataset=ds, source="https://example.invalid/", kind="web", files_total=10)
    progress, bar = file_progress(dataset=ds, desc="sync site")
    try:
        progress({"path": "a", "skipped": False, "files": 1})
        assert bar.total == 10 and bar.n == 1
        IngestJob.objects.filter(pk=job.pk).update(files_total=40)
        monkeypatch.setattr("search.ingest.progress.TOTAL_REFRESH_S", 0.0, raising=False)
        progress({"path": "b", "skipped": False, "files": 2})
        assert bar.total == 40 and bar.n == 2
        assert "2/40" in str(bar)  # what the terminal shows, with tqdm's time left for the 38 still to do
    finally:
        bar.close()
