"""Embedding adaptation: the pairs mined from a corpus's own text, the batches, and a real (tiny) fine-tune that
writes a loadable model with its held-out evidence. Real Postgres and the real bundled MiniLM; nothing downloaded."""
from __future__ import annotations

import json
import random
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from inference.encoders import adapted_models_dir
from search.ingest.maintenance import chunk_embed_input
from search.quality import adaptation as ad

FUNCTION = '''def parse_retry_after(header, default=30):
    """Read the Retry-After header as a number of seconds, falling back to the default."""
    # servers send either seconds or an HTTP date; dates are not supported here
    if not header:
        return default
    raise ValueError("the Retry-After header is not a number of seconds")
'''


def test_code_pairs_mask_what_pairs_them():
    pairs = ad.code_pairs(text=FUNCTION, symbol="http.client.parse_retry_after",
                          micro_summary="def parse_retry_after(header, default=30) — Read the Retry-After header")
    assert set(pairs) == {"docstring", "name", "comment", "strings"}
    anchor, positive = pairs["name"]
    assert anchor == "parse retry after"
    assert "parse_retry_after" not in positive and "def func(header" in positive
    anchor, positive = pairs["docstring"]
    assert anchor.startswith("Read the Retry-After header") and "Read the Retry-After" not in positive
    assert "return default" in positive
    anchor, positive = pairs["comment"]
    assert anchor == "servers send either seconds or an HTTP date; dates are not supported here"
    assert "servers send" not in positive and "if not header:" in positive
    anchor, positive = pairs["strings"]
    assert anchor == "the Retry-After header is not a number of seconds"  # the docstring is not a literal here
    assert 'ValueError("")' in positive
    # the micro-summary is part of what the index embeds: the name is masked there too
    assert pairs["name"][1].startswith("def func(header, default=30)")


def test_a_method_names_its_class_and_a_one_word_function_gives_no_name_pair():
    method = "def allow(self, client_id):\n    return client_id in self.allowed\n"
    assert ad.code_pairs(text=method, symbol="RateLimiter.allow")["name"][0] == "rate limiter allow"
    assert "name" not in ad.code_pairs(text=method, symbol="allow")
    assert ad.code_pairs(text="x = (", symbol="") == {}  # unparsable and nameless: nothing to pair


def test_prose_pairs_take_the_heading_path_else_the_title_and_one_inverse_cloze_sentence():
    text = ("Coral reefs bleach when the water stays too warm for weeks. The algae that feed the coral leave its "
            "tissue. Without them the coral turns white and starves. Some reefs recover within a decade if the "
            "water cools again.")
    pairs = ad.prose_pairs(text=text, title="Why reefs turn white", heading_path=[], rng=random.Random(1))
    assert pairs["title"] == ("Why reefs turn white", text)
    sentence, rest = pairs["ict"]
    assert sentence in text and sentence not in rest and rest.startswith("Why reefs turn white\n")
    ruled = ad.prose_pairs(text=text, title="", heading_path=["Oceans", "Reef bleaching"], rng=random.Random(1))
    assert ruled["heading"][0] == "Oceans > Reef bleaching" and "title" not in ruled


def test_batches_hold_one_pair_type_and_never_one_chunk_twice():
    pairs = [ad.Pair(f"a{i}", f"p{i}", chunk_id=i % 7, type=t) for i in range(40) for t in ("name", "comment")]
    plan = ad.batches(pairs, size=4, steps=30, seed=3)
    assert len(plan) == 30
    for batch in plan:
        assert len({p.type for p in batch}) == 1
        assert len({p.chunk_id for p in batch}) == len(batch) >= 2
    assert plan == ad.batches(pairs, size=4, steps=30, seed=3)  # a fixed seed plans the same steps


