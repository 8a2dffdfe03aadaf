"""Traversal configs: per-ruleset game terms, intents and policies.

Why a stored, versioned config instead of constants: every ruleset names its own
conditions, spells and actions; a GM can correct a name list in the admin and the
next query (and the next graph build) uses the new version, while old versions
stay for comparison. The default config is built from what was ingested, so a new
rulebook works without anyone typing names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from django.db import transaction

from config.user_patterns import compile_user_pattern, matches
from search.models import Chunk, TraversalConfig
from search.rules.aliases import DEFAULT_ALIASES, learn_aliases, merge_aliases

NAME_FIELDS = {"condition": "condition_names", "spell": "spell_names", "feat": "feat_names",
               "item": "item_names", "action": "action_names"}

DEFAULT_INTENT_PATTERNS: dict[str, str] = {
    "condition": r"\b(what happens when|while (i am|i'm|you are|you're)|effects? of being|condition)\b",
    "spell": r"\b(cast(ing)?|spells?|cantrips?|spell slots?|concentration|ritual)\b",
    "combat": r"\b(attack|action|bonus action|reaction|initiative|opportunity|damage|hit points?|grapple|shove)\b",
    "item": r"\b(items?|weapons?|armou?r|wand|potion|ring|attune|attunement|magic item)\b",
    "monster": r"\b(monsters?|creatures?|stat block|challenge rating|CR \d+)\b",
    "character": r"\b(feats?|level up|multiclass(ing)?|class|race|background|ability score)\b",
}
DEFAULT_POLICIES: dict[str, dict] = {
    # kinds that answer an intent best; the rules search passes them as a soft preference
    "condition": {"prefer_kinds": ["condition", "rule"]},
    "spell": {"prefer_kinds": ["spell", "rule"]},
    "combat": {"prefer_kinds": ["action", "rule", "condition"]},
    "item": {"prefer_kinds": ["item", "table"]},
    "monster": {"prefer_kinds": ["monster"]},
    "character": {"prefer_kinds": ["feat", "rule", "table"]},
    "graph": {"relations": ["references", "next", "contains", "describes"]},
}
DEFAULT_PLAYER_KEYWORDS = ["my character", "i", "i'm", "can i", "my turn", "my spell", "level up"]
DEFAULT_GM_KEYWORDS = ["monster", "encounter", "trap", "treasure", "npc", "dm", "gm", "challenge rating"]


@dataclass
class QueryAnalysis:
    intents: list[str] = field(default_factory=list)
    entities: list[tuple[str, str]] = field(default_factory=list)  # (kind, canonical name)
    audience: str = ""  # player | gm | ""
    prefer_kinds: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"intents": self.intents, "entities": [{"kind": k, "name": n} for k, n in self.entities],
                "audience": self.audience, "prefer_kinds": self.prefer_kinds}


def load_config(*, ruleset_id: str) -> TraversalConfig | None:
    """The newest active version for a ruleset, or None."""
    return TraversalConfig.objects.filter(ruleset_id=ruleset_id, is_active=True).order_by("-version").first()


def names_from_chunks(*, ruleset_id: str, dataset_ids: list[int] | None = None) -> dict[str, list[str]]:
    """The ingested headings of each named kind (spells, conditions, feats, items, actions)."""
    qs = Chunk.objects.filter(ruleset_id=ruleset_id, content_kind__in=list(NAME_FIELDS))
    if dataset_ids is not None:
        qs = qs.filter(dataset_id__in=dataset_ids)
    out: dict[str, set[str]] = {k: set() for k in NAME_FIELDS}
    for kind, symbol in qs.values_list("content_kind", "symbol"):
        if symbol:
            out[kind].add(symbol)
    return {k: sorted(v) for k, v in out.items()}


@transaction.atomic
def save_config(*, ruleset_id: str, names: dict[str, list[str]], player_keywords: list[str] | None = None,
                gm_keywords: list[str] | None = None, intent_patterns: dict[str, str] | None = None,
                policies: dict | None = None, aliases: dict[str, str] | None = None) -> TraversalConfig:
    """A new version (previous versions stay, inactive), so a config change is auditable and revertible."""
    for intent, pattern in (intent_patterns or {}).items():
        # a bad or backtracking pattern fails here, not at query time (RE2: config/user_patterns.py)
        compile_user_pattern(pattern, field=f"intent_patterns.{intent}", ignore_case=True)
    last = TraversalConfig.objects.select_for_update().filter(ruleset_id=ruleset_id).order_by("-version").first()
    TraversalConfig.objects.filter(ruleset_id=ruleset_id, is_active=True).update(is_active=False)
    cfg = TraversalConfig.objects.create(
        ruleset_id=ruleset_id, version=(last.version + 1) if last else 1, is_active=True,
        **{NAME_FIELDS[k]: [n[:200] for n in names.get(k, [])] for k in NAME_FIELDS},
        player_keywords=player_keywords if player_keywords is not None else DEFAULT_PLAYER_KEYWORDS,
        gm_keywords=gm_keywords if gm_keywords is not None else DEFAULT_GM_KEYWORDS,
        intent_patterns=intent_patterns if intent_patterns is not None else DEFAULT_INTENT_PATTERNS,
        policies=policies if policies is not None else DEFAULT_POLICIES,
        aliases=merge_aliases(aliases if aliases is not None else DEFAULT_ALIASES),
    )
    _compiled.cache_clear()
    return cfg


def aliases_from_chunks(*, ruleset_id: str, dataset_ids: list[int] | None = None) -> dict[str, str]:
    """Abbreviations the ruleset's own text defines ("Armor Class (AC)"); only chunks with a "(" are read."""
    qs = Chunk.objects.filter(ruleset_id=ruleset_id, text__contains="(")
    if dataset_ids is not None:
        qs = qs.filter(dataset_id__in=dataset_ids)
    return learn_aliases(qs.values_list("text", flat=True).iterator(chunk_size=500))


