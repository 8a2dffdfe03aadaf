"""Uploaded archives (zip, tar.gz) checked before anything is extracted, then unpacked into a private dir.

Why check first and extract by hand: an archive is the user's description of files on our disk. Entries
with absolute paths or `..` would write outside the target (zip-slip), links could point anywhere, a file and
a folder may share a name, and a few kilobytes can expand to gigabytes (a zip bomb) or cost seconds of CPU
before any check runs (bzip2 declaring a 4 GB member). So the format is decided by content (zip, tar,
tar.gz; other compressions refused by their magic bytes), the member list streams with every limit (paths,
types, entry count, declared sizes, compression ratio) checked at each entry before its data is inflated,
and the inflation itself is capped by the upload's size on the wire; extraction then copies regular files
only, counting real bytes as it goes, since a member's declared size can lie. Limits are settings (UPLOAD_*); breaking one raises ArchiveRefused, which the API
turns into a 413 or 422 and which writes nothing.
"""
from __future__ import annotations

import gzip
import io
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from django.conf import settings

from config.errors import ApiError

ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")


class ArchiveRefused(ApiError):
    """An archive or file that breaks a limit (413) or is unsafe or unreadable (422). Nothing was written."""

    status_code = 422
    code = "archive_refused"


def _too_large(detail: str, *, code: str) -> ArchiveRefused:
    exc = ArchiveRefused(detail, field="file", code=code)
    exc.status_code = 413
    return exc


@dataclass(frozen=True)
class Limits:
    max_files: int
    max_total_bytes: int
    max_ratio: float
    max_file_bytes: int

    @property
    def max_entries(self) -> int:
        """Files and folders together: folders are free to write but not to list."""
        return 2 * self.max_files

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(max_files=settings.UPLOAD_MAX_FILES, max_total_bytes=settings.UPLOAD_MAX_TOTAL_BYTES,
                   max_ratio=settings.UPLOAD_MAX_RATIO, max_file_bytes=settings.UPLOAD_MAX_FILE_BYTES)


def is_archive(filename: str) -> bool:
    return filename.lower().endswith(ARCHIVE_SUFFIXES)


def safe_member_path(name: str) -> PurePosixPath:
    """A member name as a relative path that stays inside the root, or ArchiveRefused."""
    if "\x00" in name or "\\" in name:
        raise ArchiveRefused(f"Archive entry {name[:100]!r} has an invalid name.", field="file", code="unsafe_archive")
    p = PurePosixPath(name)
    if p.is_absolute() or name.startswith("/") or (p.parts and p.parts[0].endswith(":")):
        raise ArchiveRefused(f"Archive entry {name[:100]!r} is an absolute path.", field="file", code="unsafe_archive")
    if ".." in p.parts:
        raise ArchiveRefused(f"Archive entry {name[:100]!r} leaves the archive root.", field="file",
                             code="unsafe_archive")
    return PurePosixPath(*[part for part in p.parts if part not in ("", ".")])


@dataclass(frozen=True)
class Member:
    name: PurePosixPath
    size: int
    compressed: int
    is_dir: bool


# What is accepted, decided by content: zip (stored or deflated members), tar, and tar inside gzip. Everything
# else is refused by its magic bytes before a byte is inflated: Python's tar reader would happily detect bzip2,
# xz or lzma inside a file named .tar.gz, and those formats inflate at a few MB per ms of CPU.
_MAGIC = (  # (prefix, format); a format None is a known compression that is refused
    (b"PK\x03\x04", "zip"), (b"PK\x05\x06", "zip"), (b"\x1f\x8b", "tar.gz"),
    (b"BZh", None), (b"\xfd7zXZ\x00", None), (b"\x28\xb5\x2f\xfd", None), (b"\x5d\x00\x00", None),
    (b"7z\xbc\xaf\x27\x1c", None), (b"Rar!", None), (b"\x04\x22\x4d\x18", None),
)
_ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_INFLATE_FLOOR = 1 << 20  # tar headers and padding compress to nothing: a small archive may inflate this much


def sniff(data: bytes) -> str:
    """'zip', 'tar.gz' or 'tar' from the first bytes; ArchiveRefused for anything else."""
    for prefix, kind in _MAGIC:
        if data.startswith(prefix):
            if kind is None:
                raise ArchiveRefused("The archive uses a compression this server does not accept; upload a zip, a "
                                     "tar or a tar.gz.", field="file", code="unsupported_compression")
            return kind
    if data[257:262] == b"ustar":
        return "tar"
    raise ArchiveRefused("The file is not a zip, tar or tar.gz archive.", field="file", code="bad_archive")


