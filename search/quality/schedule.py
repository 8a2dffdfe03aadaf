"""Re-adaptation on a schedule: a project whose embedding model an operator adapted gets a new adaptation job once
its git-followed code datasets have remembered ADAPT_EVERY_COMMITS new qualifying commits since the last one.

Why commits, not days: what adaptation learns from a repository is its history pairs and its code; a quiet
repository gains nothing from a re-run, a busy one drifts in a week. The count is what the syncs already keep (the
commit memory, search.sources.git.commit_memory), so deciding costs one query per project, not a history walk.

Why only projects adapted before: an adaptation is minutes of CPU and may switch what a tenant's queries are served
with; an operator opts a project in by running it once (the admin's quality jobs, `adapt_embeddings`), and the
schedule repeats that job's options under a new model name. Each adaptation records the commit memory's high-water
mark it started from (`memory_mark` in its result), and the schedule counts the rows after it.

Who runs the job: beat stores it PENDING (search.tasks.enqueue_due_adaptations); quality jobs run in the web
process, which owns the embedded index (docs/architecture.md, Data ownership), and its poller
(search.quality.jobs.start_quality_poller) picks up what the schedule queued. The adoption rule decides on the
result exactly as for an operator's run, so a schedule never switches a tenant to a model its check did not confirm.
"""
from __future__ import annotations

import re

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from projects.models import Project
from search.models import CommitMemory, QualityJob

SCHEDULE = "schedule"  # options["trigger"] of a job the schedule queued
_STAMP = re.compile(r"-\d{14}$")


def memory_mark(*, project: Project) -> int:
    """The newest commit memory row of the project's code datasets (0: none): where the next count starts."""
    return CommitMemory.objects.filter(dataset__project=project, dataset__kind="code").aggregate(
        top=Max("pk"))["top"] or 0


def new_commits(*, project: Project, since: int) -> int:
    return CommitMemory.objects.filter(dataset__project=project, dataset__kind="code", pk__gt=since).count()


def scheduled_name(name: str) -> str:
    """The last run's model name with a fresh time stamp (one model folder per run; at most 64 characters)."""
    return f"{_STAMP.sub('', name)[:49]}-{timezone.now():%Y%m%d%H%M%S}"


def enqueue_due_adaptations() -> list[str]:
    """A PENDING adaptation job for each opted-in project whose memory gained ADAPT_EVERY_COMMITS commits since
    its last finished adaptation and that has none queued or running; -> the new job ids. ADAPT_EVERY_COMMITS 0:
    off."""
    every = settings.ADAPT_EVERY_COMMITS
    if every <= 0:
        return []
    adapt = QualityJob.objects.filter(kind=QualityJob.Kind.ADAPT_EMBEDDINGS)
    busy = {j.options.get("project") for j in adapt.filter(status__in=[QualityJob.Status.PENDING,
                                                                       QualityJob.Status.RUNNING])}
    last: dict[str, QualityJob] = {}
    for job in adapt.filter(status=QualityJob.Status.DONE).order_by("finished_at"):
        if "memory_mark" in job.result:
            last[job.options.get("project")] = job
    queued = []
    for slug, job in sorted(last.items()):
        project = Project.objects.filter(slug=slug).first()
        if slug in busy or project is None:
            continue
        if new_commits(project=project, since=int(job.result["memory_mark"])) < every:
            continue
        new = QualityJob.objects.create(kind=QualityJob.Kind.ADAPT_EMBEDDINGS, options={
            **job.options, "name": scheduled_name(job.options["name"]), "trigger": SCHEDULE})
        queued.append(str(new.pk))
    return queued
