"""The people admin: a directory upload with its report and embedding progress; aliases that teach the parser."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from people.models import ImportJob, Person, VocabAlias

pytestmark = pytest.mark.django_db

CSV = (b"external_id,display_name,title,company,city,country,start_date\n"
       b"a-1,Mira Tamm,Backend Engineer,Kestrel Robotics,Tallinn,Estonia,2020\n"
       b"a-2,Joao Silva,Data Engineer,Quillon,Porto,Portugal,someday\n")


@pytest.fixture
def staff_client(client, make_user):
    client.force_login(make_user("staff@example.com", staff=True))
    return client


def test_upload_writes_good_rows_and_shows_rejected_rows_and_progress(staff_client):
    resp = staff_client.post("/admin/people/importjob/add/", {
        "upload": SimpleUploadedFile("team.csv", CSV, content_type="text/csv"), "file_format": "jsonl",
        "embed": "none"})
    assert resp.status_code == 302, resp.content.decode()[:2000]
    job = ImportJob.objects.get()
    assert job.file_format == "csv" and job.source_name == "team.csv"  # the extension decides
    assert (job.created, job.rejected) == (1, 1) and Person.objects.get().display_name == "Mira Tamm"
    page = staff_client.get(f"/admin/people/importjob/{job.pk}/change/").content.decode()
    assert "line 3: cards[0].start_date: not a date" in page and "nothing to embed" in page
    listing = staff_client.get("/admin/people/importjob/").content.decode()
    assert "team.csv" in listing


def test_an_admin_alias_is_normalised_and_teaches_the_parser(staff_client):
    from people.parsing.gazetteer import current
    from people.parsing.normalize import validate_and_normalize
    from people.parsing.parser import parse_deterministic

    resp = staff_client.post("/admin/people/vocabalias/add/", {"kind": "company", "alias": "  Big   Blue ",
                                                               "norm": "IBM"})
    assert resp.status_code == 302
    assert VocabAlias.objects.get().alias == "big blue" and VocabAlias.objects.get().norm == "ibm"
    q = "engineers from big blue"
    assert validate_and_normalize(parse_deterministic(q, gazetteer=current()), query=q)["must"]["company_norm"] == [
        "ibm"]
