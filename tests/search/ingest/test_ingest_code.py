"""Code ingestion details not covered by test_context_chunking: skip reasons, nested .gitignore, languages,
Python that does not parse, and spans that stay exact for every chunk of a real file of this repository."""
from __future__ import annotations

from pathlib import Path

import pytest

from search.ingest.code import chunk_file, detect_lang, read_code_document, walk

ROOT = Path(__file__).resolve().parents[3]


def _lines(text: str, start: int, end: int) -> str:
    return "\n".join(text.split("\n")[start - 1:end])


@pytest.mark.parametrize("path,lang", [("a/b.py", "python"), ("x.TS", "typescript"), ("Makefile", "make"),
                                       ("lib.rs", "rust"), ("notes.unknownext", None), ("README", None)])
def test_language_comes_from_the_extension(path, lang):
    assert detect_lang(path) == lang


def test_oversized_and_binary_files_are_skipped_with_a_reason(tmp_path):
    (tmp_path / "big.py").write_text("x = 1\n" * 50)
    (tmp_path / "blob.js").write_bytes(b"var a = 1;\x00\x01\x02")
    (tmp_path / "ok.py").write_text("def ok():\n    return 1\n")
    reasons = {rel: why for rel, _, why in walk(tmp_path, max_bytes=100)}
    assert reasons["big.py"] == "oversized" and reasons["ok.py"] == ""
    doc, why = read_code_document(root=tmp_path, rel="blob.js", abs_path=tmp_path / "blob.js", repo="r")
    assert doc is None and why == "binary"


def test_nested_gitignore_and_negation_and_hidden_dirs(tmp_path):
    (tmp_path / ".gitignore").write_text("*.gen.py\nbuild_out/\n")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / ".gitignore").write_text("local_*.py\n!local_keep.py\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "build_out").mkdir()
    for rel in ("pkg/a.py", "pkg/schema.gen.py", "pkg/local_x.py", "pkg/local_keep.py", "pkg/sub/local_y.py",
                "local_top.py", ".hidden/h.py", "build_out/o.py"):
        (tmp_path / rel).write_text("X = 1\n")
    files = {rel for rel, _, _ in walk(tmp_path)}
    assert files == {"pkg/a.py", "pkg/local_keep.py", "local_top.py"}


def test_python_that_does_not_parse_falls_back_to_blocks_with_exact_spans():
    text = "def broken(:\n    pass\n\n\ndef fine():\n    return 2\n"
    chunks, _ = chunk_file(path="b.py", text=text, lang="python")
    assert chunks and all(c.text == _lines(text, c.start_line, c.end_line) for c in chunks)


def test_javascript_blocks_name_their_symbol_and_macro_lists_them(tmp_path):
    src = ("// Cart helpers\nimport x from 'y';\n\nexport function addItem(cart, item) {\n  cart.push(item);\n}\n\n"
           "export async function checkoutCart(cart) {\n  return cart.total();\n}\n")
    (tmp_path / "cart.js").write_text(src)
    doc, _ = read_code_document(root=tmp_path, rel="cart.js", abs_path=tmp_path / "cart.js", repo="shop")
    assert doc.lang == "javascript" and doc.repo == "shop" and doc.path == "cart.js"
    assert doc.macro_summary.startswith("Cart helpers") and "addItem, checkoutCart" in doc.macro_summary
    for c in doc.chunks:
        assert c.text == _lines(src, c.start_line, c.end_line)
    assert {c.symbol for c in doc.chunks} & {"addItem", "checkoutCart"}


@pytest.mark.parametrize("rel", ["credits/ledger.py", "search/engine/pipeline.py", "search/ingest/code.py"])
def test_every_chunk_of_a_real_module_matches_the_file(rel):
    path = ROOT / rel
    text = path.read_text()
    doc, _ = read_code_document(root=ROOT, rel=rel, abs_path=path, repo="platform")
    assert doc.chunks
    for c in doc.chunks:
        assert c.start_line >= 1 and c.start_line <= c.end_line <= len(text.split("\n"))
        assert c.text == _lines(text, c.start_line, c.end_line), f"{rel}:{c.start_line}-{c.end_line} {c.symbol}"
    covered = set()
    for c in doc.chunks:
        covered.update(range(c.start_line, c.end_line + 1))
    code_lines = {i for i, line in enumerate(text.split("\n"), start=1)
                  if line.strip() and not line.strip().startswith("#")}
    assert code_lines <= covered  # no statement falls between chunks


def test_renamed_file_keeps_identical_embedding_inputs(tmp_path):
    from search.ingest.base import embed_input

    src = '"""Doc."""\nimport os\n\n\ndef f():\n    return os.sep\n'
    (tmp_path / "a.py").write_text(src)
    (tmp_path / "b.py").write_text(src)
    a, _ = read_code_document(root=tmp_path, rel="a.py", abs_path=tmp_path / "a.py", repo="r")
    b, _ = read_code_document(root=tmp_path, rel="b.py", abs_path=tmp_path / "b.py", repo="r")
    assert [embed_input(c) for c in a.chunks] == [embed_input(c) for c in b.chunks]
