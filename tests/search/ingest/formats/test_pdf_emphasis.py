"""A PDF keeps what its type says: italic and bold words come out as Markdown emphasis, so a spell, a stat block or
a magic item printed in a PDF is the same Markdown the rules chunker reads from a Markdown rulebook; paragraphs
set apart by space or opened by a bold label stay apart, and a table inside a text column keeps all its columns.
Each PDF is typeset here by reportlab in the standard Times faces (their names say Bold and Italic)."""
from __future__ import annotations

from search.ingest.formats.pdf import read_pdf
from search.ingest.rules import chunk_rules_layer
from tests.search.ingest.formats.samples import pdf_drawn as _pdf

BODY = ("A bright streak flashes from your pointing finger to a point you choose within range and then blossoms "
        "with a low roar into an explosion of flame that fills the room").split()


def _runs(c, x: float, y: float, runs: list[tuple[str, str]], size: float = 10) -> None:
    """Draw (font, text) runs one after the other on a line, a space between them, as a typesetter sets them."""
    for font, text in runs:
        c.setFont(font, size)
        c.drawString(x, y, text)
        x += c.stringWidth(text + " ", font, size)


def _filler(c, y: float, lines: int, pitch: float = 12) -> float:
    """A paragraph of plain body lines (enough of them for the page's line pitch to be known); the y below it."""
    for i in range(lines):
        words = BODY[i % 5:i % 5 + 12]
        _runs(c, 72, y, [("Times-Roman", " ".join(words))])
        y -= pitch
    return y


def test_a_spell_printed_in_italic_and_bold_reads_as_the_markdown_spell_and_is_chunked_as_a_spell():
    def draw(c):
        y = _filler(c, 800, 24)
        c.setFont("Helvetica-Bold", 16)
        c.drawString(72, y - 14, "Fireball")
        y -= 36
        _runs(c, 72, y, [("Times-Italic", "3rd-level evocation")])  # paragraphs set 6 pt apart, lines 12 pt
        y -= 18
        for label, value in (("Casting Time:", "1 action"), ("Range:", "150 feet"),
                             ("Components:", "V, S, M (a tiny ball of bat guano and sulfur)"),
                             ("Duration:", "Instantaneous")):
            _runs(c, 72, y, [("Times-Bold", label), ("Times-Roman", value)])
            y -= 18
        _runs(c, 72, y, [("Times-Roman", "Each creature in a 20-foot radius sphere must make a"),
                         ("Times-Italic", "Dexterity"), ("Times-Roman", "saving throw. A target takes 8d6")])
        _runs(c, 72, y - 12, [("Times-Roman", "fire damage on a failed save, or half as much on a success.")])
        c.showPage()

    layer = read_pdf(data=_pdf(draw), name="spells.pdf")
    lines = layer.markdown.split("\n")
    assert "*3rd-level evocation*" in lines
    for line in ("**Casting Time:** 1 action", "**Range:** 150 feet", "**Duration:** Instantaneous",
                 "**Components:** V, S, M (a tiny ball of bat guano and sulfur)"):
        assert line in lines, layer.markdown
    assert ("Each creature in a 20-foot radius sphere must make a *Dexterity* saving throw. A target takes 8d6 "
            "fire damage on a failed save, or half as much on a success.") in lines
    chunks = chunk_rules_layer(layer=layer, source="spells.pdf", ruleset_id="srd51", book_id="srd")
    spell = next(ch for ch in chunks if ch.section_path[-1] == "Fireball")
    assert spell.content_kind == "spell"
    assert spell.traits["level"] == 3 and spell.traits["school"] == "evocation"


