"""The collector's bulk policy: raised while the work runs, restored after it (errors too), nested uses share one,
cyclic garbage is still collected, and ingest jobs and the applier run under it."""
from __future__ import annotations

import gc
import threading
import weakref

import pytest

from config.gcpolicy import bulk_work


class _Node:
    """An object that can sit in a reference cycle and be watched with a weak reference."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def test_threshold_is_raised_inside_and_restored_after(settings):
    settings.GC_BULK_THRESHOLD = 12_345
    before = gc.get_threshold()
    with bulk_work():
        assert gc.get_threshold()[0] == 12_345
        assert gc.get_freeze_count() > 0  # what lived before the work is frozen
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_policy_is_restored_when_the_work_raises(settings):
    settings.GC_BULK_THRESHOLD = 12_345
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), bulk_work():
        raise RuntimeError("the job failed")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_nested_and_concurrent_uses_restore_only_when_the_last_one_leaves(settings):
    settings.GC_BULK_THRESHOLD = 12_345
    before = gc.get_threshold()
    inner_entered, outer_may_leave, inner_may_leave = threading.Event(), threading.Event(), threading.Event()
    seen_after_outer: list[int] = []

    def other_job() -> None:
        with bulk_work():
            inner_entered.set()
            outer_may_leave.set()
            inner_may_leave.wait(10)

    with bulk_work():
        thread = threading.Thread(target=other_job)
        thread.start()
        assert inner_entered.wait(10) and outer_may_leave.wait(10)
    seen_after_outer.append(gc.get_threshold()[0])  # the other job still runs: its policy holds
    inner_may_leave.set()
    thread.join(10)
    assert seen_after_outer == [12_345]
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_cycles_made_before_and_during_the_work_are_collected_after_it(settings):
    settings.GC_BULK_THRESHOLD = 12_345
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a cycle alive when the work starts: frozen with everything else
    before_ref = weakref.ref(a)
    del a, b
    with bulk_work():
        c, d = _Node(), _Node()
        c.other, d.other = d, c
        during_ref = weakref.ref(c)
        del c, d
    gc.collect()
    assert before_ref() is None and during_ref() is None


def test_zero_turns_the_policy_off(settings):
    settings.GC_BULK_THRESHOLD = 0
    before = gc.get_threshold()
    with bulk_work():
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0


@pytest.mark.django_db
def test_an_ingest_job_runs_under_the_policy(settings, make_user, make_project, tmp_path):
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    settings.GC_BULK_THRESHOLD = 23_456
    (tmp_path / "a.py").write_text("def a():\n    return 1\n")
    seen: list[int] = []
    ds = Dataset.objects.create(project=make_project("gc-policy", make_user()), name="code", kind="code")
    job = start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="code"), sync=True,
                       progress=lambda _state: seen.append(gc.get_threshold()[0]))
    assert job.status == "done" and seen and set(seen) == {23_456}
    assert gc.get_threshold()[0] != 23_456 and gc.get_freeze_count() == 0


@pytest.mark.django_db
def test_the_index_applier_runs_under_the_policy(settings, monkeypatch):
    from search.engine import applier

    settings.GC_BULK_THRESHOLD = 34_567
    real, seen = applier.apply_store_outbox, []

    def watched(**kwargs):
        seen.append(gc.get_threshold()[0])
        return real(**kwargs)

    monkeypatch.setattr(applier, "apply_store_outbox", watched)
    applier.apply_outbox(wait_s=0.0)
    assert seen and set(seen) == {34_567}
    assert gc.get_threshold()[0] != 34_567
