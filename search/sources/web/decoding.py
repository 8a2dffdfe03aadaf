"""A response body's Content-Encoding undone layer by layer, each layer's output counted as it is inflated.

Why not the HTTP client's decoder: it inflates a whole network chunk at once, and with `Content-Encoding: gzip,
gzip` 1.8 KB on the wire became gigabytes before the page cap was looked at. Here every layer inflates at most
`STEP` bytes per call (zlib's `max_length`; the rest of its input waits in `unconsumed_tail`), hands them to the
next layer, and the bytes each layer has produced are checked against the cap before it produces more. So memory
stays near the cap whatever the ratio, and inflation stops at the cap, not after.

Only the encodings the crawler asks for (`ACCEPT_ENCODING`) are decoded; any other (br, zstd, compress, an unknown
name) and more than `MAX_LAYERS` layers are refused with a sentence that names them.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator

ACCEPT_ENCODING = "gzip, deflate"
MAX_LAYERS = 3  # a real server applies one; a few more is odd but harmless when every layer is bounded
STEP = 64 * 1024  # the most one layer inflates per call
_GZIP = zlib.MAX_WBITS | 16
_KNOWN = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": zlib.MAX_WBITS}


class Undecodable(Exception):
    """The encoding is not one the crawler decodes, or its data is corrupt (the message says which)."""


class TooLarge(Exception):
    """A layer inflated past the cap (the message says which and how far)."""


class _Layer:
    def __init__(self, *, name: str, wbits: int) -> None:
        self.name = name
        self.wbits = wbits
        self.inflater = zlib.decompressobj(wbits)
        self.produced = 0
        self.started = False

    def inflate(self, data: bytes) -> bytes:
        """At most STEP bytes of output; the input not consumed stays in the inflater's unconsumed_tail."""
        try:
            try:
                out = self.inflater.decompress(data, STEP)
            except zlib.error:
                # "deflate" is zlib-wrapped by the standard, raw by some servers: retry raw on the first bytes only
                if self.name != "deflate" or self.started:
                    raise
                self.inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                out = self.inflater.decompress(data, STEP)
        except zlib.error as exc:
            raise Undecodable(f"Content-Encoding {self.name}: corrupt data ({exc})") from None
        self.started = True
        return out


class BodyDecoder:
    """Raw body bytes in (`feed`), decoded bytes out; raises Undecodable or TooLarge.

    `max_bytes` bounds every layer's output, the innermost (what is kept) included."""

    def __init__(self, *, content_encoding: str, max_bytes: int) -> None:
        names = [t.strip().lower() for t in content_encoding.split(",")]
        names = [n for n in names if n and n != "identity"]
        if len(names) > MAX_LAYERS:
            raise Undecodable(f"{len(names)} Content-Encoding layers ({content_encoding[:100]}); at most {MAX_LAYERS} "
                          "are decoded")
        unknown = [n for n in names if n not in _KNOWN]
        if unknown:
            raise Undecodable(f"Content-Encoding {unknown[0][:40]!r} is not decoded (only {ACCEPT_ENCODING})")
        self.max_bytes = max_bytes
        self.encoding = ", ".join(names)
        # the last encoding listed was applied last: it is undone first
        self.layers = [_Layer(name=n, wbits=_KNOWN[n]) for n in reversed(names)]
        self.decoded = 0  # bytes of the innermost layer so far

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes this raw chunk yields, a STEP at a time."""
        yield from self._through(0, data)

    def _through(self, i: int, data: bytes) -> Iterator[bytes]:
        if i == len(self.layers):
            self.decoded += len(data)
            if self.decoded > self.max_bytes:
                raise TooLarge(f"decoded past {self.max_bytes} bytes")
            if data:
                yield data
            return
        layer = self.layers[i]
        while True:
            if layer.inflater.eof:  # bytes after the end of the stream are not part of the body
                return
            out = layer.inflate(data)
            data = layer.inflater.unconsumed_tail
            layer.produced += len(out)
            if layer.produced > self.max_bytes:
                raise TooLarge(f"Content-Encoding {layer.name} ({self.encoding}) inflated past {self.max_bytes} "
                               "bytes")
            if out:
                yield from self._through(i + 1, out)
            if not data and len(out) < STEP:  # a full STEP may leave more output pending: ask again
                return