def test_a_stat_block_keeps_its_labels_its_six_ability_columns_and_its_run_in_traits():
    scores = [("STR", "21 (+5)"), ("DEX", "9 (-1)"), ("CON", "15 (+2)"), ("INT", "18 (+4)"), ("WIS", "15 (+2)"),
              ("CHA", "18 (+4)")]

    def draw(c):
        y = _filler(c, 800, 22)
        c.setFont("Helvetica-Bold", 16)
        c.drawString(72, y - 14, "Aboleth")
        y -= 36
        _runs(c, 72, y, [("Times-Italic", "Large aberration, lawful evil")])
        y -= 12  # the stat lines follow one another at the body's pitch: the bold labels open them
        for label, value in (("Armor Class", "17 (natural armor)"), ("Hit Points", "135 (18d10+36)"),
                             ("Speed", "10 ft., swim 40 ft.")):
            _runs(c, 72, y, [("Times-Bold", label), ("Times-Roman", value)])
            y -= 12
        for i, (name, score) in enumerate(scores):  # the ability table, inside the text column
            _runs(c, 74 + 45 * i, y - 2, [("Times-Bold", name)], size=7.5)
            _runs(c, 74 + 45 * i, y - 12, [("Times-Roman", score)], size=7.5)
        y -= 28
        _runs(c, 72, y, [("Times-BoldItalic", "Mucous Cloud."),
                         ("Times-Roman", "While underwater, the aboleth is surrounded by transformative")])
        _runs(c, 72, y - 12, [("Times-Roman", "mucus. A creature that touches the aboleth must make a DC")])
        _runs(c, 72, y - 24, [("Times-Roman", "14 Constitution saving throw or be diseased for 1d4 hours.")])
        _runs(c, 72, y - 36, [("Times-Bold", "Challenge"), ("Times-Roman", "10 (5,900 XP)")])
        c.showPage()

    layer = read_pdf(data=_pdf(draw), name="monsters.pdf")
    lines = layer.markdown.split("\n")
    for line in ("*Large aberration, lawful evil*", "**Armor Class** 17 (natural armor)",
                 "**Hit Points** 135 (18d10+36)", "**Speed** 10 ft., swim 40 ft.", "**Challenge** 10 (5,900 XP)",
                 "| STR | DEX | CON | INT | WIS | CHA |",
                 "| 21 (+5) | 9 (-1) | 15 (+2) | 18 (+4) | 15 (+2) | 18 (+4) |",
                 "***Mucous Cloud.*** While underwater, the aboleth is surrounded by transformative mucus. A "
                 "creature that touches the aboleth must make a DC 14 Constitution saving throw or be diseased "
                 "for 1d4 hours."):
        assert line in lines, layer.markdown
    chunks = chunk_rules_layer(layer=layer, source="monsters.pdf", ruleset_id="srd51", book_id="srd")
    monster = next(ch for ch in chunks if ch.section_path[-1] == "Aboleth")
    assert monster.content_kind == "monster"
    assert monster.traits["size"] == "large" and monster.traits["type"] == "aberration"
    assert monster.traits["cr"] == "10"


def test_a_bold_label_after_a_sentence_opens_a_paragraph_and_a_wrapped_label_paragraph_stays_whole():
    def draw(c):
        y = _filler(c, 800, 24)
        _runs(c, 72, y, [("Times-Bold", "Armor Class (AC)."),
                         ("Times-Roman", "Armor protects its wearer from attacks. The armor you wear")])
        _runs(c, 72, y - 12, [("Times-Roman", "and the shield you carry determine your base Armor Class.")])
        _runs(c, 72, y - 24, [("Times-Bold", "Heavy Armor."),
                              ("Times-Roman", "Heavier armor interferes with the wearer's ability to move")])
        _runs(c, 72, y - 36, [("Times-Roman", "quickly, stealthily, and freely.")])
        c.showPage()

    lines = read_pdf(data=_pdf(draw), name="armor.pdf").markdown.split("\n")
    assert ("**Armor Class (AC).** Armor protects its wearer from attacks. The armor you wear and the shield you "
            "carry determine your base Armor Class.") in lines
    assert ("**Heavy Armor.** Heavier armor interferes with the wearer's ability to move quickly, stealthily, "
            "and freely.") in lines


def test_an_italic_run_wrapped_over_two_lines_is_one_emphasis_and_headings_carry_no_marks():
    def draw(c):
        y = _filler(c, 800, 24)
        c.setFont("Helvetica-Bold", 16)
        c.drawString(72, y - 14, "Cloak of Elvenkind")
        y -= 36
        _runs(c, 72, y, [("Times-Roman", "The cloak is described in the"),
                         ("Times-Italic", "Dungeon Master's Guide, where the wondrous items of")])
        _runs(c, 72, y - 12, [("Times-Italic", "the old kingdoms"), ("Times-Roman", "are listed by rarity.")])
        c.showPage()

    lines = read_pdf(data=_pdf(draw), name="items.pdf").markdown.split("\n")
    assert ("The cloak is described in the *Dungeon Master's Guide, where the wondrous items of the old kingdoms* "
            "are listed by rarity.") in lines
    assert any(line.startswith("#") and line.endswith(" Cloak of Elvenkind") for line in lines)
    assert not any(line.startswith("#") and "*" in line for line in lines)


