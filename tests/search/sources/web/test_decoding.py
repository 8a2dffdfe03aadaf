"""A body's Content-Encoding undone layer by layer with every layer's output counted against the cap."""
from __future__ import annotations

import gzip
import zlib

import pytest

from search.sources.web.decoding import STEP, BodyDecoder, TooLarge, Undecodable


def decode(data: bytes, *, encoding: str, max_bytes: int = 10_000_000, piece: int = 1000) -> bytes:
    d = BodyDecoder(content_encoding=encoding, max_bytes=max_bytes)
    return b"".join(part for i in range(0, len(data), piece) for part in d.feed(data[i:i + piece]))


def test_layers_are_undone_last_applied_first_whatever_the_chunking():
    text = b"<p>hello</p>" * 5000
    data = zlib.compress(gzip.compress(text))  # gzip applied first, then deflate: "gzip, deflate"
    assert decode(data, encoding="gzip, deflate", piece=7) == text
    assert decode(data, encoding="GZIP , Deflate", piece=len(data)) == text
    assert decode(gzip.compress(text), encoding="identity, x-gzip") == text
    assert decode(text, encoding="") == text


def test_raw_deflate_is_read_as_some_servers_send_it():
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    data = raw.compress(b"plain words " * 100) + raw.flush()
    assert decode(data, encoding="deflate") == b"plain words " * 100


def test_a_bomb_stops_at_the_cap_and_no_call_inflates_more_than_a_step():
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = gzip.compress(b"".join(inner.compress(bytes(1 << 20)) for _ in range(64)) + inner.flush())
    d = BodyDecoder(content_encoding="gzip, gzip", max_bytes=1_000_000)
    parts = []
    with pytest.raises(TooLarge, match="inflated past 1000000 bytes"):
        for part in d.feed(data):
            parts.append(part)
    assert max(len(p) for p in parts) <= STEP
    assert d.decoded <= 1_000_000 and all(layer.produced <= 1_000_000 + STEP for layer in d.layers)


def test_every_layer_is_counted_even_when_the_next_ignores_its_output():
    # the outer layer inflates to a small gzip member followed by megabytes of bytes the inner layer never reads
    inner = gzip.compress(b"small") + bytes(5_000_000)
    with pytest.raises(TooLarge, match=r"gzip \(gzip, gzip\) inflated past 1000000"):
        decode(gzip.compress(inner), encoding="gzip, gzip", max_bytes=1_000_000)


@pytest.mark.parametrize(("encoding", "message"), [
    ("br", "Content-Encoding 'br' is not decoded"),
    ("gzip, zstd", "Content-Encoding 'zstd' is not decoded"),
    ("compress", "Content-Encoding 'compress' is not decoded"),
    ("gzip, gzip, gzip, gzip", "4 Content-Encoding layers"),
])
def test_encodings_not_asked_for_and_too_many_layers_are_refused_by_name(encoding, message):
    with pytest.raises(Undecodable, match=message):
        BodyDecoder(content_encoding=encoding, max_bytes=1000)


def test_corrupt_data_is_refused_not_raised_as_a_zlib_error():
    with pytest.raises(Undecodable, match="Content-Encoding gzip: corrupt data"):
        decode(b"\x1f\x8b\x08\x00garbage-garbage-garbage", encoding="gzip")
