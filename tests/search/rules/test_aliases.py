"""Aliases: learned from "Phrase (ABBR)" in the books, stored with the traversal config, and
applied to the sparse query only."""
from __future__ import annotations

from search.rules.aliases import DEFAULT_ALIASES, expand_query, learn_aliases, merge_aliases
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures


def test_learn_aliases_takes_the_shortest_tail_of_the_phrase_that_spells_the_abbreviation():
    text = ("Your Armor Class (AC) rises. Add your Dexterity (DEX) modifier. You gain a number of experience "
            "points (XP). The Systems Reference Document (SRD) is open. See the table (below) and HEAT (X).")
    assert learn_aliases([text]) == {"ac": "armor class", "dex": "dexterity", "xp": "experience points",
                                     "srd": "systems reference document"}


def test_learn_aliases_keeps_the_first_definition_and_ignores_letters_that_do_not_match():
    assert learn_aliases(["the Difficulty Class (DC) of it", "a Damage Check (DC) here"]) == {"dc": "difficulty class"}
    assert learn_aliases(["a fire spell (FOO)"]) == {}


def test_merge_aliases_lowercases_and_later_tables_win():
    assert merge_aliases({"AC": "Armor Class"}, {"ac": "armour class", "x": "x"}, None) == {"ac": "armour class"}


def test_expand_query_adds_expansions_and_abbreviations_once():
    aliases = {"ac": "armor class", "hp": "hit points", "temp": "temporary"}
    assert expand_query("do temp HP stack", aliases) == "do temp HP stack hit points temporary"
    assert expand_query("what raises my armor class?", aliases) == "what raises my armor class? ac"
    assert expand_query("my AC and armor class", aliases) == "my AC and armor class"   # both present: nothing
    assert expand_query("no alias here", aliases) == "no alias here"
    assert expand_query("ache", aliases) == "ache"                                    # whole words only


def test_the_config_stores_learned_defaults_and_keeps_a_gm_edit(demo_project):
    from search.models import Chunk
    from search.rules.traversal import build_default_config, load_config, save_config

    cfg = load_config(ruleset_id="emberfall")
    assert cfg.aliases["ac"] == "armor class" and set(DEFAULT_ALIASES) <= set(cfg.aliases)
    chunk = Chunk.objects.filter(ruleset_id="emberfall", book_id="core").first()
    chunk.text += " Your Ward Rating (WR) blocks hexes."
    chunk.save(update_fields=["text"])
    edited = save_config(ruleset_id="emberfall", names={}, aliases={**cfg.aliases, "hp": "health pool"})
    rebuilt = build_default_config(ruleset_id="emberfall")
    assert rebuilt.version == edited.version + 1
    assert rebuilt.aliases["wr"] == "ward rating"      # learned from the book's text
    assert rebuilt.aliases["hp"] == "health pool"      # the GM's edit wins over the default


def test_aliases_reach_the_sparse_leg_and_nothing_else(demo_project):
    from search.models import Chunk
    from search.rules.search import RulesSpec, rules_search

    crawler = Chunk.objects.get(ruleset_id="emberfall", symbol="Ash Crawler").pk
    q = "which beast has the highest AC"
    on = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=30, graph=False))
    off = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=30, graph=False, expand_aliases=False))
    assert on["policies"]["sparse_query"] == f"{q} armor class"
    assert off["policies"]["sparse_query"] == q
    why_on = {r["chunk_id"]: r["why"] for r in on["results"]}
    why_off = {r["chunk_id"]: r["why"] for r in off["results"]}
    assert why_on[crawler]["sparse_rank"] == 1                     # "Armor Class 13" now matches
    assert why_off[crawler]["sparse_rank"] > 1                     # only the other words match
    assert why_on[crawler]["sparse_score"] > why_off[crawler]["sparse_score"]
    # the dense leg embeds what the user wrote either way
    assert why_on[crawler]["dense_rank"] == why_off[crawler]["dense_rank"]
