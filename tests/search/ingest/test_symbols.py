"""The symbol facts of a file (search.ingest.symbols): pure, text in, facts out."""
from __future__ import annotations

import hashlib
import json
import pathlib
import tarfile
import textwrap

from search.ingest.code import chunk_file
from search.ingest.symbols import Definition, extract, indexed_text
from tests.search.ctx_fixtures import LEDGER_PY

SERVICE_PY = textwrap.dedent('''\
    from billing.ledger import deduct_credits as take
    from . import audit
    import billing.ledger as ledger


    class Checkout(Base):
        def pay(self, wallet, amount):
            total = amount * 2
            take(wallet, total)
            self.notify(wallet)
            return ledger.Wallet(total)

        def notify(self, wallet):
            audit.record(wallet)
    ''')


def _defs(facts) -> dict[str, Definition]:
    return {d.qualname: d for d in facts.definitions}


def test_python_definitions_carry_kind_signature_and_exact_span():
    defs = _defs(extract(path="billing/ledger.py", text=LEDGER_PY, lang="python"))
    lines = LEDGER_PY.split("\n")
    deduct = defs["deduct_credits"]
    assert (deduct.kind, deduct.signature) == ("function", "def deduct_credits(wallet, amount)")
    assert lines[deduct.start_line - 1].startswith("def deduct_credits") and lines[deduct.end_line - 1].strip() == \
        "return wallet.balance"
    assert defs["Wallet.empty"].kind == "method" and lines[defs["Wallet.empty"].start_line - 1].strip() == "@property"
    assert defs["Wallet"].kind == "class" and defs["RATE"].kind == "variable"
    assert defs["grantBonus"].signature == "async def grantBonus(wallet, amount=5)"


def test_python_references_skip_locals_and_keep_imports_calls_and_bases():
    facts = extract(path="shop/service.py", text=SERVICE_PY, lang="python")
    refs = {(r.kind, r.name, r.qualifier, r.container, r.alias) for r in facts.references}
    assert ("import", "deduct_credits", "billing.ledger", "", "take") in refs
    assert ("import", "audit", "shop", "", "audit") in refs  # `from . import audit` in shop/service.py
    assert ("import", "ledger", "billing", "", "ledger") in refs
    assert ("inherit", "Base", "", "Checkout", "") in refs
    assert ("call", "take", "", "Checkout.pay", "") in refs
    assert ("call", "notify", "self", "Checkout.pay", "") in refs
    assert ("call", "Wallet", "ledger", "Checkout.pay", "") in refs
    names = {r.name for r in facts.references}
    assert not names & {"total", "wallet", "amount", "self"}  # parameters and locals are not references


def test_a_file_that_does_not_parse_or_has_no_extractor_has_no_facts():
    assert extract(path="x.py", text="def broken(:\n", lang="python").definitions == ()
    assert extract(path="notes.md", text="# def foo():\n", lang="markdown").definitions == ()


def test_typescript_imports_resolve_relative_paths_and_classes_nest_their_methods():
    text = ("import { helper as h } from './util';\n"
            "export class Cart extends Base {\n  total(): number { return h(this.items()); }\n}\n")
    facts = extract(path="web/cart.ts", text=text, lang="typescript")
    assert {(d.qualname, d.kind) for d in facts.definitions} == {("Cart", "class"), ("Cart.total", "method")}
    refs = {(r.kind, r.name, r.qualifier, r.alias) for r in facts.references}
    assert ("import", "helper", "web/util", "h") in refs
    assert ("inherit", "Base", "", "") in refs and ("call", "h", "", "") in refs
    assert ("call", "items", "this", "") in refs


def test_go_methods_are_named_by_their_receiver_and_java_calls_are_not_definitions():
    go = ('package main\nimport "fmt"\ntype Wallet struct { n int }\n'
          'func (w *Wallet) Deduct(n int) { fmt.Println(n); helper(w) }\nfunc helper(w *Wallet) {}\n')
    facts = extract(path="main.go", text=go, lang="go")
    assert {d.qualname for d in facts.definitions} == {"Wallet", "Wallet.Deduct", "helper"}
    assert ("call", "helper", "Wallet.Deduct") in {(r.kind, r.name, r.container) for r in facts.references}
    java = "class A extends B { void run() { foo(1); } }\n"
    assert {d.qualname for d in extract(path="A.java", text=java, lang="java").definitions} == {"A", "A.run"}