def build_default_config(*, ruleset_id: str, dataset_ids: list[int] | None = None) -> TraversalConfig:
    """Default config from the ingested names and abbreviations; keeps a GM's edited keywords, patterns,
    policies and aliases if one exists (an edited alias wins over a learned one, a learned one over a default)."""
    prev = load_config(ruleset_id=ruleset_id)
    names = names_from_chunks(ruleset_id=ruleset_id, dataset_ids=dataset_ids)
    learned = aliases_from_chunks(ruleset_id=ruleset_id, dataset_ids=dataset_ids)
    if prev is not None:
        for kind, fname in NAME_FIELDS.items():
            names[kind] = sorted(set(names[kind]) | set(getattr(prev, fname)))
    return save_config(
        ruleset_id=ruleset_id, names=names,
        player_keywords=prev.player_keywords if prev else None, gm_keywords=prev.gm_keywords if prev else None,
        intent_patterns=prev.intent_patterns if prev else None, policies=prev.policies if prev else None,
        aliases=merge_aliases(DEFAULT_ALIASES, learned, prev.aliases if prev else None))


def config_names(config: TraversalConfig | None) -> dict[str, list[str]]:
    if config is None:
        return {k: [] for k in NAME_FIELDS}
    return {k: list(getattr(config, f)) for k, f in NAME_FIELDS.items()}


@lru_cache(maxsize=32)
def _compiled(config_key: tuple) -> tuple[list[tuple[str, Any]], list[tuple[str, str, re.Pattern]]]:
    """Intent patterns (an operator's, run on every query) in RE2; entity names are escaped literals, so
    Python's engine matches them in linear time."""
    _, _, patterns, names = config_key
    intents = [(k, compile_user_pattern(p, field=f"intent_patterns.{k}", ignore_case=True)) for k, p in patterns]
    ents = [(kind, name, name_pattern(name)) for kind, ns in names for name in ns]
    return intents, ents


def name_pattern(name: str) -> re.Pattern:
    """Word-bounded, case-insensitive; a trailing 'ed'/'s' form also matches (grapple -> grappled)."""
    core = re.escape(name.lower()).replace(r"\ ", r"\s+")
    return re.compile(rf"(?<![\w-]){core}(?:s|es|ed|d)?(?![\w-])", re.IGNORECASE)


def detect(*, query: str, config: TraversalConfig | None) -> QueryAnalysis:
    """Intents (regex per intent) and named entities (names the config knows) in a query."""
    patterns = (config.intent_patterns if config else None) or DEFAULT_INTENT_PATTERNS
    names = config_names(config)
    key = (getattr(config, "pk", None), getattr(config, "version", None), tuple(sorted(patterns.items())),
           tuple((k, tuple(v)) for k, v in sorted(names.items())))
    intents_c, ents_c = _compiled(key)
    analysis = QueryAnalysis()
    analysis.intents = [k for k, rx in intents_c if matches(rx, query)]
    seen = set()
    for kind, name, rx in ents_c:
        if len(name) >= 3 and rx.search(query) and (kind, name) not in seen:
            seen.add((kind, name))
            analysis.entities.append((kind, name))
            if kind not in analysis.intents:
                analysis.intents.append(kind)
    low = f" {query.lower()} "
    gm = any(f" {k} " in low for k in (config.gm_keywords if config else DEFAULT_GM_KEYWORDS))
    player = any(f" {k} " in low for k in (config.player_keywords if config else DEFAULT_PLAYER_KEYWORDS))
    analysis.audience = "gm" if gm and not player else ("player" if player else "")
    policies = (config.policies if config else None) or DEFAULT_POLICIES
    prefer: list[str] = []
    for intent in analysis.intents:
        for k in policies.get(intent, {}).get("prefer_kinds", []):
            if k not in prefer:
                prefer.append(k)
    analysis.prefer_kinds = prefer
    return analysis
