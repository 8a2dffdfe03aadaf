"""tree-sitter chunking: definitions become chunks with exact spans, their doc comment and a qualified symbol."""
from __future__ import annotations

import pytest

from search.ingest import syntax
from search.ingest.code import MAX_CHUNK_LINES, chunk_file

LEDGER_JS = """// Ledger helpers for the wallet service.
// Money moves only through these functions.
import { db } from "./db";

/** Deduct credits from a wallet. */
export function deductCredits(wallet, amount) {
  if (wallet.balance < amount) throw new Error("insufficient");
  wallet.balance -= amount;
}

export class Wallet {
  constructor(owner) { this.owner = owner; }
}

const refund = (w, n) => { w.balance += n; };
"""

SNIPPETS = {  # lang -> (file name, source, symbol the definition chunk must carry)
    "go": ("ledger.go", "package ledger\n\n// Deduct takes credits.\nfunc (w *Wallet) Deduct(n int) error {\n"
                        "\tw.Balance -= n\n\treturn nil\n}\n", "Wallet.Deduct"),
    "rust": ("lib.rs", "use std::fmt;\n\n/// Deduct credits.\npub fn deduct(b: &mut i64, n: i64) {\n    *b -= n;\n}\n",
             "deduct"),
    "java": ("Wallet.java", "package shop;\n\n/** A wallet. */\npublic class Wallet {\n    private int balance;\n}\n",
             "Wallet"),
    "c": ("ledger.c", "#include <stdio.h>\n\n/* Deduct credits. */\nint deduct(int *b, int n) {\n    *b -= n;\n"
                      "    return 0;\n}\n", "deduct"),
    "cpp": ("ledger.cpp", "#include <vector>\n\nclass Ledger {\n public:\n  int total() const { return 0; }\n};\n",
            "Ledger"),
    "ruby": ("wallet.rb", "require 'json'\n\n# A wallet.\nclass Wallet\n  def deduct(n)\n    @b -= n\n  end\nend\n",
             "Wallet"),
    "csharp": ("Wallet.cs", "using System;\n\npublic class Wallet {\n    public void Deduct(int n) { }\n}\n", "Wallet"),
    "php": ("ledger.php", "<?php\n\nfunction deduct($w, $n) {\n    $w->balance -= $n;\n}\n", "deduct"),
    "typescript": ("svc.ts", "import { a } from './a';\n\nexport interface Options {\n  limit: number;\n}\n",
                   "Options"),
    "tsx": ("view.tsx", "export function View(): JSX.Element {\n  return <div>hi</div>;\n}\n", "View"),
}


def _exact(text: str, chunks) -> None:
    lines = text.split("\n")
    for c in chunks:
        assert c.text == "\n".join(lines[c.start_line - 1:c.end_line]), (c.symbol, c.start_line, c.end_line)


def test_javascript_definitions_get_exact_spans_symbols_and_doc_comments():
    chunks, macro = chunk_file(path="web/ledger.js", text=LEDGER_JS, lang="javascript")
    _exact(LEDGER_JS, chunks)
    by_symbol = {c.symbol: c for c in chunks}
    assert (by_symbol["<module>"].start_line, by_symbol["<module>"].end_line) == (1, 3)
    deduct = by_symbol["deductCredits"]
    assert (deduct.start_line, deduct.end_line) == (5, 9)  # the JSDoc line belongs to the function
    assert deduct.micro_summary == "export function deductCredits(wallet, amount) { — Deduct credits from a wallet."
    assert (by_symbol["Wallet"].start_line, by_symbol["Wallet"].end_line) == (11, 13)
    assert (by_symbol["refund"].start_line, by_symbol["refund"].end_line) == (15, 15)
    assert macro == ("Ledger helpers for the wallet service. Money moves only through these functions.\n"
                     "Symbols: deductCredits, Wallet, refund")


def test_a_class_over_the_line_cap_is_split_into_its_methods():
    methods = "\n".join(f"  /** Step {i}. */\n  step{i}(x: number): number {{\n"
                        + "\n".join(f"    x += {j};" for j in range(12)) + "\n    return x;\n  }\n" for i in range(8))
    text = f"export class Pipeline {{\n  private n = 0;\n{methods}}}\n"
    chunks, _ = chunk_file(path="pipeline.ts", text=text, lang="typescript")
    _exact(text, chunks)
    symbols = [c.symbol for c in chunks]
    assert symbols == ["Pipeline"] + [f"Pipeline.step{i}" for i in range(8)]
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 2)  # header with the field
    assert all(c.end_line - c.start_line + 1 <= MAX_CHUNK_LINES for c in chunks)
    assert chunks[1].micro_summary == "step0(x: number): number { — Step 0."


@pytest.mark.parametrize("lang", sorted(SNIPPETS))
def test_every_shipped_grammar_parses_and_names_the_definition(lang):
    assert syntax.parser_for(lang) is not None, f"the tree-sitter wheel for {lang} is not installed"
    name, text, symbol = SNIPPETS[lang]
    chunks, macro = chunk_file(path=name, text=text, lang="typescript" if lang == "tsx" else lang)
    _exact(text, chunks)
    assert symbol in [c.symbol for c in chunks]
    assert symbol.split(".")[0] in macro or symbol in macro


def test_a_file_the_grammar_cannot_parse_falls_back_to_blocks():
    text = "<<<<<<< HEAD\nfunction a() {\n=======\n}}} ))) ((( {{{\n>>>>>>> other\n" * 3
    assert syntax.chunk_syntax(text, lang="javascript", cap=MAX_CHUNK_LINES) is None
    chunks, _ = chunk_file(path="broken.js", text=text, lang="javascript")
    assert chunks
    _exact(text, chunks)


def test_a_language_without_a_grammar_wheel_uses_blocks():
    assert syntax.parser_for("kotlin") is None
    text = "fun deduct(n: Int) {\n    balance -= n\n}\n\nfun topUp(n: Int) {\n    balance += n\n}\n"
    chunks, _ = chunk_file(path="Ledger.kt", text=text, lang="kotlin")
    _exact(text, chunks)
    assert chunks and chunks[0].start_line == 1
