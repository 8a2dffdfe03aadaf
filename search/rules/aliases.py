"""Aliases: abbreviations and synonyms of a ruleset, applied to the sparse query.

Why the sparse leg only: BM25 matches tokens, so "AC" never meets "Armor Class" and "temp HP" never meets
"Temporary Hit Points"; the dense leg already places them close, and rewriting its query would move a vector
that works. Where aliases come from:
* the rulebook itself: a phrase followed by its abbreviation in parentheses ("Armor Class (AC)", "Dexterity
  (DEX)", "experience points (XP)") is learned when the letters of the abbreviation appear in order in the
  shortest tail of the phrase that holds them;
* the traversal config: `TraversalConfig.aliases` stores what was learned plus the defaults below, and a GM
  can edit it in the admin like the name lists; the next config version keeps the edits.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

DEFAULT_ALIASES: dict[str, str] = {
    "ac": "armor class", "hp": "hit points", "dc": "difficulty class", "xp": "experience points",
    "cr": "challenge rating", "temp": "temporary", "str": "strength", "dex": "dexterity", "con": "constitution",
    "int": "intelligence", "wis": "wisdom", "cha": "charisma", "aoo": "opportunity attack",
    "gm": "game master", "dm": "game master", "npc": "nonplayer character", "pc": "player character",
}
MAX_ALIASES = 500
_PAREN = re.compile(r"((?:[A-Za-z][A-Za-z'’-]*\s+){1,6})\(([A-Z]{2,6})\)")


def _subsequence(needle: str, hay: str) -> bool:
    it = iter(hay)
    return all(ch in it for ch in needle)


def learn_aliases(texts: Iterable[str]) -> dict[str, str]:
    """{abbreviation: expansion}, lower-cased, from "Phrase (ABBR)" patterns in the texts."""
    out: dict[str, str] = {}
    for text in texts:
        for m in _PAREN.finditer(text):
            abbr = m.group(2).lower()
            words = m.group(1).split()
            for k in range(1, min(len(words), len(abbr) + 1) + 1):
                tail = words[-k:]
                letters = "".join(w.lower() for w in tail)
                if abbr[0] in tail[0].lower() and _subsequence(abbr, letters):
                    out.setdefault(abbr, " ".join(w.lower() for w in tail))
                    break
    return out


def merge_aliases(*tables: dict[str, str] | None) -> dict[str, str]:
    """Later tables win (a GM's edit over what was learned); keys and values lower-cased, at most MAX_ALIASES."""
    out: dict[str, str] = {}
    for table in tables:
        for k, v in (table or {}).items():
            k, v = str(k).strip().lower(), str(v).strip().lower()
            if k and v and k != v:
                out[k] = v[:200]
    return dict(sorted(out.items())[:MAX_ALIASES])


def expand_query(q: str, aliases: dict[str, str]) -> str:
    """The query plus the expansion of every alias it uses, and the abbreviation of every expansion it spells
    out ("my AC" -> "my AC armor class"; "armor class of a shield" -> "... ac"). Unchanged when none applies."""
    if not aliases:
        return q
    low = " " + re.sub(r"[^a-z0-9]+", " ", q.lower()) + " "
    extra: list[str] = []
    for abbr, expansion in aliases.items():
        if f" {abbr} " in low and f" {expansion} " not in low:
            extra.append(expansion)
        elif f" {expansion} " in low and f" {abbr} " not in low:
            extra.append(abbr)
    return f"{q} {' '.join(extra)}" if extra else q
