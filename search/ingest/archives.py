"""Uploaded archives (zip, tar.gz) checked before anything is extracted, then unpacked into a private dir.

Why check first and extract by hand: an archive is the user's description of files on our disk. Entries
with absolute paths or `..` would write outside the target (zip-slip), links could point anywhere, and a
few kilobytes can expand to gigabytes (a zip bomb). So the member list is read and judged as a whole
(paths, types, count, declared sizes, compression ratio) and refused with a clear code before a byte is
written; extraction then copies regular files only, counting real bytes as it goes, since a member's
declared size can lie. Limits are settings (UPLOAD_*); breaking one raises ArchiveRefused, which the API
turns into a 413 or 422 and which writes nothing.
"""
from __future__ import annotations

import io
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

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


def _zip_members(zf: zipfile.ZipFile) -> list[Member]:
    out = []
    for info in zf.infolist():
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ArchiveRefused(f"Archive entry {info.filename[:100]!r} is a link.", field="file",
                                 code="unsafe_archive")
        out.append(Member(safe_member_path(info.filename), info.file_size, info.compress_size, info.is_dir()))
    return out


def _tar_members(tf: tarfile.TarFile) -> list[Member]:
    out = []
    for info in tf.getmembers():
        if info.issym() or info.islnk():
            raise ArchiveRefused(f"Archive entry {info.name[:100]!r} is a link.", field="file", code="unsafe_archive")
        if not (info.isfile() or info.isdir()):
            raise ArchiveRefused(f"Archive entry {info.name[:100]!r} is a device or special file.", field="file",
                                 code="unsafe_archive")
        out.append(Member(safe_member_path(info.name), info.size, info.size, info.isdir()))
    return out


def check_members(members: list[Member], *, archive_bytes: int, limits: Limits) -> None:
    files = [m for m in members if not m.is_dir]
    if len(files) > limits.max_files:
        raise _too_large(f"The archive has {len(files)} files; the limit is {limits.max_files}.",
                         code="too_many_files")
    total = sum(m.size for m in files)
    if total > limits.max_total_bytes:
        raise _too_large(f"The archive expands to {total} bytes; the limit is {limits.max_total_bytes}.",
                         code="archive_too_large")
    if archive_bytes and total / max(1, archive_bytes) > limits.max_ratio:
        raise _too_large(f"The archive expands {total / max(1, archive_bytes):.0f}x; the limit is "
                         f"{limits.max_ratio:g}x (a compression bomb?).", code="compression_ratio")
    seen: set[PurePosixPath] = set()
    for m in files:
        if m.name in seen:
            raise ArchiveRefused(f"Archive entry {str(m.name)[:100]!r} appears twice.", field="file",
                                 code="unsafe_archive")
        seen.add(m.name)


def _open(data: bytes, filename: str) -> tuple[str, zipfile.ZipFile | tarfile.TarFile]:
    lower = filename.lower()
    try:
        if lower.endswith(".zip"):
            return "zip", zipfile.ZipFile(io.BytesIO(data))
        return "tar", tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveRefused(f"The file is not a readable {'zip' if lower.endswith('.zip') else 'tar'} archive.",
                             field="file", code="bad_archive") from exc


def inspect_archive(*, data: bytes, filename: str, limits: Limits | None = None) -> list[Member]:
    """Judge an archive without extracting it: raises ArchiveRefused, else returns its members."""
    limits = limits or Limits.from_settings()
    kind, arc = _open(data, filename)
    with arc:
        try:
            members = _zip_members(arc) if kind == "zip" else _tar_members(arc)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
            raise ArchiveRefused("The archive's member list is corrupt.", field="file", code="bad_archive") from exc
    check_members(members, archive_bytes=len(data), limits=limits)
    return members


def _common_root(members: list[Member]) -> PurePosixPath | None:
    """GitHub-style archives wrap everything in one folder (`repo-main/`): strip it so paths start at the repo."""
    firsts = {m.name.parts[0] for m in members if m.name.parts}
    files = [m for m in members if not m.is_dir]
    if len(firsts) == 1 and files and all(len(m.name.parts) > 1 for m in files):
        return PurePosixPath(next(iter(firsts)))
    return None


def member_files(*, data: bytes, filename: str, limits: Limits | None = None) -> dict[str, int]:
    """{relative path after extraction: declared size} for a checked archive (quota checks need it up front)."""
    members = inspect_archive(data=data, filename=filename, limits=limits)
    strip = _common_root(members)
    return {str(m.name.relative_to(strip) if strip else m.name): m.size for m in members if not m.is_dir}


def extract_archive(*, data: bytes, filename: str, dest: Path, limits: Limits | None = None) -> int:
    """Extract regular files into `dest` after `inspect_archive`; returns files written.

    Bytes are counted as written (a declared size can lie) and the total limit is enforced again."""
    limits = limits or Limits.from_settings()
    members = inspect_archive(data=data, filename=filename, limits=limits)
    strip = _common_root(members)
    dest = dest.resolve()
    written = total = 0
    kind, arc = _open(data, filename)
    with arc:
        for m, raw in zip(members, arc.infolist() if kind == "zip" else arc.getmembers(), strict=True):
            if m.is_dir:
                continue
            rel = m.name.relative_to(strip) if strip else m.name
            target = (dest / rel).resolve()
            if dest not in target.parents:
                raise ArchiveRefused(f"Archive entry {str(m.name)[:100]!r} leaves the archive root.", field="file",
                                     code="unsafe_archive")
            target.parent.mkdir(parents=True, exist_ok=True)
            src = arc.open(raw) if kind == "zip" else arc.extractfile(raw)
            if src is None:
                continue
            with src, open(target, "wb") as out:
                while chunk := src.read(1 << 16):
                    total += len(chunk)
                    if total > limits.max_total_bytes:
                        raise _too_large("The archive expands past the size limit.", code="archive_too_large")
                    out.write(chunk)
            written += 1
    return written


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
