"""Chunkers: exact 1-based inclusive spans, AST units, skips, web headings."""
from __future__ import annotations

from pathlib import Path

from search.ingest.code import chunk_generic, read_code_document, walk
from search.ingest.web import read_web_document
from tests.search.ctx_fixtures import GUIDE_HTML, code_repo  # noqa: F401


def _span_text(path: Path, start: int, end: int) -> str:
    return "\n".join(path.read_text().split("\n")[start - 1:end])


def test_walk_respects_gitignore_and_skips_vendored_binary(code_repo):
    files = {rel: reason for rel, _, reason in walk(code_repo)}
    assert "billing/ledger.py" in files and "web/routes.js" in files
    assert "secret.py" not in files  # .gitignore
    assert not any(p.startswith("node_modules") for p in files)  # vendored
    assert "logo.png" not in files and "debug.log" not in files  # no language / ignored
    doc, why = read_code_document(root=code_repo, rel="web/app.min.js", abs_path=code_repo / "web/app.min.js",
                                  repo="shop")
    assert doc is None and why == "minified"


def test_python_ast_chunks_have_exact_spans(code_repo):
    path = code_repo / "billing" / "ledger.py"
    doc, _ = read_code_document(root=code_repo, rel="billing/ledger.py", abs_path=path, repo="shop")
    by_symbol = {c.symbol: c for c in doc.chunks}
    assert set(by_symbol) >= {"<module>", "Wallet", "Wallet.__init__", "Wallet.empty", "deduct_credits", "grantBonus"}
    for c in doc.chunks:
        assert c.text == _span_text(path, c.start_line, c.end_line), c.symbol
    lines = path.read_text().split("\n")
    d = by_symbol["deduct_credits"]
    assert lines[d.start_line - 1].startswith("def deduct_credits") and lines[d.end_line - 1].strip() == "return wallet.balance"
    assert by_symbol["Wallet.empty"].text.lstrip().startswith("@property")  # decorators belong to the method
    assert d.micro_summary.startswith("def deduct_credits(wallet, amount):")
    assert "refuse to go below zero" in d.micro_summary
    assert doc.macro_summary.startswith("Money moves here")
    assert "Symbols: Wallet, deduct_credits, grantBonus" in doc.macro_summary


def test_generic_blocks_are_exact_and_capped():
    text = "\n".join([f"function f{i}() {{\n  return {i};\n}}\n" for i in range(60)])
    chunks, _ = chunk_generic(text)
    lines = text.split("\n")
    assert len(chunks) > 1
    for c in chunks:
        assert c.end_line - c.start_line + 1 <= 80
        assert c.text == "\n".join(lines[c.start_line - 1:c.end_line])
    long_fn = "function big() {\n" + "\n".join(f"  x{i} = {i};" for i in range(200)) + "\n}\n"
    chunks, _ = chunk_generic(long_fn)
    assert len(chunks) >= 3
    assert chunks[1].start_line <= chunks[0].end_line  # small overlap between windows


def test_web_page_chunks_by_heading(tmp_path):
    page = tmp_path / "guide.html"
    page.write_text(GUIDE_HTML)
    doc, _ = read_web_document(rel="guide.html", abs_path=page)
    paths = [c.heading_path for c in doc.chunks]
    assert ["Shop guide", "Refunds"] in paths and ["Shop guide", "Shipping"] in paths
    refunds = next(c for c in doc.chunks if c.heading_path[-1] == "Refunds")
    assert refunds.micro_summary == "Shop guide > Refunds: Refunds are issued within fourteen days of a purchase."
    assert "Home | About" not in "\n".join(c.text for c in doc.chunks)  # boilerplate dropped
