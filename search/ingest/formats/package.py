"""Zip packages (DOCX, EPUB) opened with the upload archive's checks, and members read with a byte budget.

Why the archive checks: a document package is an archive a user (or a crawled site) hands us, so it gets the same
judgement before a byte is inflated (search.ingest.archives.inspect_archive: entry count, declared sizes, ratio,
methods, names), and the same rule while inflating: bytes are counted as they come out, a member stops at its
declared size and the document at its total, so a member that lies about its size costs no more than it declared.
"""
from __future__ import annotations

import io
import zipfile
import zlib
from typing import IO, Any

from django.conf import settings

from search.ingest import archives
from search.ingest.formats.text_layer import Refused

ZIP_MAGIC = b"PK\x03\x04"


def max_text_chars() -> int:
    """The most text one document may hand the chunkers: what one uploaded text file may hold
    (UPLOAD_MAX_FILE_BYTES), however far its package inflates (the chunks, then their embeddings, follow the text)."""
    return settings.UPLOAD_MAX_FILE_BYTES


class Package:
    """A checked zip package: its member names, and members read within the package's byte budget."""

    def __init__(self, *, data: bytes, what: str) -> None:
        self.what = what
        limits = archives.Limits.from_settings()
        try:
            members = archives.inspect_archive(data=data, limits=limits)
        except archives.ArchiveRefused as exc:
            raise Refused(f"{what} refused: {exc.detail}") from exc
        self.sizes = {str(m.name): m.size for m in members if not m.is_dir}
        self.budget = limits.max_total_bytes
        self._zip = zipfile.ZipFile(io.BytesIO(data))

    def has(self, name: str) -> bool:
        return name in self.sizes

    def open(self, name: str) -> IO[bytes]:
        """A member as a stream that counts what it inflates and refuses past its declared size or the budget."""
        if name not in self.sizes:
            raise Refused(f"{self.what} refused: it has no {name[:100]!r}")
        return _Bounded(self, name)

    def read(self, name: str, *, limit: int) -> bytes:
        """A whole member, refused by its declared size past `limit` before a byte is inflated."""
        if self.sizes.get(name, 0) > limit:
            raise Refused(f"{self.what} refused: {name[:100]!r} declares {self.sizes[name]:,} bytes (at most "
                          f"{limit:,} are read)")
        with self.open(name) as src:
            return src.read()

    def close(self) -> None:
        self._zip.close()


class _Bounded(io.RawIOBase):
    def __init__(self, package: Package, name: str) -> None:
        self.package, self.name = package, name
        self.declared = package.sizes[name]
        self.own = 0
        try:
            self._src = package._zip.open(name)
        except (zipfile.BadZipFile, zlib.error, OSError, ValueError) as exc:
            raise Refused(f"{package.what} refused: {name[:100]!r} cannot be read") from exc

    def readable(self) -> bool:
        return True

    def readinto(self, buf: memoryview) -> int:  # type: ignore[override]
        try:
            chunk = self._src.read(min(len(buf), self.declared - self.own + 1))
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as exc:
            raise Refused(f"{self.package.what} refused: {self.name[:100]!r} is corrupt") from exc
        self.own += len(chunk)
        self.package.budget -= len(chunk)
        if self.own > self.declared or self.package.budget < 0:
            raise Refused(f"{self.package.what} refused: {self.name[:100]!r} inflates past its declared size or "
                          "the size limit")
        buf[:len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        self._src.close()
        super().close()


def local_name(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def attr(el: Any, name: str) -> str:
    for key, value in el.attrib.items():
        if local_name(key) == name:
            return value
    return ""


def iterparse(src: IO[bytes], *, events: tuple[str, ...]) -> Any:
    from lxml import etree  # noqa: PLC0415 - heavy: loads with the document readers only

    return etree.iterparse(src, events=events, resolve_entities=False, no_network=True, load_dtd=False,
                           huge_tree=False, remove_comments=True, remove_pis=True)


def xml_errors() -> tuple[type[Exception], ...]:
    from lxml import etree  # noqa: PLC0415 - heavy: loads with the document readers only

    return (etree.XMLSyntaxError, etree.LxmlError, ValueError)