def test_judged_pairs_take_their_share_of_the_steps_and_displace_the_mined_prose_pairs():
    code = [ad.Pair(f"a{i}", f"p{i}", chunk_id=i, type="name") for i in range(64)]
    prose = [ad.Pair(f"t{i}", f"x{i}", chunk_id=100 + i, type="title") for i in range(64)]
    judged = [ad.Pair(f"q{i}", f"j{i}", chunk_id=200 + i, type="judged") for i in range(40)]
    cfg = ad.AdaptConfig(steps=20, batch=4, judged_share=0.5, judged_epochs=5)
    plan = ad.plan_batches(mined=code + prose, judged=judged, cfg=cfg)
    kinds = [b[0].type for b in plan]
    assert len(plan) == 20 and kinds.count("judged") == 10 and kinds.count("name") == 10 and "title" not in kinds
    assert plan == ad.plan_batches(mined=code + prose, judged=judged, cfg=cfg)
    # judged pairs capped by their passes (20 pairs / 4 = 5 a pass): the code pairs fill the other steps
    capped = ad.plan_batches(mined=code, judged=judged[:20], cfg=ad.AdaptConfig(steps=20, batch=4, judged_epochs=1))
    assert [b[0].type for b in capped].count("judged") == 5 and len(capped) == 20
    # no code pairs: the judged pairs alone, at most judged_epochs passes over them (40 pairs / 4 = 10 a pass)
    alone = ad.plan_batches(mined=prose, judged=judged, cfg=ad.AdaptConfig(steps=300, batch=4, judged_epochs=2))
    assert len(alone) == 20 and {b[0].type for b in alone} == {"judged"}
    # no judged pairs: the mined pairs, as before
    assert ad.plan_batches(mined=code + prose, judged=[], cfg=cfg) == ad.batches(code + prose, size=4, steps=20,
                                                                                  seed=cfg.seed)


def test_judged_pairs_read_the_passage_as_served_take_its_negatives_in_turn_and_a_query_without_any_trains_in_batch(code_dataset):
    from search.models import Chunk

    _, dataset = code_dataset
    pk = dict(Chunk.objects.filter(dataset=dataset).values_list("symbol", "pk"))
    text = {c.pk: chunk_embed_input(c) for c in Chunk.objects.filter(dataset=dataset)}  # as the index embeds them
    judged = [("read a config", pk["read_config_entries"]), ("read a config", pk["load_config_entries"]),
              ("count tokens", pk["count_token_entries"])]
    negatives = {"read a config": [pk["write_config_entries"], pk["check_config_entries"]]}
    pairs = ad.judged_pairs(judged, negatives=negatives)
    assert [p.negative for p in pairs] == [text[pk["write_config_entries"]], text[pk["check_config_entries"]], ""]
    assert all(p.type == "judged" for p in pairs) and pairs[0].positive == text[pk["read_config_entries"]]
    micro = Chunk.objects.get(pk=pk["read_config_entries"]).micro_summary
    assert micro and pairs[0].positive.startswith(micro + "\n")  # the summary line the served vector reads too


def test_adapt_trains_a_loadable_copy_and_keeps_the_held_out_evidence(code_dataset, settings, tmp_path):
    from sentence_transformers import SentenceTransformer

    from inference.encoders import resolve_model

    settings.VAR_DIR = tmp_path / "var"
    _, dataset = code_dataset
    cfg = ad.AdaptConfig(steps=4, batch=8, heldout=0.2)
    result = ad.adapt(name="pkg-adapted", dataset_ids=[dataset.pk], cfg=cfg, progress=False, log=lambda m: None)
    manifest = json.loads((adapted_models_dir() / "pkg-adapted" / "manifest.json").read_text())
    assert manifest == result.manifest
    assert manifest["kind"] == "bi-encoder" and manifest["base_model"] == "all-MiniLM-L6-v2"
    assert manifest["training"]["steps_run"] == 4 and manifest["data"]["chunks_by_kind"] == {"code": 60}
    assert set(manifest["data"]["train_pairs"]) == {"name", "comment", "strings"}
    held = manifest["heldout"]
    assert held["pairs"] == sum(manifest["data"]["heldout_pairs"].values()) > 0
    assert 0 <= held["base_mrr@10"] <= 1 and 0 <= held["adapted_mrr@10"] <= 1
    assert held["confirmed"] == ad.heldout_confirms(held)[0]
    assert set(held["by_type"]) == {"name", "comment", "strings"} >= {t for t, v in held["by_type"].items()
                                                                       if "gain_lower_95" in v}
    # the folder is a sentence-transformers model, and training changed it
    adapted = SentenceTransformer(result.path, device="cpu")
    base = SentenceTransformer(resolve_model()[1], device="cpu")
    text = ["parse header entries"]
    assert adapted.encode(text).shape == base.encode(text).shape == (1, 384)
    assert not np.allclose(adapted.encode(text), base.encode(text), atol=1e-4)
    # the same seed and data train the same model
    again = ad.adapt(name="pkg-again", dataset_ids=[dataset.pk], cfg=cfg, progress=False, log=lambda m: None)
    assert again.manifest["heldout"] == manifest["heldout"]
    assert again.manifest["training"]["loss_last"] == manifest["training"]["loss_last"]


