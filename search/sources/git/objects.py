"""Git object sizes read from headers, and a received pack checked object by object, without inflating any.

Why: dulwich inflates an object whole to hand it over (and to store it), so a 300 MB blob of zeros, 300 KB in
a pack, costs 300 MB of worker memory (twice that, briefly) the moment anything touches it. The size an object
declares is at the front of its data: in a pack, the object header's varint (for a delta, the target size at
the front of the delta stream, whose first bytes are inflated and nothing more); loose, the "blob <size>\\0"
header at the front of its zlib stream. Callers decide on that size before asking for content; a pack whose
objects declare more than allowed is refused before dulwich indexes it (indexing inflates every object).
"""
from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from typing import Any

from config.errors import ApiError

_OFS_DELTA, _REF_DELTA = 6, 7
_TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag", _OFS_DELTA: "delta", _REF_DELTA: "delta"}
_CHUNK = 64 * 1024


class ObjectTooLarge(ApiError):
    """A fetched pack holds an object larger than SOURCES_GIT_MAX_OBJECT_BYTES; nothing of it is stored."""

    status_code = 413
    code = "git_object_too_large"


def _varint_size(head: bytes) -> tuple[int, int, int]:
    """(type, size, header length) of a pack object header."""
    byte = head[0]
    type_num, size, shift, i = (byte >> 4) & 7, byte & 15, 4, 1
    while byte & 0x80:
        byte = head[i]
        size |= (byte & 0x7F) << shift
        shift, i = shift + 7, i + 1
    return type_num, size, i


def _delta_target_size(prefix: bytes) -> int:
    """The target size of a delta from the first inflated bytes of its stream (source size, then target size)."""
    pos = 0
    values = []
    for _ in range(2):
        value, shift = 0, 0
        while True:
            byte = prefix[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        values.append(value)
    return values[1]


def _head_of_stream(data: bytes, limit: int = 64) -> bytes:
    """The first `limit` inflated bytes of a zlib stream (at most `limit` are produced)."""
    return zlib.decompressobj().decompress(data, limit)


def declared_size(store: Any, sha: bytes) -> int | None:
    """The size the object `sha` (hex) declares, read from its pack or loose header; None when the store does
    not hold it in a form read here (the caller then treats it as unreadable)."""
    raw = bytes.fromhex(sha.decode())
    for pack in store.packs:
        try:
            offset = pack.index.object_offset(raw)
        except KeyError:
            continue
        with open(pack.data.path, "rb") as f:
            f.seek(offset)
            head = f.read(40)
            type_num, size, n = _varint_size(head)
            if type_num not in (_OFS_DELTA, _REF_DELTA):
                return size
            if type_num == _OFS_DELTA:
                while head[n] & 0x80:
                    n += 1
                n += 1
            else:
                n += 20
            f.seek(offset + n)
            return _delta_target_size(_head_of_stream(f.read(256)))
    path = store._get_shafile_path(sha.decode())  # dulwich's own loose-object path (checks the id first)
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        header = _head_of_stream(f.read(256), 64).split(b"\0", 1)[0]
    try:
        return int(header.split(b" ", 1)[1])
    except (IndexError, ValueError):
        return None


def read_blob(store: Any, sha: bytes, *, limit: int) -> tuple[bytes | None, int | None]:
    """(content, declared size): the content only when the declared size is at most `limit` (else None, and
    nothing was inflated)."""
    size = declared_size(store, sha)
    if size is None or size > limit:
        return None, size
    return store[sha].as_raw_string(), size


class PackScanner:
    """Fed the bytes of a received pack in order; refuses an object declaring more than `max_object` bytes
    (a delta: its target size) as soon as its header arrives. Inflates each object in 64 KiB steps to find
    where it ends, keeping nothing, so its memory is bounded whatever the object declares."""

    def __init__(self, *, max_object: int) -> None:
        self.max_object = max_object
        self.buf = b""
        self.header_done = False
        self.remaining: int | None = None  # objects left to read
        self.inflater: Any = None  # the current object's zlib stream, once its header is read
        self.delta_pending = False  # a delta whose target size is not read yet
        self.delta_prefix = b""
        self.objects = 0

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self._step():
            pass

    def _step(self) -> bool:
        if not self.header_done:
            if len(self.buf) < 12:
                return False
            self.remaining = int.from_bytes(self.buf[8:12], "big")
            self.buf, self.header_done = self.buf[12:], True
            return True
        if self.inflater is None:
            if not self.remaining:
                self.buf = b""  # the trailing checksum
                return False
            return self._object_header()
        if not self.buf:
            return False
        data, self.buf = self.buf, b""
        while data:
            out = self.inflater.decompress(data, _CHUNK)
            if self.delta_pending:
                self.delta_prefix += out
                if len(self.delta_prefix) >= 20 or self.inflater.eof:
                    self._check(_delta_target_size(self.delta_prefix), kind="delta")
                    self.delta_pending = False
            data = self.inflater.unconsumed_tail
            if self.inflater.eof:
                self.buf = self.inflater.unused_data + data
                self.inflater = None
                self.remaining = (self.remaining or 1) - 1
                return True
        return False

    def _object_header(self) -> bool:
        if not self.buf:
            return False
        try:
            type_num, size, n = _varint_size(self.buf)
            if type_num == _OFS_DELTA:
                while self.buf[n] & 0x80:
                    n += 1
                n += 1
            elif type_num == _REF_DELTA:
                n += 20
                if len(self.buf) < n:
                    return False
        except IndexError:  # the header is not all here yet
            return False
        if type_num in (_OFS_DELTA, _REF_DELTA):
            self.delta_pending, self.delta_prefix = True, b""
        else:
            self._check(size, kind=_TYPES.get(type_num, "object"))
        self.objects += 1
        self.buf = self.buf[n:]
        self.inflater = zlib.decompressobj()
        return True

    def _check(self, size: int, *, kind: str) -> None:
        if size > self.max_object:
            raise ObjectTooLarge(
                f"The repository holds a {kind} object of {size:,} bytes, more than the {self.max_object:,} a sync "
                "accepts (SOURCES_GIT_MAX_OBJECT_BYTES); nothing of this fetch was stored.")


def bounded_writer(*, write: Callable[[bytes], Any], scanner: PackScanner, max_bytes: int,
                   deadline: Callable[[], None]) -> Callable[[bytes], None]:
    """A pack_data callback: counts the bytes as they arrive and stops past `max_bytes` or the deadline (both
    raise), checks each object's declared size, then writes."""
    received = {"n": 0}

    def pack_data(data: bytes) -> None:
        received["n"] += len(data)
        if received["n"] > max_bytes:
            raise PackTooLarge(f"The fetch passed {max_bytes:,} bytes of pack data (SOURCES_GIT_MAX_FETCH_BYTES); "
                               "nothing of it was stored.")
        deadline()
        scanner.feed(data)
        write(data)

    return pack_data


class PackTooLarge(ApiError):
    status_code = 413
    code = "git_fetch_too_large"
