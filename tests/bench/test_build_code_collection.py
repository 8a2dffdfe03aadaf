"""bench/build_code_collection.py: the docstring -> function collection must be a fair test (no docstring left in
the document, no module in both splits, ambiguous queries dropped) and reproducible (same seed, same bytes).

It runs on a small fake standard library written to tmp_path, so the assertions can name every function.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

from search.quality.evaluation import load_beir

_SPEC = importlib.util.spec_from_file_location(
    "build_code_collection", Path(__file__).resolve().parents[2] / "bench" / "build_code_collection.py")
bcc = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = bcc  # dataclasses look their module up there
_SPEC.loader.exec_module(bcc)

ALPHA = textwrap.dedent('''\
    def parse_header_line(line):
        """Split one header line into its name and value.

        The value keeps inner colons.
        """
        name, _, value = line.partition(":")
        return name.strip(), value.strip()


    class Reader:
        @staticmethod
        def read_block(stream, size):
            """Read exactly size bytes from the stream or fail loudly."""
            data = stream.read(size)
            if len(data) != size:
                raise EOFError(size)
            return data

        def stub(self):
            """Only a docstring here, nothing to find once it is gone."""

        def passes(self):
            """A method whose body is nothing but pass."""
            pass

        def short(self):
            """Short."""
            return 1

        def first(self):
            """Return repr of the object for debugging."""
            return repr(self)

        def second(self):
            """Return repr of the object for debugging."""
            return str(self)
    ''')

BETA = textwrap.dedent('''\
    def compute_checksum(data):
        """Compute additive checksum. Used by the wire format."""
        return sum(data) % 256
    ''')


def _fake_stdlib(root: Path) -> Path:
    (root / "beta").mkdir(parents=True)
    (root / "test").mkdir()
    (root / "alpha.py").write_text(ALPHA)
    (root / "beta" / "__init__.py").write_text(BETA)
    (root / "gamma.py").write_text(BETA.replace("compute_checksum", "other_sum").replace("additive", "modular"))
    (root / "test" / "test_alpha.py").write_text(ALPHA.replace("parse_header_line", "test_parse"))
    (root / "broken.py").write_text("def oops(:\n")
    return root


def _read(out: Path) -> tuple[dict, dict, dict[str, list[str]]]:
    corpus = {r["_id"]: r for r in map(json.loads, (out / "corpus.jsonl").read_text().splitlines())}
    queries = {r["_id"]: r["text"] for r in map(json.loads, (out / "queries.jsonl").read_text().splitlines())}
    splits = {name: (out / "qrels" / f"{name}.tsv").read_text().splitlines() for name in ("train", "test")}
    return corpus, queries, splits


def test_documents_are_functions_without_their_docstring_titled_by_qualified_name(tmp_path):
    out = tmp_path / "out"
    bcc.build(out=out, stdlib=_fake_stdlib(tmp_path / "lib"), max_docs=0, seed=1, test_share=0.3)
    corpus, queries, _ = _read(out)
    assert set(corpus) == {"alpha.parse_header_line", "alpha.Reader.read_block", "beta.compute_checksum",
                           "gamma.other_sum"}  # stubs, short and duplicated docstrings, tests, broken files out
    doc = corpus["alpha.Reader.read_block"]
    assert doc["title"] == "alpha.Reader.read_block"
    assert doc["text"].startswith("@staticmethod\ndef read_block(stream, size):\n")  # dedented, decorator kept
    assert "Read exactly" not in doc["text"] and "stream.read(size)" in doc["text"]
    assert "Split one header line" not in corpus["alpha.parse_header_line"]["text"]
    assert sorted(queries.values()) == sorted([
        "Split one header line into its name and value.",          # first paragraph only
        "Read exactly size bytes from the stream or fail loudly.",
        "Compute additive checksum. Used by the wire format.",  # too short alone: the next sentence is added
        "Compute modular checksum. Used by the wire format.",
    ])


def test_splits_are_by_module_disjoint_and_cover_every_query(tmp_path):
    out = tmp_path / "out"
    manifest = bcc.build(out=out, stdlib=_fake_stdlib(tmp_path / "lib"), max_docs=0, seed=3, test_share=0.34)
    _, queries, splits = _read(out)
    rows = {name: [line.split("\t") for line in lines[1:]] for name, lines in splits.items()}
    assert splits["train"][0] == splits["test"][0] == "query-id\tcorpus-id\tscore"
    modules = {name: {doc.rsplit(".", 2)[0].split(".")[0] for _, doc, _ in r} for name, r in rows.items()}
    assert modules["train"] and modules["test"] and not modules["train"] & modules["test"]
    assert sorted(q for r in rows.values() for q, _, _ in r) == sorted(queries)
    assert manifest["kind"] == "code" and manifest["test_queries"] == len(rows["test"])


def test_the_same_seed_gives_the_same_bytes_and_the_cap_is_honoured(tmp_path):
    lib = _fake_stdlib(tmp_path / "lib")
    for name in ("a", "b"):
        bcc.build(out=tmp_path / name, stdlib=lib, max_docs=3, seed=7, test_share=0.3)
    for rel in ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv", "qrels/test.tsv", "collection.json"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    corpus, _, _ = _read(tmp_path / "a")
    assert len(corpus) == 3


def test_the_collection_loads_as_a_code_collection_with_only_test_queries(tmp_path):
    out = tmp_path / "out"
    manifest = bcc.build(out=out, stdlib=_fake_stdlib(tmp_path / "lib"), max_docs=0, seed=3, test_share=0.34)
    coll = load_beir(out)
    assert coll.kind == "code"
    assert len(coll.queries) == manifest["test_queries"] and len(coll.corpus) == manifest["documents"]


def test_a_test_share_outside_0_1_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bcc.main(["--out", str(tmp_path / "o"), "--stdlib", str(tmp_path), "--test-share", "1.5"])
    assert "--test-share" in capsys.readouterr().err