def test_with_judged_queries_the_held_out_check_keeps_the_code_pairs_and_drops_the_prose_ones():
    held = [ad.Pair("a", "p", 1, "name"), ad.Pair("t", "x", 2, "title"), ad.Pair("s", "y", 3, "ict")]
    mined = ad.Mined(train=[], held=held, pools={"name": {1: "p"}, "title": {2: "x"}, "ict": {3: "y"}},
                     kinds={"code": 1, "web": 2})
    assert mined.checked(None) is mined
    code_only = mined.checked(set(ad.CODE_TYPES))
    assert [p.type for p in code_only.held] == ["name"] and set(code_only.pools) == {"name"}
    assert ad.heldout_evidence([], [], seed=1)["pairs"] == 0  # nothing left to check: no figures, not confirmed
    assert ad.heldout_evidence([], [], seed=1)["confirmed"] is False


def test_a_gain_carried_by_the_name_pairs_alone_does_not_confirm_the_model():
    """The standard library's wrong adoption, in small: names gain, comments lose, the pooled code bound is above 0."""
    base = [("name", 0.2)] * 60 + [("comment", 0.6)] * 20 + [("strings", 0.5)] * 10
    adapted = [("name", 0.5)] * 60 + [("comment", 0.5)] * 20 + [("strings", 0.5)] * 10
    held = ad.heldout_evidence(base, adapted, seed=1)
    assert held["code_gain_lower_95"] > 0 and held["non_name_gain_lower_95"] < 0
    assert held["by_type"]["name"]["gain_lower_95"] > 0 > held["by_type"]["comment"]["gain_lower_95"]
    confirmed, why = ad.heldout_confirms(held)
    assert confirmed is held["confirmed"] is False and "name pairs" in why
    also = ad.heldout_evidence(base, [("name", 0.5)] * 60 + [("comment", 0.8)] * 20 + [("strings", 0.5)] * 10, seed=1)
    assert also["confirmed"] is True and also["non_name_gain_lower_95"] > 0
    only_names = ad.heldout_evidence([("name", 0.2)] * 30, [("name", 0.6)] * 30, seed=1)
    assert only_names["non_name_gain_lower_95"] is None and only_names["confirmed"] is False


def test_the_check_on_a_large_corpus_samples_its_held_pairs_and_candidates_but_keeps_each_held_pairs_answer():
    pool = {i: f"p{i}" for i in range(50)}
    held = [ad.Pair(f"a{i}", f"p{i}", i, "title") for i in range(0, 50, 2)]  # 25 held pairs
    mined = ad.Mined(train=[], held=held, pools={"title": pool, "name": {1: "x"}}, kinds={"web": 50})
    small = mined.capped(pool_max=20, held_max=10, seed=4)
    assert len(small.held) == 10 and len(small.pools["title"]) == 20
    assert all(p.chunk_id in small.pools["title"] for p in small.held)  # every scored anchor can find its answer
    assert small.pools["name"] == {1: "x"} and small == mined.capped(pool_max=20, held_max=10, seed=4)
    assert mined.capped(pool_max=100, held_max=100).held == held  # under the caps nothing is dropped
    assert mined.capped(pool_max=100, held_max=100).pools == mined.pools