def test_a_file_rebuilt_from_its_chunks_gives_the_same_facts_as_the_file():
    body = "\n".join(f"  m{i}(a) {{\n    return helper(a) + {i};\n  }}" for i in range(40))
    js = f"import {{ helper }} from './util';\n\nclass Big extends Base {{\n{body}\n}}\n\nfunction after(x) {{\n" \
         "  return new Big().m1(x);\n}\n"
    for path, text, lang in (("big.js", js, "javascript"), ("billing/ledger.py", LEDGER_PY, "python"),
                             ("shop/service.py", SERVICE_PY, "python")):
        chunks, _ = chunk_file(path=path, text=text, lang=lang)
        rebuilt = indexed_text((c.start_line, c.end_line, c.text) for c in chunks)
        assert extract(path=path, text=rebuilt, lang=lang) == extract(path=path, text=text, lang=lang), path
    assert "after" in {d.qualname for d in extract(path="big.js", text=js, lang="javascript").definitions}


GOLDEN = pathlib.Path(__file__).with_name("symbols_golden.json")
SAMPLE = pathlib.Path(__file__).parent / "fixtures" / "stdlib_sample.tar.xz"

_LONG = "x" * 320
# Python that stresses the scope rules: `global` before and after the binding, targets that bind without being
# walked, walrus in a nested definition's decorator, defaults and annotations, comprehension and lambda scopes,
# imports and except names in a function, match captures, long names, qualifiers of every shape, deep nesting
SNIPPETS = {
"global_order": """
def f():
    x = 1
    global x
    y = x + z
def g():
    global a
    a = b
    def h():
        nonlocal q
        q = a
        return q + r
    for a in b: pass
    return a, y
def k():
    if c:
        global m
    else:
        m = 2
    for m in range(3):
        global n
    n = m
    return m, n
""",
"annassign": """
def f(obj):
    a[(w := 1)]: int = w
    obj.attr: str = w2
    self.x: T = u
    plain: int
    return plain, w, a, obj
x: int = 5
class C:
    y: List[int] = []
    (z): int = 3
""",
"nested_signature_binds": """
def outer():
    @deco(d := 1)
    def inner(a=(e := 2), *, b: (f := 3) = 4) -> (g := 5):
        return d + e + f + g + a
    class K(Base, metaclass=(h := M)):
        kv = 1
        global zz
        def m(self): return kv + h
    return d, e, f, g, h, kv, K, inner, zz
""",
"lambda_comp": """
def f(xs):
    g = lambda y, *a, k=(t := 1), **kw: (v := y) + t + a + kw + v
    r = [i for i in xs if (j := i)]
    s = {k2: v2 for k2, v2 in d.items()}
    return g, r, s, i, j, v, t, k2
class C:
    h = [q for q in range(3)]
    lam = lambda self: self.q
""",
"imports_except": """
import os.path, a.b.c as d
from ..pkg import thing as other
from ..pkg import *
from . import sib
from .......deep import x
def f():
    import json.decoder as jd, collections.abc
    from .rel import *
    try:
        pass
    except (ValueError, mod.Err) as exc:
        return exc, jd, collections, json
    except Exception:
        raise
    return os.sep, rel
""",
"match_async": """
async def f(cmd):
    async with lock() as (a, b):
        async for item in aiter(src):
            await go(item, a, b)
    match cmd:
        case Point(x=0, y=yy) as pt if yy > lim:
            return pt, yy
        case [first, *rest]:
            return first, rest
        case {"k": kv, **others}:
            return kv, others
        case mod.CONST | None:
            return None
        case _:
            del cmd
""",
"qualifiers": """
class A(mod.sub.Base, f().B, Generic[T], *bases, **kw):
    def m(self) -> "A":
        "".join(x)
        ", ".join(y)
        a[0].b.c()
        (1).real
        f().g.h
        self.a.b.c.d.e.f.g
        u"uni".upper()
        (a or b).c
        x.""" + _LONG + """.y
        return super().m()
CONST = {"a": [1, 2,
   3]}
A.B = C
a, (b, *c) = d
[e, f.g] = h
""",
"long_names": """
class """ + _LONG + """:
    class """ + _LONG + """:
        def """ + _LONG + """(self):
            """ + _LONG + """()
            return """ + _LONG + """
""",
"decorated": """
@a.b(c)
@d
class X:
    @property
    def p(self) -> int: return self._p
    @p.setter
    def p(self, v: int, /, w=1, *args: str, k: int = 2, **kws: Any) -> None: self._p = v
    async def q(self, *, x): ...
def deco(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        nonlocal fn
        return fn(*args, **kwargs)
    return wrapper
""",
"syntax_error": "def f(:\n",
"walrus_module": "if (n := len(a)) > 10:\n    print(n)\n[y for x in z if (y := x)]\n",
"deep": "x = " + "(" * 90 + "1" + ")" * 90 + "\ny = a" + ".b" * 200 + "\n",
"fstrings": "def f(a):\n    return f'{a!r:>{width}} {b.c} {g(h)}'\n",
"delete_augassign": "def f():\n    del a, b.c, d[e]\n    x += 1\n    y.z += w\n    return x\n",
}


