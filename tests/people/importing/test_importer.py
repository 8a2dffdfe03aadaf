"""import_people: JSONL and CSV, every row validated, a report of rejected rows (line, field, reason), good rows
written, idempotent re-import, embeddings in Celery with progress on the ImportJob."""
import io
import json
import time

import pytest
from django.core.management import call_command

from people.importing.importer import CSV_COLUMNS, import_file
from people.models import ExperienceCard, ExperienceCardChild, ImportJob, Person, PersonProfile, SearchResult

pytestmark = pytest.mark.django_db

GOOD = {"external_id": "hr-1", "display_name": "Asha Rao", "headline": "Backend",
        "profile": {"open_to_work": True, "work_preferred_salary_min": 3000000, "current_city": "Berlin"},
        "cards": [{"title": "Backend Engineer", "company": "Stripe Inc.", "city": "Berlin", "country": "Germany",
                   "start_date": "2021-03", "is_current": True, "search_phrases": ["go", "kafka"],
                   "children": [{"title": "Impact", "summary": "Cut p99 by 30%"}]}]}


def jsonl(*records):
    return [json.dumps(r) if not isinstance(r, str) else r for r in records]


def test_jsonl_writes_good_rows_and_reports_every_bad_one_with_line_field_reason():
    bad_date = {**GOOD, "external_id": "hr-2", "cards": [{**GOOD["cards"][0], "end_date": "March 2020"}]}
    lines = jsonl(GOOD, "{not json", {"external_id": "hr-3"}, bad_date,
                  {**GOOD, "external_id": "hr-4", "profile": {"work_preferred_salary_min": -5}},
                  {**GOOD, "display_name": "Dup"}, {**GOOD, "external_id": "hr-5", "id": "nope"},
                  {**GOOD, "external_id": "hr-6", "profile": {"open_to_work": "maybe"}})
    job, report = import_file(lines=lines, job=ImportJob(file_format="jsonl"), embed="none")
    got = [(e["line"], e["field"]) for e in report.errors]
    assert got == [(2, ""), (3, "display_name"), (4, "cards[0].end_date"), (5, "profile.work_preferred_salary_min"),
                   (6, "external_id"), (7, "id"), (8, "profile.open_to_work")]
    assert report.errors[0]["reason"].startswith("invalid JSON") and "line 1" in report.errors[4]["reason"]
    assert report.created == 1 and Person.objects.count() == 1
    asha = Person.objects.get()
    card = ExperienceCard.objects.get(person=asha)
    assert card.company_norm == "stripe" and card.city == "berlin" and str(card.start_date) == "2021-03-01"
    assert PersonProfile.objects.get(person=asha).open_to_work is True
    assert job.rejected == 7 and job.errors == report.errors and job.created == 1


def test_reimporting_the_same_file_changes_nothing_and_a_changed_row_updates_in_place(user):
    import_file(lines=jsonl(GOOD), job=ImportJob(file_format="jsonl"), embed="none")
    person = Person.objects.get()
    card_ids = set(ExperienceCard.objects.values_list("id", flat=True))
    stamp = ExperienceCard.objects.get().updated_at
    _job, again = import_file(lines=jsonl(GOOD), job=ImportJob(file_format="jsonl"), embed="none")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 1)
    assert set(ExperienceCard.objects.values_list("id", flat=True)) == card_ids
    assert ExperienceCard.objects.get().updated_at == stamp  # not even rewritten
    # a search result pointing at the person survives an update of the row
    from datetime import timedelta

    from django.utils import timezone

    from people.models import Search

    s = Search.objects.create(searcher=user, query_text="q", expires_at=timezone.now() + timedelta(hours=1))
    SearchResult.objects.create(search=s, person=person, rank=1, score=0.5)
    changed = {**GOOD, "headline": "Staff Backend", "cards": GOOD["cards"] + [{"title": "Intern", "company": "Acme"}]}
    _job, upd = import_file(lines=jsonl(changed), job=ImportJob(file_format="jsonl"), embed="none")
    assert (upd.created, upd.updated, upd.unchanged) == (0, 1, 0)
    assert Person.objects.get().headline == "Staff Backend" and Person.objects.get().pk == person.pk
    assert ExperienceCard.objects.count() == 2 and ExperienceCardChild.objects.count() == 1
    assert SearchResult.objects.filter(person=person).exists()


