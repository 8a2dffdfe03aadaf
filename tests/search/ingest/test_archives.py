"""search/ingest/archives.py: the format is decided by content, the member list streams with every limit checked
at each entry, and inflation is capped by the upload's size, so refusing a hostile archive costs about what its
bytes on the wire cost (bench/bench_archives.py measures it; these tests pin the behaviour that bounds it)."""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile

import pytest

from search.ingest.archives import ArchiveRefused, Limits, _BoundedStream, extract_archive, inspect_archive

LIMITS = Limits(max_files=50, max_total_bytes=10 * 1024 * 1024, max_ratio=100.0, max_file_bytes=1024 * 1024)


def _tar(entries: list[tuple[str, bytes | None]], *, declared: dict[str, int] | None = None) -> bytes:
    """A plain tar; an entry whose data is None is a folder. `declared` overrides a member's header size."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _refused(data: bytes) -> ArchiveRefused:
    with pytest.raises(ArchiveRefused) as caught:
        inspect_archive(data=data, limits=LIMITS)
    return caught.value


@pytest.mark.parametrize("compress", [bz2.compress, lzma.compress], ids=["bzip2", "xz"])
@pytest.mark.django_db
def test_a_tar_compressed_with_another_format_than_gzip_is_refused_by_content_whatever_its_name(
        compress, make_user, make_project, client_for):
    from search.models import Dataset

    data = compress(_tar([("ok.py", b"x = 1\n")]))
    exc = _refused(data)
    assert (exc.status_code, exc.code) == (422, "unsupported_compression"), exc.detail
    owner = make_user("owner@example.com")
    ds = Dataset.objects.create(project=make_project("team", owner), name="code", kind="code")
    for name in ("x.tar.gz", "x.tgz", "x.tar"):  # the upload's name says archive; its bytes say which kind
        f = io.BytesIO(data)
        f.name = name
        resp = client_for(owner).post(f"/api/projects/team/datasets/{ds.pk}/uploads", {"file": f},
                                      format="multipart")
        assert (resp.status_code, resp.json()["code"]) == (422, "unsupported_compression"), resp.content


def test_a_bzip2_member_declaring_gigabytes_is_refused_before_a_byte_is_inflated():
    comp = bz2.BZ2Compressor()
    info = tarfile.TarInfo("big.py")
    info.size = 4 * 2**30
    head = comp.compress(info.tobuf(format=tarfile.GNU_FORMAT)) + comp.compress(bytes(1 << 20))
    exc = _refused(head + comp.flush())
    assert exc.code == "unsupported_compression"


def test_a_zip_member_compressed_with_bzip2_or_lzma_is_refused():
    for method in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as zf:
            zf.writestr("a.py", b"x = 1\n" * 100)
        exc = _refused(buf.getvalue())
        assert (exc.status_code, exc.code) == (422, "unsupported_compression")


def test_a_gzip_bomb_is_refused_at_its_first_header_by_the_declared_ratio():
    data = gzip.compress(_tar([("zeros.py", bytes(5 * 1024 * 1024))]), 9)
    exc = _refused(data)
    assert (exc.status_code, exc.code) == (413, "compression_ratio")


def test_inflation_stops_at_the_cap_even_when_headers_understate_it():
    stream = _BoundedStream(gzip.compress(bytes(5 * 1024 * 1024)), gzipped=True, cap=1024 * 1024)
    with pytest.raises(ArchiveRefused) as caught:
        while stream.read(64 * 1024):
            pass
    assert caught.value.code == "compression_ratio"
    assert stream.produced <= 1024 * 1024 + 64 * 1024 + 1  # read no further than the cap (plus one read's worth)


def test_folders_count_against_the_entry_limit():
    data = gzip.compress(_tar([(f"d{i}", None) for i in range(LIMITS.max_entries + 1)]))
    exc = _refused(data)
    assert (exc.status_code, exc.code) == (413, "too_many_files")


@pytest.mark.parametrize("entries", [
    [("a", b"1"), ("a/b.py", b"2")],
    [("a/b.py", b"2"), ("a", b"1")],
    [("pkg/mod", b"1"), ("pkg/mod/x.py", b"2")],
], ids=["file-then-folder", "folder-then-file", "nested"])
def test_a_file_and_a_folder_of_the_same_name_are_refused_before_extraction(entries, tmp_path):
    data = gzip.compress(_tar(entries))
    exc = _refused(data)
    assert (exc.status_code, exc.code) == (422, "unsafe_archive") and "both a file and a folder" in exc.detail
    with pytest.raises(ArchiveRefused):
        extract_archive(data=data, dest=tmp_path, limits=LIMITS)
    assert not any(tmp_path.iterdir())


def test_something_that_is_no_archive_is_a_bad_archive_not_an_exception():
    for data in (b"", b"hello world" * 100, gzip.compress(b"not a tar at all" * 100)):
        assert _refused(data).code == "bad_archive"


def test_plain_tar_gzipped_tar_and_zip_are_judged_by_content_and_extracted(tmp_path):
    files = {"repo-main/a.py": b"a = 1\n", "repo-main/pkg/b.py": b"b = 2\n"}
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    tar = _tar(list(files.items()))
    for n, data in enumerate([zbuf.getvalue(), tar, gzip.compress(tar)]):
        dest = tmp_path / str(n)
        assert extract_archive(data=data, dest=dest, limits=LIMITS) == 2
        assert (dest / "a.py").read_bytes() == b"a = 1\n" and (dest / "pkg" / "b.py").read_bytes() == b"b = 2\n"