def test_judged_queries_train_as_pairs_of_their_own_and_the_manifest_counts_them(code_dataset, settings, tmp_path):
    from search.models import Chunk

    settings.VAR_DIR = tmp_path / "var"
    _, dataset = code_dataset
    chunks = list(Chunk.objects.filter(dataset=dataset).order_by("pk").values_list("pk", "symbol"))
    judged = [(f"{symbol.replace('_', ' ')} please", pk) for pk, symbol in chunks[:24]]
    cfg = ad.AdaptConfig(steps=4, batch=8, heldout=0.2)
    result = ad.adapt(name="pkg-judged", dataset_ids=[dataset.pk], cfg=cfg, judged=judged, progress=False,
                      log=lambda m: None)
    data = result.manifest["data"]
    assert data["train_pairs"]["judged"] == 24 and data["judged_train_queries"] == 24
    assert data["judged_with_hard_negative"] == 24  # each judged query trains against a passage ranked near it
    assert data["steps_by_type"]["judged"] == 2 and sum(data["steps_by_type"].values()) == 4
    assert "judged" not in data["heldout_pairs"]  # the held-out check reads mined pairs only
    assert "skipped" not in result.manifest["heldout"]  # code pairs are always checked
    plain = ad.adapt(name="pkg-judged-plain", dataset_ids=[dataset.pk], judged=judged, progress=False,
                     cfg=ad.AdaptConfig(steps=4, batch=8, heldout=0.2, hard_negatives=False), log=lambda m: None)
    assert plain.manifest["data"]["judged_with_hard_negative"] == 0  # in-batch negatives only


def test_label_free_adaptation_neither_trains_on_nor_decides_by_the_judged_queries(toy_beir, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    root, _ = toy_beir
    args = ["adapt_embeddings", "--beir", str(root), "--batch", "4", "--steps", "2", "--judged-max", "4",
            "--no-progress"]
    out = StringIO()
    call_command(*args, "--name", "toy-free", "--label-free", stdout=out, stderr=StringIO())
    manifest = json.loads((adapted_models_dir() / "toy-free" / "manifest.json").read_text())
    assert "judged" not in manifest["data"] and manifest["data"]["judged_train_queries"] == 0
    assert "not adopted: prose without judged queries" in out.getvalue()
    call_command(*args, "--name", "toy-judged", "--no-adopt", stdout=StringIO(), stderr=StringIO())
    manifest = json.loads((adapted_models_dir() / "toy-judged" / "manifest.json").read_text())
    assert manifest["data"]["judged_train_queries"] == 5  # without the flag the queries beyond the check train


def test_the_command_refuses_bad_arguments_and_too_little_content(code_dataset, make_user, make_project):
    with pytest.raises(CommandError, match="--steps"):
        call_command("adapt_embeddings", "--project", "tuned", "--name", "x", "--steps", "0")
    with pytest.raises(CommandError, match="--judged-epochs"):
        call_command("adapt_embeddings", "--project", "tuned", "--name", "x", "--judged-epochs", "0")
    with pytest.raises(CommandError, match="--judged-max"):
        call_command("adapt_embeddings", "--project", "tuned", "--name", "x", "--judged-max", "-1")
    with pytest.raises(CommandError, match="no project"):
        call_command("adapt_embeddings", "--project", "nope", "--name", "x")
    make_project("bare", make_user())
    with pytest.raises(CommandError, match="training pairs"):
        call_command("adapt_embeddings", "--project", "bare", "--name", "x", "--no-progress", stderr=StringIO())
    with pytest.raises(CommandError, match="letters, digits"):
        call_command("adapt_embeddings", "--project", "tuned", "--name", "bad name", "--no-progress",
                     stderr=StringIO())
