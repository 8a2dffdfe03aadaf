"""The sparse analyzers: identifiers in code keep their whole name and give their parts; prose is
analysed as prose; a query is analysed like the documents of the kinds it searches, the union when mixed.

The ranking tests index real points in the embedded Qdrant engine (qdrant-edge) with the IDF modifier, so a wrong
analyzer shows up as a wrong order, not just a different term list.
"""
from __future__ import annotations

import pytest

from search.engine.index_embedded import EdgeIndex
from search.engine.index_schema import IndexFilter, IndexPoint
from search.engine.sparse import (
    document_term_ids,
    encode_document,
    encode_query,
    query_terms,
    term_index,
    tokenize,
)


@pytest.mark.parametrize(("text", "whole", "parts"), [
    ("get_model_path", ["get_model_path"], ["get", "model", "path"]),
    ("getModelPath", ["getmodelpath"], ["get", "model", "path"]),
    ("HTTPServer", ["httpserver"], ["http", "server"]),
    ("os.path.join", ["os.path.join"], ["os", "path", "join"]),
    ("json.decoder.JSONDecoder", ["json.decoder.jsondecoder", "jsondecod"], ["json", "decod"]),
    ("self.get_model_path()", ["self.get_model_path", "get_model_path"], ["self", "get", "model", "path"]),
    ("search/sparse_vectors.py", ["search/sparse_vectors.py", "sparse_vectors.py", "sparse_vectors"],
     ["search", "spars", "vector", "py"]),
    ("std::io::BufReader", ["std::io::bufreader", "bufread"], ["std", "io", "buf", "reader"]),
])
def test_code_identifiers_keep_the_whole_name_and_split_into_parts(text, whole, parts):
    terms = tokenize(text, code=True)
    for t in whole:
        assert t in terms, (t, terms)
    for p in parts:
        assert p in terms, (p, terms)


def test_a_path_keeps_the_whole_path_and_its_file_name():
    terms = tokenize("see a/b/config_loader.py", code=True)
    assert terms[1:4] == ["a/b/config_loader.py", "config_loader.py", "config_loader"]
    assert {"config", "loader", "py"} <= set(terms)


def test_whole_identifiers_are_not_stemmed_but_words_are():
    terms = tokenize("parse_headers parsing", code=True)
    assert "parse_headers" in terms  # not "parse_head"
    assert terms.count("pars") == 2  # the part "parse" and the word "parsing" share a stem


def test_an_all_capitals_word_is_one_term_not_counted_twice():
    assert tokenize("ASCII value", code=True) == ["ascii", "valu"]


def test_prose_analyzer_gives_no_whole_identifiers():
    terms = tokenize("call get_model_path on search/engine/sparse.py", code=False)
    assert "get_model_path" not in terms and "search/engine/sparse.py" not in terms and "sparse.py" not in terms
    assert {"get", "model", "path", "search", "spars", "py"} <= set(terms)


def test_prose_analysis_of_a_web_page_is_unchanged_by_the_code_rules():
    text = "The state-of-the-art models (v2, 3.5) and/or the JSONDecoder."
    assert tokenize(text, code=False) == ["state", "art", "model", "v2", "jsondecod"]


MIXED = ("class JSONDecoder(object):\n    def decode(self, s, _w=WHITESPACE.match):\n        return self.raw_decode(s)"
         "  # see json/decoder.py, std::io::Read, getHTTPResponse and naïve café: the parser's results are parsed\n"
         "ASCII ASCII x x_ __init__ a..b ::x /a/ 42 4.2.1")


@pytest.mark.parametrize("kind", ["code", "web", "rules", "beir"])
def test_a_chunks_term_ids_are_the_distinct_indices_of_its_terms_sorted(kind):
    """The chunk row's `terms` (Postgres's document frequencies) and the sparse vector's indices must agree."""
    expected = sorted({term_index(t) for t in tokenize(MIXED, code=kind == "code")})
    assert document_term_ids(MIXED, kind=kind) == expected
    assert document_term_ids(MIXED, kind=kind) == encode_document(MIXED, kind=kind).indices
    assert document_term_ids("", kind=kind) == [] and document_term_ids("a an the", kind=kind) == []


@pytest.mark.parametrize("kinds", [("web",), ("rules",), ("beir",), ("web", "rules", "beir")])
def test_a_query_over_prose_kinds_is_analysed_as_prose(kinds):
    assert query_terms("where is get_model_path defined", kinds=kinds) == tokenize(
        "where is get_model_path defined", code=False)
    assert "get_model_path" not in query_terms("get_model_path", kinds=kinds)


def test_a_query_over_code_is_analysed_as_code():
    assert query_terms("where is get_model_path defined", kinds=("code",)) == ["get_model_path", "get", "model",
                                                                              "path", "defin"]


def test_a_query_over_code_and_prose_is_the_union_of_both_analyses_each_term_once():
    terms = query_terms("getModelPath in loader.py", kinds=("code", "web"))
    code, prose = tokenize("getModelPath in loader.py", code=True), tokenize("getModelPath in loader.py", code=False)
    assert set(terms) == set(code) | set(prose)
    assert len(terms) == len(set(terms))
    assert "loader.py" in terms  # from the code analysis
    vec = encode_query("getModelPath in loader.py", kinds=("code", "web"))
    assert set(vec.values) == {1.0} and len(vec.indices) == len(terms)


def test_document_and_query_of_code_share_the_whole_identifier_term():
    doc = encode_document("def load(self):\n    return self.get_model_path()\n", kind="code").as_dict()
    query = encode_query("get_model_path", kinds=("code",)).as_dict()
    assert term_index("get_model_path") in doc and term_index("get_model_path") in query
    prose_doc = encode_document("return self.get_model_path()", kind="web").as_dict()
    assert term_index("get_model_path") not in prose_doc


# ------------------------------------------------------------------------------------------------ ranking
CODE_DOCS = [
    # id, text: the exact symbol is called only in 1; 2 talks about models and paths in words
    (1, "def load(self):\n    cfg = self.get_model_path()\n    return open(cfg)\n"),
    (2, "def describe():\n    # get the model, then the path, then get the model path for the path of a model\n"
        "    return model, path\n"),
    (3, "def unrelated():\n    return 42\n"),
    (4, "FILE = 'search/sparse_vectors.py'\n"),
    (5, "def sparse():\n    vectors = [1, 2]\n    return vectors\n"),
]


@pytest.fixture
def code_index(tmp_path):
    index = EdgeIndex(path=tmp_path / "edge", model_id="toy-model", dim=2)
    index.upsert([IndexPoint(id=i, dense=[1.0, 0.0], sparse=encode_document(t, kind="code"),
                             payload={"dataset_id": 1, "project_id": 1, "repo": "r", "path": f"f{i}.py",
                                      "lang": "python", "kind": "code", "book_id": "", "ruleset_id": ""})
                  for i, t in CODE_DOCS])
    yield index
    index.close()


def _ids(index, q, kinds):
    return [i for i, _ in index.search_sparse(encode_query(q, kinds=kinds), flt=IndexFilter(dataset_ids=[1]),
                                              limit=10)]


def test_an_exact_symbol_query_over_code_ranks_the_code_that_calls_it_first(code_index):
    assert _ids(code_index, "get_model_path", ("code",))[0] == 1
    # analysed as prose, the query loses the whole identifier and the wordy comment wins: the bug this fixes
    assert _ids(code_index, "get_model_path", ("web",))[0] == 2


def test_a_file_name_query_over_code_finds_the_path_in_the_code(code_index):
    assert _ids(code_index, "sparse_vectors.py", ("code",))[0] == 4