def test_python_facts_of_real_modules_match_the_recorded_digests():
    """Stored rows carry the digest of the facts as they were extracted; the reconcile check compares them with a
    fresh build, so any change in what is extracted flags every stored document as drifted. The recorded digests
    (tests/search/ingest/symbols_golden.json) were taken from 18 standard-library modules of CPython 3.11.7, kept
    beside this test (fixtures/stdlib_sample.tar.xz, under the PSF licence, so the check does not depend on which
    Python runs it): nested functions, classes, decorators, comprehensions, global and nonlocal, relative imports,
    lambdas, walrus, match statements and async code."""
    golden = json.loads(GOLDEN.read_text())
    with tarfile.open(SAMPLE) as sample:
        texts = {m.name: sample.extractfile(m).read().decode("utf-8") for m in sample.getmembers() if m.isfile()}
    assert set(texts) == set(golden["files"])
    for rel, want in golden["files"].items():
        text = texts[rel]
        assert hashlib.sha256(text.encode()).hexdigest() == want["source_sha256"], rel
        facts = extract(path=rel, text=text, lang="python")
        got = {"definitions": len(facts.definitions), "references": len(facts.references), "digest": facts.digest()}
        assert got == {k: want[k] for k in got}, rel


def test_python_facts_of_code_that_stresses_the_scope_rules_match_the_recorded_digests():
    """As above, for the corners a real module may not reach: which names a function binds decides which of its
    bare names are references, and the digests were recorded from the extractor that walked each function body
    a second time to find them."""
    golden = json.loads(GOLDEN.read_text())["snippets"]
    assert set(golden) == set(SNIPPETS)
    for name, text in SNIPPETS.items():
        facts = extract(path="pkg/sub/mod.py", text=text, lang="python")
        got = {"definitions": len(facts.definitions), "references": len(facts.references), "digest": facts.digest()}
        assert got == golden[name], name
    assert golden["global_order"]["references"] and golden["nested_signature_binds"]["references"]


SHARED_TREE_PY = '''"""A module whose gaps hold comments."""
import os

# ---------------------------------------------------------------- section
USAGE = """
# not a comment: a line of this string
""" + os.sep


class Ledger:
    # between the class line and its first method
    def deduct(self, amount):
        return amount

    # between methods
    def grant(self, amount):
        return helper(amount)


# a trailing comment
def helper(value):
    return value
'''


def test_facts_taken_with_the_chunkers_tree_are_the_facts_of_the_file_rebuilt_from_its_chunks():
    """The reader parses a Python file once for its chunks and its facts; the facts must be exactly what the writer
    and the reconcile check get from the file rebuilt from the chunks, comments between statements or not."""
    from search.ingest.code import code_document
    from search.ingest.symbols import _same_tree, python_tree

    for text in (SHARED_TREE_PY, SHARED_TREE_PY.replace("# not a comment", "x = 1  # not a comment"), "x = 1\n"):
        draft, _ = code_document(rel="pkg/ledger.py", data=text.encode(), repo="r")
        rebuilt = indexed_text((c.start_line, c.end_line, c.text) for c in draft.chunks)
        assert draft.facts[0] == rebuilt
        assert draft.facts[1] == extract(path="pkg/ledger.py", text=rebuilt, lang="python")
    # a line a chunk leaves out inside a statement (here, inside a string) means the trees may differ: no reuse
    lines = SHARED_TREE_PY.split("\n")
    inside = lines.index("# not a comment: a line of this string")
    dropped = "\n".join("" if n == inside else line for n, line in enumerate(lines))
    assert not _same_tree(tree=python_tree(SHARED_TREE_PY), text=SHARED_TREE_PY, rebuilt=dropped)
    between = lines.index("    # between methods")
    assert _same_tree(tree=python_tree(SHARED_TREE_PY), text=SHARED_TREE_PY,
                      rebuilt="\n".join("" if n == between else line for n, line in enumerate(lines)))


def test_the_writer_uses_facts_the_reader_took_only_for_the_text_they_were_taken_from():
    from search.ingest.code_facts import _file_row
    from search.ingest.symbols import FileSymbols

    taken_from = "def old_name():\n    return 1\n"
    stale = (taken_from, extract(path="a.py", text=taken_from, lang="python"))
    now = "def new_name():\n    return 2\n"  # the chunks changed after the reader took the facts
    _, facts = _file_row(dataset_id=1, document_id=1, path="a.py", lang="python", text=now, taken=stale)
    assert [d.name for d in facts.definitions] == ["new_name"]
    marker = FileSymbols()  # the same text: the taken facts are used as they are, not extracted again
    _, facts = _file_row(dataset_id=1, document_id=1, path="a.py", lang="python", text=now, taken=(now, marker))
    assert facts is marker
