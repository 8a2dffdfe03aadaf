"""Rulebooks (markdown, a text layer read from a paged format such as PDF, or JSON records) -> enriched ChunkDrafts.

Why a deterministic classifier instead of an LLM: the same book must always give
the same chunks, kinds and traits, so graph edges, evaluation queries and cached
embeddings stay valid between runs, and the rules are testable on real files.

Splitting
---------
* A chunk is a heading and its body. Fenced code is kept verbatim.
* A *stat block* (a spell, a monster, a magic item) absorbs its deeper headings
  (``###### Actions`` under a monster) so one creature or spell is one chunk.
* A markdown table (with its ``**Table- Name**`` caption) is its own chunk of kind
  ``table`` and is never split; the prose around it stays with its heading.
* Long prose is split at paragraph boundaries near ``max_words``.

Classification (first rule that matches wins; see ``classify``)
---------------------------------------------------------------
1. ``table``     - the block is a pipe table.
2. ``spell``     - an italic line "*Nth-level school*" or "*School cantrip*" (traits: level, school,
                   ritual, casting_time, range, components, material, duration, concentration).
3. ``monster``   - "**Armor Class**" + "**Hit Points**" lines (traits: size, type, alignment, ac, hp, cr).
4. ``item``      - an italic "*Wondrous item|Armor|Weapon|Ring|Rod|Staff|Wand|Potion|Scroll, rarity*" line
                   (traits: item_type, rarity, attunement).
5. ``condition`` - a heading under a "Conditions" heading or file.
6. ``feat``      - a heading under "Feats", or a "*Prerequisite: ...*" line.
7. ``action``    - a heading under "Actions in Combat" (Attack, Dash, Dodge, ...).
8. ``rule``      - prose with at least two rule cues (dice, DC, advantage, saving throw, "you can", ...).
9. ``narrative`` - everything else. It is the only kind that is not rule-bearing.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from search.engine.pages import label_of
from search.ingest.base import ChunkDraft, DocumentDraft
from search.ingest.formats import registry
from search.ingest.formats.originals import original_to_keep
from search.ingest.formats.text_layer import Refused, TextLayer

SCHOOLS = ("abjuration", "conjuration", "divination", "enchantment", "evocation", "illusion", "necromancy",
           "transmutation")
SIZES = ("Tiny", "Small", "Medium", "Large", "Huge", "Gargantuan")
ITEM_TYPES = ("wondrous item", "armor", "weapon", "ring", "rod", "staff", "wand", "potion", "scroll")
RARITIES = ("common", "uncommon", "rare", "very rare", "legendary", "artifact", "rarity varies")

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")
_CAPTION = re.compile(r"^\s*\*\*\s*Table[-:\s]")
_SPELL_LINE = re.compile(
    r"^\s*[*_]+\s*(?:(?P<level>\d)(?:st|nd|rd|th)-level\s+(?P<school>[a-z]+)|(?P<cschool>[A-Za-z]+)\s+cantrip)"
    r"(?P<ritual>\s*\(ritual\))?\s*[*_]+\s*$", re.IGNORECASE)
_SIZE_LINE = re.compile(rf"^\s*\*\s*(?P<size>{'|'.join(SIZES)})\s+(?P<type>[^,*]+?)\s*,\s*(?P<align>[^*]+?)\s*\*\s*$")
_ITEM_LINE = re.compile(rf"^\s*\*\s*(?P<type>{'|'.join(ITEM_TYPES)})\b(?P<rest>[^*]*)\*\s*$", re.IGNORECASE)
_FIELD = re.compile(r"^\s*\*\*(?P<key>[A-Za-z ]+?):?\*\*:?\s*(?P<val>.+?)\s*$")
_PREREQ = re.compile(r"^\s*\*\s*Prerequisite", re.IGNORECASE)
_WORD = re.compile(r"\S+")

RULE_CUES = [re.compile(p, re.IGNORECASE) for p in (
    r"\b\d*d\d+\b", r"\bDC\s*\d+", r"\b(dis)?advantage\b", r"\bsaving throw", r"\battack roll", r"\bability check",
    r"\byou can\b", r"\bmust\b", r"\bcan't\b", r"\bhit points?\b", r"\bbonus action\b", r"\breaction\b",
    r"\bspeed\b", r"\bmodifier\b", r"\bproficien", r"\b\d+\s*(feet|ft\.)", r"\bdamage\b", r"\bcheck\b")]


# ---------------------------------------------------------------------------------------------- parsing

class _Block:
    """A heading plus its body lines (1-based line numbers)."""

    def __init__(self, level: int, title: str, chain: list[str], start: int) -> None:
        self.level, self.title, self.chain, self.start = level, title, chain, start
        self.lines: list[tuple[int, str]] = []


def _split_blocks(lines: list[str]) -> list[_Block]:
    """One block per heading (plus a preamble block); stat blocks absorb their deeper headings."""
    blocks: list[_Block] = [_Block(0, "", [], 1)]
    stack: list[tuple[int, str]] = []
    in_fence = False
    absorb_level: int | None = None  # level of the open stat block
    for no, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            level, title = len(m.group(1)), _clean_title(m.group(2))
            if absorb_level is not None and level > absorb_level:
                blocks[-1].lines.append((no, line))
                continue
            absorb_level = None
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            blocks.append(_Block(level, title, [t for _, t in stack], no))
            continue
        blocks[-1].lines.append((no, line))
        if absorb_level is None and blocks[-1].level and _is_stat_signature(line):
            absorb_level = blocks[-1].level
    return [b for b in blocks if any(s.strip() for _, s in b.lines) or b.level]


def _clean_title(title: str) -> str:
    title = re.sub(r"[*_`]", "", title).strip()
    return re.sub(r"\.md$", "", title)


def _is_stat_signature(line: str) -> bool:
    return bool(_SPELL_LINE.match(line) or _SIZE_LINE.match(line) or _ITEM_LINE.match(line))


def _segments(block: _Block, *, max_words: int) -> list[tuple[str, list[tuple[int, str]]]]:
    """Cut a block into ('text'|'table', lines) segments; tables whole, prose near max_words."""
    out: list[tuple[str, list[tuple[int, str]]]] = []
    lines = block.lines
    i = 0
    prose: list[tuple[int, str]] = []
    stat = any(_is_stat_signature(s) for _, s in lines[:6])

    def flush() -> None:
        if any(s.strip() for _, s in prose):
            out.extend(("text", part) for part in _split_prose(list(prose), max_words=max_words))
        prose.clear()

    while i < len(lines):
        no, s = lines[i]
        if not stat and (_TABLE_LINE.match(s) or (_CAPTION.match(s) and _next_is_table(lines, i))):
            flush()
            table: list[tuple[int, str]] = []
            if _CAPTION.match(s):
                table.append(lines[i])
                i += 1
                while i < len(lines) and not lines[i][1].strip():
                    i += 1
            while i < len(lines) and _TABLE_LINE.match(lines[i][1]):
                table.append(lines[i])
                i += 1
            out.append(("table", table))
            continue
        prose.append((no, s))
        i += 1
    flush()
    return out


def _next_is_table(lines: list[tuple[int, str]], i: int) -> bool:
    for _, s in lines[i + 1:i + 4]:
        if s.strip():
            return bool(_TABLE_LINE.match(s))
    return False


def _split_prose(lines: list[tuple[int, str]], *, max_words: int) -> list[list[tuple[int, str]]]:
    """Group paragraphs (blank-line separated) into parts of about max_words; a paragraph is never cut."""
    paras: list[list[tuple[int, str]]] = [[]]
    for no, s in lines:
        if not s.strip():
            if paras[-1]:
                paras.append([])
            continue
        paras[-1].append((no, s))
    parts: list[list[tuple[int, str]]] = []
    words = 0
    for para in (p for p in paras if p):
        n = sum(len(_WORD.findall(s)) for _, s in para)
        if parts and words + n <= max_words:
            parts[-1].extend([(para[0][0] - 1, "")] + para)
            words += n
        else:
            parts.append(list(para))
            words = n
    return parts


# ---------------------------------------------------------------------------------------------- classification

def classify(*, text: str, chain: list[str], is_table: bool = False) -> tuple[str, dict[str, Any]]:
    """(content_kind, traits) for one chunk; deterministic, first matching rule wins (see module doc)."""
    lines = text.splitlines()
    lowered_chain = [c.lower() for c in chain]
    if is_table:
        caption = next((re.sub(r"[*]|Table[-:\s]*", "", s).strip() for s in lines if _CAPTION.match(s)), "")
        header = next((s for s in lines if _TABLE_LINE.match(s)), "")
        cols = [c.strip() for c in header.strip().strip("|").split("|") if c.strip()]
        return "table", {"caption": caption, "columns": cols}
    for s in lines[:8]:
        m = _SPELL_LINE.match(s)
        if m:
            return "spell", _spell_traits(m, lines)
    fields = _fields(lines)
    if "armor class" in fields and "hit points" in fields:
        traits: dict[str, Any] = {"ac": fields.get("armor class"), "hp": fields.get("hit points")}
        for s in lines[:6]:
            sm = _SIZE_LINE.match(s)
            if sm:
                traits.update(size=sm["size"].lower(), type=sm["type"].strip().lower(), alignment=sm["align"].strip())
                break
        if "challenge" in fields:
            traits["cr"] = fields["challenge"].split(" ")[0]
        return "monster", traits
    for s in lines[:6]:
        im = _ITEM_LINE.match(s)
        if im and any(r in im["rest"].lower() for r in RARITIES):
            rest = im["rest"].lower()
            rarity = next(r for r in sorted(RARITIES, key=len, reverse=True) if r in rest)
            return "item", {"item_type": im["type"].lower(), "rarity": rarity, "attunement": "attunement" in rest}
    parents = lowered_chain[:-1]
    if any(p == "conditions" for p in parents):
        return "condition", {"condition": chain[-1].lower()}
    if any(p == "feats" for p in parents) or any(_PREREQ.match(s) for s in lines[:4]):
        prereq = next((s.strip(" *_") for s in lines[:4] if _PREREQ.match(s)), "")
        return "feat", {"prerequisite": prereq.split(":", 1)[-1].strip()} if prereq else {}
    if any(p == "actions in combat" for p in parents):
        return "action", {"action": chain[-1].lower()}
    cues = sum(1 for c in RULE_CUES if c.search(text))
    return ("rule", {"rule_cues": cues}) if cues >= 2 else ("narrative", {})


def _fields(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in lines:
        m = _FIELD.match(s)
        if m:
            out.setdefault(m["key"].strip().lower(), m["val"].strip())
    return out


def _spell_traits(m: re.Match, lines: list[str]) -> dict[str, Any]:
    fields = _fields(lines)
    comps_raw = fields.get("components", "")
    material = ""
    mm = re.search(r"\((.*)\)", comps_raw)
    if mm:
        material = mm.group(1)
    comps = [c.strip() for c in re.sub(r"\(.*\)", "", comps_raw).split(",") if c.strip()]
    duration = fields.get("duration", "")
    return {
        "level": int(m["level"]) if m["level"] else 0,
        "school": (m["school"] or m["cschool"]).lower(),
        "ritual": bool(m["ritual"]),
        "casting_time": fields.get("casting time", ""),
        "range": fields.get("range", ""),
        "components": comps,
        "material": material,
        "duration": duration,
        "concentration": duration.lower().startswith("concentration"),
    }


def _tags(kind: str, traits: dict[str, Any], chain: list[str], chapter: str) -> list[str]:
    tags = {kind}
    if chapter:
        tags.add(_slug(chapter))
    if kind == "spell":
        tags.add(f"school:{traits['school']}")
        tags.add(f"level:{traits['level']}")
        if traits.get("ritual"):
            tags.add("ritual")
        if traits.get("concentration"):
            tags.add("concentration")
    elif kind == "item":
        tags.add(f"rarity:{traits['rarity']}")
    elif kind == "monster" and traits.get("type"):
        tags.add(f"creature:{traits['type'].split(' ')[0]}")
    elif kind in {"condition", "action"}:
        tags.add(f"{kind}:{_slug(chain[-1])}")
    return sorted(tags)


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


# ---------------------------------------------------------------------------------------------- public API

def chunk_rules_layer(*, layer: TextLayer, source: str, ruleset_id: str, book_id: str, chapter: str = "",
                      max_words: int = 350) -> list[ChunkDraft]:
    """Enriched chunks for one rulebook document read into a text layer (Markdown, or a PDF's Markdown with pages).

    Why one chunker for every format: a PDF, DOCX or EPUB rulebook gets the same section paths, kinds, tags,
    graph, chapter routing and aliases as a Markdown one. A chunk's `page` is the printed page range of its line
    span ("p. 112", "pp. 112–113"), empty where the format has no pages; the book is `book_id`, never the file.
    `chapter` prefixes every section path (e.g. the folder)."""
    # a paged layer numbers its lines by "\n" (its line_pages do too); a Markdown file keeps splitlines, so the
    # line numbers of every existing rulebook stay what they were
    lines = layer.markdown.split("\n") if layer.line_pages else layer.markdown.splitlines()
    drafts: list[ChunkDraft] = []
    stem = Path(source).stem
    for block in _split_blocks(lines):
        chain = block.chain or [stem]
        section_path = ([chapter] if chapter else []) + chain
        for n, (seg_kind, seg) in enumerate(_segments(block, max_words=max_words)):
            body = "\n".join(s for _, s in seg).strip("\n")
            if not body.strip():
                continue
            kind, traits = classify(text=body, chain=chain, is_table=seg_kind == "table")
            heading = block.title
            full = f"{'#' * block.level} {heading}\n\n{body}" if block.level else body
            start = block.start if (block.level and n == 0) else seg[0][0]
            first, last = layer.page_span(start_line=start, end_line=seg[-1][0])
            drafts.append(ChunkDraft(
                text=full, start_line=start, end_line=seg[-1][0], kind="rules",
                symbol=heading, heading_path=list(chain), ruleset_id=ruleset_id, book_id=book_id,
                section_path=section_path, page=label_of(first=first, last=last)[:50], content_kind=kind,
                tags=_tags(kind, traits, chain, chapter), traits=traits,
                is_rule_bearing=kind != "narrative", meta={"source": source},
            ))
    return drafts


def chunk_markdown(*, text: str, source: str, ruleset_id: str, book_id: str, chapter: str = "",
                   max_words: int = 350) -> list[ChunkDraft]:
    """Enriched chunks for one markdown file: a text layer without pages, so its chunks carry no page."""
    return chunk_rules_layer(layer=TextLayer(markdown=text), source=source, ruleset_id=ruleset_id, book_id=book_id,
                             chapter=chapter, max_words=max_words)


def chunk_json_records(*, records: Iterable[dict[str, Any]], source: str, ruleset_id: str,
                       book_id: str) -> list[ChunkDraft]:
    """JSON records ({text, section_path?, page?, content_kind?, tags?, traits?}) -> enriched chunks.

    A record that already carries a content_kind keeps it (the publisher knows best); others are classified.
    """
    drafts = []
    for n, rec in enumerate(records, start=1):
        text = str(rec.get("text") or "").strip()
        if not text:
            continue
        section = [str(s) for s in (rec.get("section_path") or [rec.get("title") or Path(source).stem])]
        kind, traits = classify(text=text, chain=section, is_table=bool(_TABLE_LINE.match(text.splitlines()[0])))
        kind = rec.get("content_kind") or kind
        traits = {**traits, **(rec.get("traits") or {})}
        drafts.append(ChunkDraft(
            text=text, start_line=n, end_line=n, kind="rules", symbol=section[-1], heading_path=section,
            ruleset_id=ruleset_id, book_id=book_id, section_path=section, page=str(rec.get("page") or "")[:50],
            content_kind=kind, tags=sorted(set(rec.get("tags") or []) | set(_tags(kind, traits, section, ""))),
            traits=traits, is_rule_bearing=bool(rec.get("is_rule_bearing", kind != "narrative")),
            meta={"source": source, "record": n},
        ))
    return drafts


SKIP_FILES = {"readme.md", "source.md", "changelog.md"}


# The names a rulebook folder's walk takes (with the document formats': PDF, DOCX, EPUB); the bytes pick the reader.
RULEBOOK_SUFFIXES = frozenset({".md", ".markdown", ".json", ".txt", ".html", ".htm", ".xhtml"})


def read_rulebook(*, path: str | Path, ruleset_id: str, book_id: str, refused: dict[str, str] | None = None,
                  stored: Mapping[str, str] | None = None, kept: list[str] | None = None) -> list[DocumentDraft]:
    """Every rulebook file under `path` (or the one file) -> DocumentDrafts with enriched chunks.

    `stored` (path in the book -> content hash already in the dataset): a file whose bytes hash to it is not read
    at all but added to `kept`, since reading (a PDF in its child process) is the expensive part of a re-run.

    A file is taken by its name (Markdown, JSON, text, HTML, or a document format's) and read by what its bytes
    are (search.ingest.formats.registry): JSON rule records as records, anything else as a text layer through its
    reader. A file no reader takes goes into `refused` (path -> why) for the job's report.
    The first folder level below `path` is the chapter (SRD: Spells, Monsters, Gameplay...).
    """
    root = Path(path)
    wanted = RULEBOOK_SUFFIXES | registry.document_suffixes()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*")
                                                 if p.suffix.lower() in wanted and p.is_file())
    refused = refused if refused is not None else {}
    docs: list[DocumentDraft] = []
    for f in files:
        if f.name.lower() in SKIP_FILES:
            continue
        rel = f.name if root.is_file() else f.relative_to(root).as_posix()
        raw = f.read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        if stored and stored.get(rel) == digest:
            if kept is not None:
                kept.append(rel)
            continue
        found = registry.detect(data=raw, name=rel)
        if found.format == "json-rules":
            data = json.loads(raw.decode("utf-8", errors="replace").removeprefix("\ufeff"))
            records = data.get("chunks", data.get("records", [])) if isinstance(data, dict) else data
            chunks = chunk_json_records(records=records, source=rel, ruleset_id=ruleset_id, book_id=book_id)
            if chunks:
                docs.append(DocumentDraft(path=rel, content_hash=digest, chunks=chunks,
                                          lang="markdown", title=chunks[0].section_path[-1],
                                          meta={"ruleset_id": ruleset_id, "book_id": book_id}))
            continue
        if found.format in ("", "code"):
            refused[rel] = found.reason if not found.format else (
                "not a rulebook: a rulebook is Markdown, text, HTML, JSON rule records or a document (PDF, DOCX, EPUB)")
            continue
        try:
            layer = registry.read(data=raw, name=rel, fmt=found.format)
        except Refused as exc:
            refused[rel] = exc.reason
            continue
        doc = rulebook_document(layer=layer, rel=rel, content_hash=digest,
                                ruleset_id=ruleset_id, book_id=book_id)
        if doc is None:  # read, but no section to cite (a PDF of pages without a text layer): named, not dropped
            refused[rel] = (f"no readable text: {layer.pages_without_text} of {layer.pages} pages have no text layer"
                            if layer.pages_without_text else "no readable text: no section a rulebook can cite")
            continue
        doc.original = original_to_keep(fmt=found.format, data=raw, pages=layer.pages)
        if doc.original is not None:  # the kept bytes count against the project's stored-bytes quota
            doc.size_bytes = len(raw)
        docs.append(doc)
    return docs


def rulebook_document(*, layer: TextLayer, rel: str, content_hash: str, ruleset_id: str,
                      book_id: str) -> DocumentDraft | None:
    """One rulebook file read into a text layer (Markdown as it is, a PDF through its reader) -> its document with
    enriched chunks, or None when it holds no section. `rel` is the file's path in the book; its first folder is
    the chapter (SRD: Spells, Monsters, Gameplay...). `content_hash`: of the file's bytes, so an unchanged file
    is skipped whatever its format."""
    chapter = rel.split("/")[0] if "/" in rel else ""
    chunks = chunk_rules_layer(layer=layer, source=rel, ruleset_id=ruleset_id, book_id=book_id, chapter=chapter)
    if not chunks:
        return None
    meta: dict[str, Any] = {"ruleset_id": ruleset_id, "book_id": book_id}
    if layer.pages:
        meta.update(pages=layer.pages, pages_without_text=layer.pages_without_text)
    return DocumentDraft(path=rel, content_hash=content_hash, chunks=chunks, lang="markdown",
                         title=chunks[0].section_path[-1], meta=meta)
