"""Expired idempotency keys are purged by a Celery task that beat schedules; live keys stay."""
from datetime import timedelta

import pytest
from django.utils import timezone

from credits.models import IdempotencyKey

TASK = "credits.purge_expired_idempotency_keys"


def _key(user, name: str, *, expires_in: timedelta) -> IdempotencyKey:
    return IdempotencyKey.objects.create(key=name, user=user, endpoint="test", request_hash="h",
                                         expires_at=timezone.now() + expires_in)


@pytest.mark.django_db
def test_the_task_deletes_expired_keys_and_keeps_live_ones(make_user):
    from credits.tasks import purge_expired_idempotency_keys

    user = make_user()
    _key(user, "old", expires_in=-timedelta(hours=1))
    _key(user, "just-expired", expires_in=-timedelta(seconds=1))
    _key(user, "live", expires_in=timedelta(hours=23))
    result = purge_expired_idempotency_keys.apply()  # through Celery's task machinery, in this process
    assert result.successful() and result.get() == 2
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["live"]
    assert purge_expired_idempotency_keys.apply().get() == 0


def test_beat_schedules_the_purge_and_the_worker_knows_the_task(settings):
    from config.celery import app

    entries = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == TASK]
    assert len(entries) == 1
    assert entries[0]["schedule"] == timedelta(seconds=settings.IDEMPOTENCY_PURGE_INTERVAL_S)
    app.loader.import_default_modules()  # what a worker does at start: autodiscovered tasks modules
    assert TASK in app.tasks