class _BoundedStream(io.RawIOBase):
    """A read-only stream of the archive's tar bytes (gunzipped when needed) that refuses to produce more than
    `cap` bytes: the inflation work any upload can cause is bounded by its size on the wire."""

    def __init__(self, data: bytes, *, gzipped: bool, cap: int) -> None:
        self._src: io.BufferedIOBase = gzip.GzipFile(fileobj=io.BytesIO(data)) if gzipped else io.BytesIO(data)
        self.cap = cap
        self.produced = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf: memoryview) -> int:  # type: ignore[override]
        chunk = self._src.read(min(len(buf), self.cap - self.produced + 1))
        self.produced += len(chunk)
        if self.produced > self.cap:
            raise _too_large(f"The archive inflates past {self.cap} bytes, more than its size allows (a "
                             f"compression bomb?).", code="compression_ratio")
        buf[:len(chunk)] = chunk
        return len(chunk)


def _inflate_cap(*, archive_bytes: int, limits: Limits) -> int:
    return int(min(limits.max_total_bytes + limits.max_entries * 1024,
                   limits.max_ratio * archive_bytes + _INFLATE_FLOOR))


def _zip_member(info: zipfile.ZipInfo) -> Member:
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise ArchiveRefused(f"Archive entry {info.filename[:100]!r} is a link.", field="file", code="unsafe_archive")
    if info.compress_type not in _ZIP_METHODS:
        raise ArchiveRefused(f"Archive entry {info.filename[:100]!r} uses a compression method this server does not "
                             f"accept (only stored and deflate).", field="file", code="unsupported_compression")
    return Member(safe_member_path(info.filename), info.file_size, info.compress_size, info.is_dir())


def _tar_member(info: tarfile.TarInfo) -> Member:
    if info.issym() or info.islnk():
        raise ArchiveRefused(f"Archive entry {info.name[:100]!r} is a link.", field="file", code="unsafe_archive")
    if not (info.isfile() or info.isdir()):
        raise ArchiveRefused(f"Archive entry {info.name[:100]!r} is a device or special file.", field="file",
                             code="unsafe_archive")
    return Member(safe_member_path(info.name), info.size, info.size, info.isdir())


class _Running:
    """The limits checked entry by entry as the member list streams, so reading stops at the first one passed."""

    def __init__(self, *, archive_bytes: int, limits: Limits) -> None:
        self.archive_bytes, self.limits = archive_bytes, limits
        self.entries = self.files = self.total = 0

    def add(self, m: Member) -> None:
        lim = self.limits
        self.entries += 1
        if self.entries > lim.max_entries:
            raise _too_large(f"The archive has more than {lim.max_entries} entries.", code="too_many_files")
        if m.is_dir:
            return
        self.files += 1
        self.total += m.size
        if self.files > lim.max_files:
            raise _too_large(f"The archive has more than {lim.max_files} files; the limit is {lim.max_files}.",
                             code="too_many_files")
        if self.total > lim.max_total_bytes:
            raise _too_large(f"The archive expands to more than {lim.max_total_bytes} bytes; the limit is "
                             f"{lim.max_total_bytes}.", code="archive_too_large")
        if self.total / max(1, self.archive_bytes) > lim.max_ratio:
            raise _too_large(f"The archive expands more than {lim.max_ratio:g}x (a compression bomb?).",
                             code="compression_ratio")


def check_members(members: list[Member], *, archive_bytes: int, limits: Limits) -> None:
    """The limits on a whole member list (count, sizes, ratio), then its shape: no path twice, and no path that
    is both a file and a folder (`a` and `a/b.py` cannot both be written)."""
    running = _Running(archive_bytes=archive_bytes, limits=limits)
    for m in members:
        running.add(m)
    files = [m.name for m in members if not m.is_dir]
    seen: set[PurePosixPath] = set()
    for name in files:
        if name in seen:
            raise ArchiveRefused(f"Archive entry {str(name)[:100]!r} appears twice.", field="file",
                                 code="unsafe_archive")
        seen.add(name)
    folders = {parent for name in files for parent in name.parents} | {m.name for m in members if m.is_dir}
    clash = next((name for name in files if name in folders), None)
    if clash is not None:
        raise ArchiveRefused(f"Archive entry {str(clash)[:100]!r} is both a file and a folder.", field="file",
                             code="unsafe_archive")


def _tar_stream(data: bytes, kind: str, limits: Limits) -> tarfile.TarFile:
    stream = _BoundedStream(data, gzipped=kind == "tar.gz", cap=_inflate_cap(archive_bytes=len(data), limits=limits))
    return tarfile.open(fileobj=io.BufferedReader(stream, 1 << 16), mode="r|")