def test_two_columns_of_short_lines_on_one_baseline_grid_are_columns_not_a_table():
    def draw(c):
        for page in range(4):  # a book on a baseline grid: both columns' lines share their baselines
            for col, x in enumerate((60, 320)):
                name = f"Beast {page}{col}"
                _runs(c, x, 720, [("Times-Bold", name)], size=12)
                for i, (label, value) in enumerate((("Armor Class", "12"), ("Hit Points", f"{19 + page}"),
                                                    ("Speed", "30 ft."), ("Senses", "passive Perception 13"),
                                                    ("Languages", "-"), ("Challenge", f"{col + 1} (450 XP)"))):
                    _runs(c, x, 700 - 12 * i, [("Times-Bold", label), ("Times-Roman", value)])
                for i in range(20):  # short lines only: no column of running text tells them from a table
                    _runs(c, x, 620 - 12 * i, [("Times-Bold", f"Trait {i}."), ("Times-Roman", f"{i + 2} ft.")])
            c.showPage()

    layer = read_pdf(data=_pdf(draw), name="beasts.pdf")
    assert "|" not in layer.markdown, layer.markdown[:2000]
    text = layer.markdown
    for page in range(4):
        left, right = text.index(f"Beast {page}0"), text.index(f"Beast {page}1")
        assert left < text.index(f"**Hit Points** {19 + page}", left) < right
        assert text.index("**Challenge** 1 (450 XP)", left) < right


def test_a_table_of_short_keys_beside_long_wrapped_text_is_read_as_a_table():
    traits = ["I idolize a particular hero of my faith, and constantly refer to that person's",
              "I can find common ground between the fiercest enemies, empathizing with them",
              "I see omens in every event and action. The gods try to speak to us, we just",
              "Nothing can shake my optimistic attitude, whatever the road may bring."]

    def draw(c):
        y = _filler(c, 800, 24)
        _runs(c, 72, y, [("Times-Bold", "d4")], size=7.5)
        _runs(c, 100, y, [("Times-Bold", "Personality Trait")], size=7.5)
        for i, trait in enumerate(traits):
            _runs(c, 72, y - 11 * (i + 1), [("Times-Roman", str(i + 1))], size=7.5)
            _runs(c, 100, y - 11 * (i + 1), [("Times-Roman", trait)], size=7.5)
        c.showPage()

    lines = read_pdf(data=_pdf(draw), name="traits.pdf").markdown.split("\n")
    assert "| d4 | Personality Trait |" in lines
    assert f"| 3 | {traits[2]} |" in lines


def test_a_heading_wrapped_over_two_lines_is_one_heading_with_its_outline_entry():
    def draw(c):
        c.bookmarkPage("dragons")
        c.addOutlineEntry("Dragons", "dragons", level=0)
        _runs(c, 72, 800, [("Helvetica-Bold", "Dragons")], size=18)
        _filler(c, 770, 6)
        c.bookmarkHorizontal("wyrmling", 0, 690)
        c.addOutlineEntry("Black Dragon Wyrmling (Chromatic)", "wyrmling", level=1)
        _runs(c, 72, 680, [("Helvetica-Bold", "Black Dragon Wyrmling")], size=16)  # the column is narrow
        _runs(c, 72, 646, [("Helvetica-Bold", "(Chromatic)")], size=16)  # generous leading: two lines
        _runs(c, 72, 624, [("Times-Italic", "Medium dragon, chaotic evil")])
        c.showPage()

    lines = read_pdf(data=_pdf(draw), name="dragons.pdf").markdown.split("\n")
    heads = [(i, line.lstrip("#").strip()) for i, line in enumerate(lines) if line.startswith("#")]
    assert [h for _, h in heads] == ["Dragons", "Black Dragon Wyrmling (Chromatic)"]
    assert "(Chromatic)" not in lines and "**(Chromatic)**" not in lines
    assert heads[-1][0] < lines.index("*Medium dragon, chaotic evil*")


def test_a_numbered_heading_printed_in_bold_at_body_size_is_found_where_its_outline_entry_points():
    def draw(c):
        c.bookmarkPage("ch")
        c.addOutlineEntry("Internationalization", "ch", level=0)
        _runs(c, 72, 800, [("Helvetica-Bold", "8 Internationalization")], size=18)
        y = 770
        for n, title in enumerate(("Keyboard input", "Filename encoding", "Localized messages"), start=1):
            c.bookmarkHorizontal(f"s{n}", 0, y + 12)
            c.addOutlineEntry(title, f"s{n}", level=1)
            _runs(c, 72, y, [("Times-Bold", f"8.1.{n} {title}")])
            _filler(c, y - 14, 4)
            _runs(c, 72, y - 70, [("Times-Roman", f"The rules of {title.lower()} end here.")])
            y -= 100
        c.showPage()

    lines = read_pdf(data=_pdf(draw), name="manual.pdf").markdown.split("\n")
    for title in ("Keyboard input", "Filename encoding", "Localized messages"):
        head = next(i for i, line in enumerate(lines) if line.startswith("#") and line.endswith(title))
        body = lines.index(f"The rules of {title.lower()} end here.")
        assert head < body and not any(line.startswith("#") for line in lines[head + 1:body]), lines