CSV_TEXT = """external_id,display_name,open_to_work,work_preferred_locations,title,company,city,country,start_date,search_phrases,evidence
e-1,Mira Tamm,yes,tallinn;remote,Backend Engineer,Kestrel Robotics,Tallinn,Estonia,2020,go;kafka,Built the fleet API;Cut costs 20%
e-1,Mira Tamm,yes,,Intern,Quillon,Porto,Portugal,2018-06,,
e-2,Joao Silva,no,,Data Engineer,Quillon,Porto,Portugal,last year,,
e-3,Ana Lima,1,,Data Engineer,Brightwave,Lyon,France,2019-01-01,spark,
"""


def test_csv_groups_rows_into_people_and_reports_the_card_row_that_failed():
    _job, report = import_file(lines=io.StringIO(CSV_TEXT), job=ImportJob(file_format="csv"), embed="none")
    assert report.errors == [{"line": 4, "field": "cards[0].start_date",
                              "reason": "not a date (YYYY, YYYY-MM or YYYY-MM-DD): 'last year'"}]
    assert report.created == 2 and report.cards == 3 and report.children == 2
    mira = Person.objects.get(external_id="e-1")
    assert sorted(ExperienceCard.objects.filter(person=mira).values_list("company_norm", flat=True)) == [
        "kestrel robotics", "quillon"]
    prof = PersonProfile.objects.get(person=mira)
    assert prof.open_to_work is True and prof.work_preferred_locations == ["tallinn", "remote"]
    assert list(ExperienceCard.objects.get(person=mira, company_norm="kestrel robotics").search_phrases) == ["go", "kafka"]
    _job, again = import_file(lines=io.StringIO(CSV_TEXT), job=ImportJob(file_format="csv"), embed="none")
    assert again.unchanged == 2 and again.created == again.updated == 0


def test_csv_with_an_unknown_column_is_rejected_at_the_header():
    _job, report = import_file(lines=io.StringIO("display_name,salary\nA,1\n"), job=ImportJob(file_format="csv"), embed="none")
    assert report.errors[0]["line"] == 1 and report.errors[0]["field"] == "header"
    assert "salary" in report.errors[0]["reason"] and Person.objects.count() == 0
    assert "evidence" in CSV_COLUMNS


def test_the_command_prints_the_summary_and_writes_the_full_report(tmp_path):
    src = tmp_path / "people.jsonl"
    src.write_text("\n".join(jsonl(GOOD, {"external_id": "x"})) + "\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    call_command("import_people", str(src), "--embed", "none", "--report", str(tmp_path / "r.json"),
                 stdout=out, stderr=err)
    assert "1 people created" in out.getvalue() and "1 rows rejected" in out.getvalue()
    assert "line 2: display_name: is required" in err.getvalue()
    assert json.loads((tmp_path / "r.json").read_text())["errors"] == [
        {"line": 2, "field": "display_name", "reason": "is required"}]


@pytest.mark.django_db(transaction=True)
def test_celery_embeds_the_imported_cards_and_advances_the_job(celery_worker_proc):
    job, report = import_file(lines=jsonl(GOOD), job=ImportJob(file_format="jsonl"), embed="celery")
    assert report.to_embed == 2 and job.embed_total == 2
    deadline = time.time() + 300  # a fresh worker loads torch and the model first: slow on a loaded machine
    while time.time() < deadline:
        job.refresh_from_db()
        if job.embed_done >= job.embed_total:
            break
        time.sleep(0.3)
    assert job.embed_done == 2
    assert not ExperienceCard.objects.filter(embedding__isnull=True).exists()
    assert not ExperienceCardChild.objects.filter(embedding__isnull=True).exists()
    assert ImportJob.objects.count() == 1
