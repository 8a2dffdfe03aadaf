"""The embedding precision switch: bf16 must be a speed choice that does not move rankings."""
from __future__ import annotations

import numpy as np
import pytest

from inference import encoders

CODE = [
    "def deduct(*, user, amount, reason):\n    \"\"\"Take credits under a row lock so two requests never overspend.\"\"\"",
    "class ProjectShare(models.Model):\n    project = models.ForeignKey(Project, on_delete=models.CASCADE)",
    "A creature that is grappled has its speed set to 0 and cannot benefit from bonuses to speed.",
    "Senior backend engineer in Berlin, eight years of Go and Postgres, led a payments team.",
]


def test_bf16_vectors_keep_fp32_cosine_and_ranking(settings):
    settings.EMBEDDING_PRECISION = "fp32"
    fp32 = encoders.embed_texts(CODE)
    settings.EMBEDDING_PRECISION = "bf16"
    bf16 = encoders.embed_texts(CODE)
    assert bf16.dtype == np.float32 and bf16.shape == fp32.shape
    assert not np.array_equal(fp32, bf16), "bf16 autocast did not run"
    assert np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-3)
    assert (fp32 * bf16).sum(1).min() > 0.999
    q = encoders.embed_query("where are credits deducted?")
    assert list(np.argsort(-(bf16 @ q))) == list(np.argsort(-(fp32 @ q)))


def test_short_query_stays_fp32_under_bf16(settings):
    """A query is shorter than BF16_MIN_CHARS: fp32 is faster there, so its vector is the fp32 one exactly."""
    settings.EMBEDDING_PRECISION = "fp32"
    q32 = encoders.embed_query("where are credits deducted?")
    settings.EMBEDDING_PRECISION = "bf16"
    assert np.array_equal(encoders.embed_query("where are credits deducted?"), q32)
    long_text = CODE[0] * 4
    assert len(long_text) >= encoders.BF16_MIN_CHARS
    settings.EMBEDDING_PRECISION = "fp32"
    long32 = encoders.embed_query(long_text)
    settings.EMBEDDING_PRECISION = "bf16"
    assert not np.array_equal(encoders.embed_query(long_text), long32)


@pytest.mark.parametrize(("setting", "native", "expected"), [
    ("auto", True, "bf16"), ("auto", False, "fp32"), ("", False, "fp32"),
    ("fp32", True, "fp32"), (" BF16 ", False, "bf16"),
])
def test_auto_precision_uses_bf16_only_on_cpus_with_native_bf16(monkeypatch, setting, native, expected):
    monkeypatch.setattr(encoders, "cpu_has_native_bf16", lambda: native)
    assert encoders.resolve_precision(setting) == expected


def test_unknown_precision_names_the_setting():
    with pytest.raises(encoders.EmbeddingModelError, match="EMBEDDING_PRECISION='fp8'"):
        encoders.resolve_precision("fp8")


@pytest.mark.django_db
def test_embed_cached_embeds_each_text_once_and_reuses_the_cache():
    from inference.models import EmbeddingCache

    texts = ["def load(path): ...", "class Parser: ...", "def load(path): ..."]
    vecs = encoders.embed_cached(texts)
    assert vecs.shape == (3, encoders.embedding_dim())  # the model's dimension, not a constant
    assert np.array_equal(vecs[0], vecs[2])
    assert EmbeddingCache.objects.filter(model_id=encoders.dense_model_id()).count() == 2
    assert encoders.fill_embedding_cache(texts) == {"embedded": 0, "cached": 2}
    assert np.allclose(encoders.embed_cached(texts[1:2])[0], vecs[1], atol=1e-6)


@pytest.mark.django_db
def test_cache_rows_written_in_one_copy_read_back_as_the_encoders_floats_bit_for_bit():
    from inference.models import EmbeddingCache

    texts = [f"def f{i}(x):\n    return x * {i}" for i in range(3)] + ["class Empty: pass"]
    assert encoders.fill_embedding_cache(texts) == {"embedded": 4, "cached": 0}
    model_id = encoders.dense_model_id()
    got = encoders.cached_vectors(model_id=model_id, hashes=[encoders.text_hash(t) for t in texts])
    expected = encoders.embed_texts(texts)
    for t, v in zip(texts, expected, strict=True):
        assert got[encoders.text_hash(t)] == [float(x) for x in v]  # float32 widened exactly, no rounding
    rows = EmbeddingCache.objects.filter(model_id=model_id)
    assert rows.count() == 4 and set(rows.values_list("dim", flat=True)) == {len(expected[0])}
    assert all(r.created_at is not None for r in rows)


@pytest.mark.django_db
def test_a_text_cached_by_another_write_is_embedded_again_and_its_row_is_neither_duplicated_nor_changed():
    from inference.models import EmbeddingCache

    texts = ["def shared(): return 1", "def fresh(): return 2"]
    encoders.fill_embedding_cache(texts[:1])
    before = EmbeddingCache.objects.get(text_hash=encoders.text_hash(texts[0]))
    # not the writer's own text (reuse names none): embedded again, counted as embedded, like a text nobody has
    assert encoders.fill_embedding_cache(texts, reuse=set()) == {"embedded": 2, "cached": 0}
    rows = EmbeddingCache.objects.filter(model_id=encoders.dense_model_id())
    assert sorted(rows.values_list("text_hash", flat=True)) == sorted(map(encoders.text_hash, texts))
    after = rows.get(text_hash=before.text_hash)
    assert (after.pk, after.created_at, after.vector) == (before.pk, before.created_at, before.vector)


@pytest.mark.django_db
def test_a_row_cached_by_another_writer_during_the_fill_does_not_fail_it(monkeypatch):
    """Between the lookup and the write another process may cache one of the texts: the COPY then meets its row,
    and the batch is written as INSERT ... ON CONFLICT DO NOTHING instead; the other row stays as it was."""
    from django.db import transaction

    from inference.models import EmbeddingCache

    texts = ["def racing(): return 1", "def alone(): return 2"]
    real = encoders._embed_with_retry

    def embed_while_another_writer_caches(batch, **kwargs):
        vectors = real(batch, **kwargs)
        EmbeddingCache.objects.create(model_id=encoders.dense_model_id(), text_hash=encoders.text_hash(texts[0]),
                                      dim=3, vector=[1.0, 2.0, 3.0])
        return vectors

    monkeypatch.setattr(encoders, "_embed_with_retry", embed_while_another_writer_caches)
    inserted = []
    insert = encoders.insert_float8_vectors
    monkeypatch.setattr(encoders, "insert_float8_vectors", lambda **kw: (inserted.append(kw["rows"]), insert(**kw)))
    with transaction.atomic():
        assert encoders.fill_embedding_cache(texts) == {"embedded": 2, "cached": 0}
        rows = dict(EmbeddingCache.objects.filter(model_id=encoders.dense_model_id())
                    .values_list("text_hash", "vector"))
    assert rows[encoders.text_hash(texts[0])] == [1.0, 2.0, 3.0]  # the other writer's row, left as it was
    assert len(rows[encoders.text_hash(texts[1])]) == encoders.embedding_dim()
    assert len(rows) == 2
    assert [len(r) for r in inserted] == [2]  # the COPY met the row; the batch went again, row by row
