"""Rulebook chunking and the deterministic classifier, on real SRD 5.1 files (a CC-BY excerpt vendored in
tests/search/fixtures/srd51, so the tests run in any fresh clone; SRD_DIR points them at a full copy)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from search.ingest.rules import chunk_json_records, chunk_markdown, classify, read_rulebook

SRD = Path(os.environ.get("SRD_DIR", Path(__file__).resolve().parents[1] / "fixtures" / "srd51"))


def _chunks(rel: str):
    text = (SRD / rel).read_text(encoding="utf-8")
    return chunk_markdown(text=text, source=rel, ruleset_id="srd51", book_id="srd", chapter=rel.split("/")[0])


def _by_symbol(chunks, symbol):
    hits = [c for c in chunks if c.symbol == symbol]
    assert hits, f"no chunk with heading {symbol!r}: {[c.symbol for c in chunks]}"
    return hits


def test_grappled_is_a_condition():
    chunks = _chunks("Gamemastering/Conditions.md")
    (grappled,) = _by_symbol(chunks, "Grappled")
    assert grappled.content_kind == "condition"
    assert grappled.section_path == ["Gamemastering", "Conditions", "Grappled"]
    assert "speed becomes 0" in grappled.text
    assert grappled.is_rule_bearing
    assert "condition:grappled" in grappled.tags
    assert grappled.page == "" and grappled.start_line < grappled.end_line  # Markdown has no pages; the book is book_id


def test_fireball_is_a_level_3_evocation_spell():
    (fireball,) = _chunks("Spells/Fireball.md")
    assert fireball.content_kind == "spell"
    assert fireball.traits["level"] == 3
    assert fireball.traits["school"] == "evocation"
    assert fireball.traits["components"] == ["V", "S", "M"]
    assert fireball.traits["material"] == "a tiny ball of bat guano and sulfur"
    assert fireball.traits["concentration"] is False
    assert {"spell", "level:3", "school:evocation"} <= set(fireball.tags)


def test_cantrip_and_ritual_and_concentration_traits():
    chunks = read_rulebook(path=SRD / "Spells", ruleset_id="srd51", book_id="srd")
    by_name = {c.symbol: c for d in chunks for c in d.chunks}
    assert by_name["Fire Bolt"].traits["level"] == 0
    assert by_name["Detect Magic"].traits["ritual"] is True
    assert by_name["Detect Magic"].traits["concentration"] is True


def test_a_table_stays_a_table():
    chunks = _chunks("Gamemastering/Conditions.md")
    tables = [c for c in chunks if c.content_kind == "table"]
    assert len(tables) == 1
    table = tables[0]
    assert table.traits == {"caption": "Exhaustion Effects", "columns": ["Level", "Effect"]}
    # the whole table, all six levels, in one chunk
    for row in ("Disadvantage on ability checks", "Speed halved", "Death"):
        assert row in table.text
    prose = [c for c in chunks if c.symbol == "Exhaustion" and c.content_kind != "table"]
    assert prose and all("|" not in c.text for c in prose)  # the prose around the table stays with its heading


def test_monster_stat_block_is_one_chunk_with_its_actions():
    (ogre,) = _chunks("Monsters/Ogre.md")
    assert ogre.content_kind == "monster"
    assert ogre.traits["cr"] == "2" and ogre.traits["size"] == "large" and ogre.traits["type"] == "giant"
    assert "Greatclub" in ogre.text and "Javelin" in ogre.text  # the ###### Actions heading did not split it


def test_items_feats_actions():
    (wand,) = _chunks("Treasure/Wand of Fireballs.md")
    assert wand.content_kind == "item"
    assert wand.traits == {"item_type": "wand", "rarity": "rare", "attunement": True}
    (grappler,) = _by_symbol(_chunks("Characterizations/Feats.md"), "Grappler")
    assert grappler.content_kind == "feat" and grappler.traits["prerequisite"] == "Strength 13 or higher"
    combat = _chunks("Gameplay/Combat.md")
    assert _by_symbol(combat, "Dash")[0].content_kind == "action"
    assert _by_symbol(combat, "Opportunity Attacks")[0].content_kind == "rule"


def test_classifier_is_deterministic_over_the_whole_srd():
    a = read_rulebook(path=SRD, ruleset_id="srd51", book_id="srd")
    b = read_rulebook(path=SRD, ruleset_id="srd51", book_id="srd")
    sig = lambda docs: [(d.path, c.start_line, c.content_kind, json.dumps(c.traits, sort_keys=True))  # noqa: E731
                        for d in docs for c in d.chunks]
    assert sig(a) == sig(b)
    kinds = {c.content_kind for d in a for c in d.chunks}
    assert kinds == {"spell", "feat", "item", "condition", "action", "monster", "rule", "narrative", "table"}
    assert not any(d.path.lower() in {"readme.md", "source.md"} for d in a)
    # only narrative is not rule-bearing
    assert all(c.is_rule_bearing == (c.content_kind != "narrative") for d in a for c in d.chunks)


def test_narrative_vs_rule_cues():
    kind, _ = classify(text="The Hearth cities glow through the long dusk, and old songs tell of morning.",
                       chain=["Lore"])
    assert kind == "narrative"
    kind, traits = classify(text="You can make a Dexterity saving throw (DC 13) or take 2d6 fire damage.",
                            chain=["Traps"])
    assert kind == "rule" and traits["rule_cues"] >= 2


def test_json_records_keep_publisher_kind_and_classify_the_rest():
    recs = [{"text": "*3rd-level evocation*\n\n**Components:** V, S\n\nBoom.", "section_path": ["Spells", "Boom"]},
            {"text": "A lore paragraph.", "section_path": ["Lore"], "content_kind": "narrative", "page": 12},
            {"text": ""}]
    out = chunk_json_records(records=recs, source="book.json", ruleset_id="r", book_id="b")
    assert [c.content_kind for c in out] == ["spell", "narrative"]
    assert out[0].traits["level"] == 3 and out[1].page == "12" and not out[1].is_rule_bearing


def test_a_rules_section_is_embedded_under_the_headings_above_it_below_the_chapter():
    from search.ingest.base import embed_input

    (grappled,) = _by_symbol(_chunks("Gamemastering/Conditions.md"), "Grappled")
    text = embed_input(grappled)
    assert text.startswith("Conditions > Grappled\n")  # "Gamemastering", the chapter (a folder), is left out
    assert text.endswith(grappled.text) and text.count("speed becomes 0") == 1


def test_a_summary_line_still_leads_and_other_kinds_gain_no_headings():
    from search.ingest.base import ChunkDraft, embed_input

    web = ChunkDraft(text="body", start_line=1, end_line=1, kind="web", heading_path=["Guide", "Install"],
                     micro_summary="Guide > Install: first sentence.")
    code = ChunkDraft(text="def f(): pass", start_line=1, end_line=1, kind="code", heading_path=["f"])
    rules = ChunkDraft(text="## Dodge\nbody", start_line=1, end_line=1, kind="rules",
                       heading_path=["Actions in Combat", "Dodge"], micro_summary="a publisher's summary")
    assert embed_input(web) == "Guide > Install: first sentence.\nbody"
    assert embed_input(code) == "def f(): pass"
    assert embed_input(rules) == "a publisher's summary\n## Dodge\nbody"