_READ_ERRORS = (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error, ValueError)


def _walk(data: bytes, *, limits: Limits, visit: Callable[[Member, Callable[[], IO[bytes] | None]], None]) -> str:
    """Stream the archive's entries once, checking each against the running limits before its data is read;
    visit(member, open_member) sees every accepted entry in order. Returns the format."""
    kind = sniff(data)
    running = _Running(archive_bytes=len(data), limits=limits)
    try:
        if kind == "zip":
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                infos = zf.infolist()
                members = [_zip_member(info) for info in infos]
                for m in members:
                    running.add(m)
                for m, info in zip(members, infos, strict=True):
                    visit(m, lambda info=info: zf.open(info))
        else:
            with _tar_stream(data, kind, limits) as tf:
                for info in tf:
                    m = _tar_member(info)
                    running.add(m)
                    visit(m, lambda info=info: tf.extractfile(info))
    except ArchiveRefused:
        raise
    except _READ_ERRORS as exc:
        raise ArchiveRefused(f"The file is not a readable {'zip' if kind == 'zip' else 'tar'} archive.",
                             field="file", code="bad_archive") from exc
    return kind


def inspect_archive(*, data: bytes, limits: Limits | None = None) -> list[Member]:
    """Judge an archive without writing anything: raises ArchiveRefused, else returns its members.

    The format comes from the content (sniff), not the name; the member list streams and every limit is
    checked at each entry, before that entry's data is inflated, so refusing costs at most the inflation that
    _inflate_cap allows for the upload's size (`bench/bench_archives.py` measures the worst cases)."""
    limits = limits or Limits.from_settings()
    members: list[Member] = []
    _walk(data, limits=limits, visit=lambda m, _open: members.append(m))
    check_members(members, archive_bytes=len(data), limits=limits)
    return members


def _common_root(members: list[Member]) -> PurePosixPath | None:
    """GitHub-style archives wrap everything in one folder (`repo-main/`): strip it so paths start at the repo."""
    firsts = {m.name.parts[0] for m in members if m.name.parts}
    files = [m for m in members if not m.is_dir]
    if len(firsts) == 1 and files and all(len(m.name.parts) > 1 for m in files):
        return PurePosixPath(next(iter(firsts)))
    return None


def member_files(*, data: bytes, limits: Limits | None = None) -> dict[str, int]:
    """{relative path after extraction: declared size} for a checked archive (quota checks need it up front)."""
    members = inspect_archive(data=data, limits=limits)
    strip = _common_root(members)
    return {str(m.name.relative_to(strip) if strip else m.name): m.size for m in members if not m.is_dir}


def extract_archive(*, data: bytes, dest: Path, limits: Limits | None = None) -> int:
    """Extract regular files into `dest` after `inspect_archive`; returns files written.

    A second streaming pass writes what the first judged; bytes are counted as written (a declared size can
    lie) and each member stops at its declared size, the whole at the total limit."""
    limits = limits or Limits.from_settings()
    members = inspect_archive(data=data, limits=limits)
    strip = _common_root(members)
    dest = dest.resolve()
    counts = {"written": 0, "total": 0}

    def write(m: Member, open_member: Callable[[], IO[bytes] | None]) -> None:
        if m.is_dir:
            return
        rel = m.name.relative_to(strip) if strip else m.name
        target = (dest / rel).resolve()
        if dest not in target.parents:
            raise ArchiveRefused(f"Archive entry {str(m.name)[:100]!r} leaves the archive root.", field="file",
                                 code="unsafe_archive")
        target.parent.mkdir(parents=True, exist_ok=True)
        src = open_member()
        if src is None:
            return
        own = 0
        with src, open(target, "wb") as out:
            while chunk := src.read(1 << 16):
                own += len(chunk)
                counts["total"] += len(chunk)
                if own > m.size or counts["total"] > limits.max_total_bytes:
                    raise _too_large("The archive expands past its declared sizes or the size limit.",
                                     code="archive_too_large")
                out.write(chunk)
        counts["written"] += 1

    _walk(data, limits=limits, visit=write)
    return counts["written"]


def stage_single_file(*, data: bytes, filename: str, dest: Path, limits: Limits | None = None) -> PurePosixPath:
    """One uploaded file placed at its (sanitised) name inside `dest`."""
    limits = limits or Limits.from_settings()
    if len(data) > limits.max_file_bytes:
        raise _too_large(f"The file is {len(data)} bytes; the limit is {limits.max_file_bytes}.",
                         code="file_too_large")
    rel = safe_member_path(PurePosixPath(filename).name or "upload")
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return rel


def clear(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
