"""Navigation over the symbol graph: where a symbol is defined, who uses it, a file's outline, the indexed files.

Why resolution here, at query time: the rows hold each file's own facts (search.ingest.symbols says why), and a
reference's meaning is decided now, from the dataset as it is:

  1. a definition of that name in the same file (with `self.`/`this.`/`cls.`, one in the enclosing class first);
  2. else the import that binds the name (or the module alias it is reached through): the definition in the
     file of that module, when the dataset holds it (an import of a library resolves to nothing);
  3. else the dataset's definitions of that name: one is the answer, several are reported as ambiguous with
     every candidate, never guessed.

Resolution never crosses datasets (a name in one repository does not mean a definition in another), and every
query is limited in SQL to the datasets the project can read (search.engine.access), like search.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Case, IntegerField, Q, Value, When

from config import deadlines
from config.errors import BadInput, NotFound
from projects.models import Project
from search.engine.access import accessible_dataset_ids
from search.engine.globs import compile_glob
from search.engine.module_names import module_of
from search.models import Dataset, Document, Symbol, SymbolRef

MAX_SYMBOL = 500
MAX_DEFINITIONS = 50
MAX_REFERENCES = 500
MAX_SCANNED = 50_000  # uses of a name read by one find_references (past it: `complete: false`)
MAX_FILES = 1000
MAX_OUTLINE = 1000  # symbols (and imports) in one page of an outline
DEFAULT_OUTLINE = 200
_SELF = ("self", "this", "cls", "static", "Self")
_SELF_DOTTED = tuple(f"{s}." for s in _SELF)
_INDEXES = ("__init__.py", "__init__.pyi", "index.js", "index.ts", "index.tsx", "index.jsx", "mod.rs")
_EXTS = ("", ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".rb", ".php",
         ".cs", ".c", ".h", ".cc", ".cpp", ".hpp")


_MODULE_TAIL = r"(\.[A-Za-z]+|/(__init__\.pyi?|index\.[jt]sx?|mod\.rs))"


def _module_base(module: str) -> str:
    """The path a module names, without extension: `a.b` -> `a/b`, `./web/util` -> `web/util`."""
    return module.strip("./") if "/" in module else module.replace(".", "/")


def _module_paths(base: str) -> list[str]:
    return [base + ext for ext in _EXTS if ext] + [f"{base}/{index}" for index in _INDEXES]


def _module_tails(path: str) -> set[str]:
    """Every module base that the path is the file of, by the rule of Resolver.module_exists (a base, or a base
    under a prefix, then an extension or a package index): `src/a/__init__.py` -> src/a, a, src/a/__init__, ..."""
    out: set[str] = set()
    for tail in (r"\.[A-Za-z]+$", r"/(__init__\.pyi?|index\.[jt]sx?|mod\.rs)$"):
        m = re.search(tail, path)
        if m:
            parts = path[:m.start()].split("/")
            out.update("/".join(parts[k:]) for k in range(len(parts)))
    return out


# --------------------------------------------------------------------------- which datasets
def datasets_for(*, project: Project, dataset: str | int | None = None) -> list[Dataset]:
    """The datasets the project can read, or the one `dataset` names (name or id; 400 on `dataset` when it names
    none of them: a dataset the project cannot read is not revealed)."""
    readable = list(Dataset.objects.filter(pk__in=accessible_dataset_ids(project)).order_by("pk"))
    if dataset in (None, ""):
        return readable
    wanted = str(dataset).strip()
    match = [ds for ds in readable if str(ds.pk) == wanted] or [ds for ds in readable if ds.name == wanted]
    if not match:
        raise BadInput(f"No dataset {wanted!r} among those this project can read.", field="dataset")
    return [min(match, key=lambda ds: (ds.project_id != project.pk, ds.pk))]  # a shared name: the project's own


def _check_symbol(symbol: Any) -> str:
    if not isinstance(symbol, str) or not symbol.strip() or len(symbol) > MAX_SYMBOL:
        raise BadInput(f"Must be a name of 1 to {MAX_SYMBOL} characters (`deduct`, `Wallet.deduct`, "
                       "`billing.ledger.deduct`).", field="symbol")
    return symbol.strip().replace("::", ".").replace("#", ".")


# --------------------------------------------------------------------------- definitions
@dataclass(frozen=True)
class Def:
    id: int
    dataset_id: int
    document_id: int
    path: str
    lang: str
    name: str
    qualname: str
    kind: str
    signature: str
    start_line: int
    end_line: int

    @property
    def full_name(self) -> str:
        module = module_of(self.path)
        return f"{module}.{self.qualname}" if module else self.qualname

    def as_dict(self) -> dict[str, Any]:
        return {"dataset_id": self.dataset_id, "path": self.path, "lang": self.lang, "name": self.name,
                "qualname": self.qualname, "full_name": self.full_name, "kind": self.kind,
                "signature": self.signature, "start_line": self.start_line, "end_line": self.end_line,
                "span": f"{self.path}:{self.start_line}-{self.end_line}"}


DEF_FIELDS = ("id", "dataset_id", "document_id", "path", "lang", "name", "qualname", "kind", "signature",
              "start_line", "end_line")  # a Symbol row's values in Def's order
FUNCTION_KINDS = ("function", "method", "class")  # the definitions an agent edits (locate ranks these)


def _defs(**filters: Any) -> list[Def]:
    return [Def(*row) for row in Symbol.objects.filter(**filters).order_by("dataset_id", "path", "start_line")
            .values_list(*DEF_FIELDS)]


def _matches(d: Def, symbol: str) -> bool:
    if "." not in symbol:
        return True
    return d.qualname == symbol or d.full_name == symbol or d.full_name.endswith("." + symbol)


def definitions_of(*, dataset_ids: list[int], symbol: str, limit: int | None = None) -> list[Def]:
    """Definitions `symbol` names: by name, or by a dotted tail of module + qualified name (`a.b.C.m`: qualname
    `C.m` in a module ending `a.b`, ...). The SQL narrows by name and qualified name (the name index), Python
    checks the module exactly; `limit` caps the rows read (an ambiguous name can have thousands)."""
    parts = symbol.split(".")
    where = Q()
    for k in range(len(parts)):
        tail = ".".join(parts[k:])
        where |= Q(qualname=tail, path__contains="/".join(parts[:k])) if k else Q(qualname=tail)
    if len(parts) == 1:
        where = Q()
    rows = Symbol.objects.filter(where, dataset_id__in=dataset_ids, name=parts[-1]).order_by(
        "dataset_id", "path", "start_line").values_list(*DEF_FIELDS)
    if limit is not None:
        rows = rows[:limit * 4 if len(parts) > 1 else limit]
    found = [d for d in (Def(*row) for row in rows) if _matches(d, symbol)]
    return found[:limit] if limit is not None else found


def _status(found: list[Def]) -> str:
    return "not_found" if not found else ("found" if len(found) == 1 else "ambiguous")


def find_definition(*, project: Project, symbol: str, dataset: str | int | None = None) -> dict[str, Any]:
    """Where `symbol` is defined: every definition it names (`status`: found, ambiguous or not_found)."""
    symbol = _check_symbol(symbol)
    ids = [ds.pk for ds in datasets_for(project=project, dataset=dataset)]
    found = definitions_of(dataset_ids=ids, symbol=symbol, limit=MAX_DEFINITIONS + 1)
    return {"project": project.slug, "symbol": symbol, "status": _status(found),
            "definitions": [d.as_dict() for d in found[:MAX_DEFINITIONS]], "truncated": len(found) > MAX_DEFINITIONS}


# --------------------------------------------------------------------------- references
@dataclass(frozen=True)
class Ref:
    dataset_id: int
    document_id: int
    path: str
    name: str
    kind: str
    line: int
    qualifier: str
    container: str
    alias: str


_REF_FIELDS = ("dataset_id", "document_id", "path", "name", "kind", "line", "qualifier", "container", "alias")


class Resolver:
    """Resolves references of one dataset by the rules in the module docstring, loading what it needs once."""

    def __init__(self, *, dataset_id: int) -> None:
        self.dataset_id = dataset_id
        self._by_name: dict[str, list[Def]] = {}
        self._by_doc: dict[str, dict[int, list[Def]]] = {}
        self._imports: dict[int, list[Ref]] = {}
        # per file: alias -> its first import binding that alias, and the first that renames a name to it
        # (`from m import deduct as take`); resolve() looks a name up here instead of scanning every import
        self._bound: dict[int, dict[str, Ref]] = {}
        self._renamed: dict[int, dict[str, Ref]] = {}
        self._modules: dict[str, bool] = {}
        self._plain_by_name: dict[str, list[Def]] = {}
        self._local_views: dict[tuple[str, int], tuple[list[Def], list[Def], dict[str, list[Def]]]] = {}
        self._through: dict[tuple[str, str], tuple[str, list[Def]]] = {}
        self.steps = 0  # imports and candidates examined: linear in the references resolved (the tests count it)

    def defs_named(self, name: str) -> list[Def]:
        if name not in self._by_name:
            self._by_name[name] = _defs(dataset_id=self.dataset_id, name=name)
            by_doc: dict[int, list[Def]] = {}
            for d in self._by_name[name]:
                by_doc.setdefault(d.document_id, []).append(d)
            self._by_doc[name] = by_doc
        return self._by_name[name]

    def defs_in(self, name: str, document_id: int) -> list[Def]:
        """The definitions of `name` in one file (a name defined in thousands of files: no scan of them all)."""
        self.defs_named(name)
        return self._by_doc[name].get(document_id, [])

    def prime(self, names: list[str]) -> None:
        """Load the definitions of many names in one query (a pack or a boost resolves dozens of uses at once)."""
        todo = sorted({n for n in names if n not in self._by_name})
        if not todo:
            return
        by_name: dict[str, list[Def]] = {n: [] for n in todo}
        for d in _defs(dataset_id=self.dataset_id, name__in=todo):
            by_name[d.name].append(d)
        for name, defs in by_name.items():
            self._by_name[name] = defs
            by_doc: dict[int, list[Def]] = {}
            for d in defs:
                by_doc.setdefault(d.document_id, []).append(d)
            self._by_doc[name] = by_doc

    def load_imports(self, document_ids: list[int]) -> None:
        todo = [d for d in document_ids if d not in self._imports]
        for d in todo:
            self._imports[d], self._bound[d], self._renamed[d] = [], {}, {}
        for row in (SymbolRef.objects.filter(document_id__in=todo, kind="import").order_by("line", "name")
                    .values_list(*_REF_FIELDS)):
            imp = Ref(*row)
            self._imports[imp.document_id].append(imp)
            self._bound[imp.document_id].setdefault(imp.alias, imp)
            if imp.alias != imp.name:
                self._renamed[imp.document_id].setdefault(imp.alias, imp)

    def prime_for(self, refs: list[Ref]) -> None:
        """Load what resolving `refs` will ask, in a few queries whatever their number: the definitions of their
        names and of the names their files import them under (an alias resolves through the name it stands for),
        and whether the modules those imports name are in the dataset. Without it, a file with thousands of
        aliased imports cost a query per alias and two per module."""
        names, asks = [r.name for r in refs], set()  # asks: (module, name) pairs an import may be resolved by
        for r in refs:
            self._imports_of(r.document_id)
            if r.kind == "import":
                asks.add((r.qualifier, r.name))
                continue
            head = r.qualifier.split(".", 1)[0] if r.qualifier else ""
            for imp in (self._renamed[r.document_id].get(r.name), self._bound[r.document_id].get(head or r.name)):
                if imp is not None:
                    names.append(imp.name)
                    asks.update(((imp.qualifier, imp.name),
                                 (".".join(p for p in (imp.qualifier, imp.name) if p), r.name)))
        self.prime(names)
        # a module is asked about only for a name the dataset defines (an import of a library resolves to nothing)
        self.prime_modules(sorted({m for m, name in asks if m and self.defs_named(name)}))

    def prime_modules(self, modules: list[str]) -> None:
        """module_exists for many modules at once: one query for their exact paths, one scan for the rest (a
        module reached under a prefix: `src/a/b.py` for `a.b`), per 200 modules."""
        todo = [m for m in dict.fromkeys(modules) if m not in self._modules]
        docs = Document.objects.filter(dataset_id=self.dataset_id)
        for i in range(0, len(todo), 200):
            part = {m: _module_base(m) for m in todo[i:i + 200]}
            exact = {p: m for m, base in part.items() for p in _module_paths(base)}
            found = {exact[p] for p in docs.filter(path__in=list(exact)).values_list("path", flat=True)}
            rest = {base: m for m, base in part.items() if m not in found}
            if rest:
                alternation = "|".join(re.escape(b) for b in sorted(rest))
                for path in docs.filter(path__regex=rf"(^|/)({alternation}){_MODULE_TAIL}$").values_list(
                        "path", flat=True):
                    found.update(rest[t] for t in _module_tails(path) if t in rest)
            for m in part:
                self._modules[m] = m in found

    def module_exists(self, module: str) -> bool:
        """Whether the dataset holds the file of `module` (`a.b` -> a/b.py, a/b/__init__.py, src/a/b.py, ...;
        `web/util` -> web/util.ts, web/util/index.js, ...). Asked only when no definition of the name is in it."""
        if module not in self._modules:
            self.prime_modules([module])
        return self._modules[module]

    def resolve(self, ref: Ref) -> tuple[str, list[Def]]:
        """("resolved", [def]) | ("ambiguous", candidates) | ("external", []) | ("unresolved", []).

        Constant work per reference once its name's definitions are loaded: every list it filters (a name's
        top-level definitions, one file's, by class) and every import-through answer is computed once per name,
        file or module and kept, so a file with thousands of imports and uses resolves in time linear in them."""
        self.steps += 1
        candidates = self.defs_named(ref.name)
        local, local_plain, local_by_class = self._local(ref.name, ref.document_id)
        self._imports_of(ref.document_id)  # loads the file's import index
        if ref.kind != "import" and not ref.qualifier and not local:
            bound = self._renamed[ref.document_id].get(ref.name)
            if bound is not None:  # `take(...)` after `from m import deduct as take`
                return self._through_import(bound.qualifier, bound.name)
        if ref.kind == "import":
            return self._through_import(ref.qualifier, ref.name)
        if ref.qualifier in _SELF or ref.qualifier.startswith(_SELF_DOTTED):
            cls = ref.container.rsplit(".", 1)[0] if "." in ref.container else ref.container
            in_class = local_by_class.get(cls, [])
            if len(in_class) == 1:
                return "resolved", in_class
        bare = not ref.qualifier
        if bare and not _implicit_this(ref.path):  # Python, JS: a bare name never means a method
            candidates = self._plain(ref.name)
            local = local_plain
        if bare and local:
            cls = ref.container.rsplit(".", 1)[0] if "." in ref.container else ""
            top = local_plain or (local_by_class.get(cls, []) if cls else []) or local
            if len(top) == 1:
                return "resolved", top
        head = ref.qualifier.split(".", 1)[0] if ref.qualifier else ""
        imp = self._bound[ref.document_id].get(head or ref.name)  # the file's first import binding the name
        if imp is not None and not ref.qualifier:  # `from m import name [as alias]`
            return self._through_import(imp.qualifier, imp.name)
        if imp is not None and head:  # `import m as head` ... `head.name(...)`
            module = ".".join(p for p in (imp.qualifier, imp.name) if p)
            return self._through_import(module, ref.name)
        if len(candidates) == 1:
            return "resolved", candidates
        if local and not ref.qualifier:
            return ("resolved", local) if len(local) == 1 else ("ambiguous", local)
        return ("ambiguous", candidates) if candidates else ("unresolved", [])

    def _plain(self, name: str) -> list[Def]:
        """The definitions of `name` that are not members (what a bare name means in Python or JS), once per name."""
        if name not in self._plain_by_name:
            defs = self.defs_named(name)
            self.steps += len(defs)
            self._plain_by_name[name] = [d for d in defs if "." not in d.qualname]
        return self._plain_by_name[name]

    def _local(self, name: str, document_id: int) -> tuple[list[Def], list[Def], dict[str, list[Def]]]:
        """One file's definitions of `name`: all, those not members, and all by the part of their qualified name
        before its last dot (their class), once per name and file."""
        key = (name, document_id)
        if key not in self._local_views:
            local = self.defs_in(name, document_id)
            self.steps += len(local)
            by_class: dict[str, list[Def]] = {}
            for d in local:
                by_class.setdefault(d.qualname.rsplit(".", 1)[0], []).append(d)
            self._local_views[key] = (local, [d for d in local if "." not in d.qualname], by_class)
        return self._local_views[key]

    def _imports_of(self, document_id: int) -> list[Ref]:
        if document_id not in self._imports:
            self.load_imports([document_id])
        return self._imports[document_id]

    def _through_import(self, module: str, name: str) -> tuple[str, list[Def]]:
        """The definition of `name` that an import from `module` means, once per (module, name)."""
        key = (module, name)
        if key not in self._through:
            candidates = self.defs_named(name)
            self.steps += len(candidates)
            self._through[key] = self._through_uncached(module, candidates)
        return self._through[key]

    def _through_uncached(self, module: str, candidates: list[Def]) -> tuple[str, list[Def]]:
        if not candidates:
            return "external", []
        hit = [d for d in candidates if module and in_module(d.path, module)]
        hit = [d for d in hit if "." not in d.qualname] or hit
        if len(hit) == 1:
            return "resolved", hit
        if len(hit) > 1:
            return "ambiguous", hit
        if module and self.module_exists(module):  # the module is here without the name (re-exported): by name
            return ("resolved", candidates) if len(candidates) == 1 else ("ambiguous", candidates)
        return "external", []


# --------------------------------------------------------------------------- uses inside spans
USE_KINDS = ("inherit", "call", "reference")  # the order a caller prefers them in: a base class, a call, a name


@dataclass(frozen=True)
class Use:
    """A use inside a span that resolved to exactly one definition of the span's dataset."""

    ref: Ref
    definition: Def


@dataclass(frozen=True)
class LineSpan:
    dataset_id: int
    document_id: int
    start_line: int
    end_line: int


def resolved_uses(*, spans: list[LineSpan], kinds: tuple[str, ...] = USE_KINDS,
                  max_uses: int | None = None) -> list[list[Use]]:
    """For each span, the uses in its lines that resolve (by the module docstring's rules) to exactly one definition
    of its dataset, each definition once per span: in `kinds` order, then line order. Ambiguous and external names
    are left out: a context pack or a ranking signal built on a guess would mislead the agent reading it.

    Bounded whatever the file: at most `max_uses` uses are read per span (default CODE_GRAPH_MAX_USES, in the order
    they are followed: a span of one minified line with thousands of calls reads its first ones), resolution is
    linear in them (Resolver.resolve), and the loop stops at the request's deadline (504 `request_timeout`, as
    the whole query would). One query per span for its references, one for their names' definitions and one for
    their files' imports: the pack and the boost call this on every query that uses the graph."""
    if not spans:
        return []
    cap = settings.CODE_GRAPH_MAX_USES if max_uses is None else max_uses
    order = Case(*(When(kind=k, then=Value(i)) for i, k in enumerate(kinds)), output_field=IntegerField())
    per_span = [[Ref(*r) for r in SymbolRef.objects.filter(document_id=s.document_id, line__gte=s.start_line,
                                                            line__lte=s.end_line, kind__in=kinds)
                 .annotate(kind_rank=order).order_by("kind_rank", "line", "pk").values_list(*_REF_FIELDS)[:cap]]
                for s in spans]
    resolvers: dict[int, Resolver] = {}
    for ds_id in sorted({s.dataset_id for s in spans}):
        mine = [r for s, rows in zip(spans, per_span, strict=True) if s.dataset_id == ds_id for r in rows]
        resolver = resolvers[ds_id] = Resolver(dataset_id=ds_id)
        resolver.load_imports(sorted({s.document_id for s in spans if s.dataset_id == ds_id}))
        resolver.prime_for(mine)
    out: list[list[Use]] = []
    for s, rows in zip(spans, per_span, strict=True):
        resolver = resolvers[s.dataset_id]
        seen: set[int] = set()
        uses: list[Use] = []
        for r in rows:
            deadlines.check()
            how, defs = resolver.resolve(r)
            if how == "resolved" and defs[0].id not in seen:
                seen.add(defs[0].id)
                uses.append(Use(ref=r, definition=defs[0]))
        out.append(uses)
    return out


def enclosing_definitions(*, spans: list[LineSpan]) -> list[list[Def]]:
    """For each span, the definitions of its file that enclose its first line and start above it, outermost first
    (the class a method chunk belongs to, whose header the chunk does not show)."""
    if not spans:
        return []
    defs = _defs(document_id__in=sorted({s.document_id for s in spans}))
    return [[d for d in defs if d.document_id == s.document_id and d.start_line < s.start_line <= d.end_line]
            for s in spans]


def member_starts(*, definitions: list[Def]) -> dict[int, int]:
    """definition id -> the first line of its first member that is not a variable (a class's header, its class
    attributes with it, ends above it); no such member: absent."""
    if not definitions:
        return {}
    where = Q()
    for d in definitions:
        where |= Q(document_id=d.document_id, qualname__startswith=d.qualname + ".", start_line__gt=d.start_line,
                   start_line__lte=d.end_line)
    firsts: dict[tuple[int, str], int] = {}
    for doc_id, qualname, line in Symbol.objects.filter(where).exclude(kind="variable").values_list(
            "document_id", "qualname", "start_line"):
        for d in definitions:
            if d.document_id == doc_id and qualname.startswith(d.qualname + ".") and "." not in \
                    qualname[len(d.qualname) + 1:]:
                firsts[(doc_id, d.qualname)] = min(line, firsts.get((doc_id, d.qualname), line))
    return {d.id: firsts[(d.document_id, d.qualname)] for d in definitions if (d.document_id, d.qualname) in firsts}


def _implicit_this(path: str) -> bool:
    """Languages where a method calls another of its class by its bare name (Java, C#, C++, Go receivers aside)."""
    return posixpath.splitext(path)[1].lower() not in (".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx",
                                                       ".rb", ".php", ".rs", ".go", ".c", ".h")


def in_module(path: str, module: str) -> bool:
    """Whether the file at `path` is `module`: dotted (`billing.ledger`, a tail of the path's module for `src/`
    layouts) or a path without its extension (`web/util`, as a relative JS/TS import resolves)."""
    if "/" in module:
        stem = posixpath.splitext(path)[0]
        return stem == module or stem.endswith("/" + module) or module_of(path) == module.replace("/", ".")
    mod = module_of(path)
    return mod == module or mod.endswith("." + module)


def find_references(*, project: Project, symbol: str, dataset: str | int | None = None,
                    limit: int = MAX_REFERENCES) -> dict[str, Any]:
    """Uses of the definition(s) `symbol` names (calls, references, imports, base classes), each with how it
    resolved: `resolved` (to a listed definition) or `ambiguous` (its name has several candidates, this among
    them). Uses that resolve to another definition of the same name are left out. A name with more than
    MAX_DEFINITIONS definitions gets the uses of the first MAX_DEFINITIONS (`truncated`).

    Work that ends (docs/security.md): at most MAX_SCANNED uses are read, each resolves in constant time once its
    file's imports are indexed (Resolver.resolve), and resolving stops at CODE_REFERENCES_BUDGET_S or the request's
    deadline, whichever comes first. A search cut short by either answers what it found with `complete: false`
    (`total` then counts the uses resolved so far)."""
    symbol = _check_symbol(symbol)
    if not 1 <= limit <= MAX_REFERENCES:
        raise BadInput(f"Must be between 1 and {MAX_REFERENCES}.", field="limit")
    stop_at = deadlines.budget(seconds=settings.CODE_REFERENCES_BUDGET_S)
    ids = [ds.pk for ds in datasets_for(project=project, dataset=dataset)]
    targets = definitions_of(dataset_ids=ids, symbol=symbol, limit=MAX_DEFINITIONS + 1)
    targets_truncated = len(targets) > MAX_DEFINITIONS
    targets = targets[:MAX_DEFINITIONS]
    by_id = {d.id: d for d in targets}
    # the targets among a resolution's definitions, once per list: an ambiguous name's candidates (thousands, in
    # a crafted dataset) are the same cached list for each of its uses; the memo holds the list, so ids stay unique
    kept: dict[int, tuple[list[Def], list[Def]]] = {}

    def targets_in(defs: list[Def]) -> list[Def]:
        if id(defs) not in kept:
            kept[id(defs)] = (defs, [d for d in defs if d.id in by_id])
        return kept[id(defs)][1]

    refs: list[dict[str, Any]] = []
    total = 0
    complete = True
    scanned = 0
    for ds_id in sorted({d.dataset_id for d in targets}):
        if not complete:
            break
        resolver = Resolver(dataset_id=ds_id)
        names = sorted({d.name for d in targets if d.dataset_id == ds_id})
        rows = [Ref(*r) for r in SymbolRef.objects.filter(dataset_id=ds_id, name__in=names)
                .order_by("path", "line", "kind").values_list(*_REF_FIELDS)[:MAX_SCANNED - scanned + 1]]
        if len(rows) > MAX_SCANNED - scanned:
            rows, complete = rows[:MAX_SCANNED - scanned], False
        resolver.load_imports(sorted({r.document_id for r in rows}))
        resolver.prime_for(rows)
        # `from m import name as alias`: the file's uses of the alias are uses of the name (one query for them all)
        aliased = {(r.document_id, r.alias) for r in rows if r.kind == "import" and r.alias and r.alias != r.name
                   and targets_in(resolver.resolve(r)[1])}
        if aliased:
            more = [Ref(*row) for row in SymbolRef.objects.filter(
                document_id__in=sorted({d for d, _ in aliased}), name__in=sorted({a for _, a in aliased}))
                .exclude(kind="import").order_by("path", "line")
                .values_list(*_REF_FIELDS)[:MAX_SCANNED - scanned - len(rows) + 1]]
            more = [r for r in more if (r.document_id, r.name) in aliased]
            if len(more) > MAX_SCANNED - scanned - len(rows):
                more, complete = more[:MAX_SCANNED - scanned - len(rows)], False
            resolver.prime_for(more)
            rows += more
        scanned += len(rows)
        rows.sort(key=lambda r: (r.path, r.line, r.kind))
        for r in rows:
            if deadlines.passed(stop_at):
                complete = False
                break
            how, defs = resolver.resolve(r)
            mine = targets_in(defs)
            if not mine:
                continue
            total += 1
            if len(refs) < limit:
                refs.append({"dataset_id": r.dataset_id, "path": r.path, "line": r.line, "span": f"{r.path}:{r.line}",
                             "kind": r.kind, "name": r.name, "qualifier": r.qualifier, "container": r.container,
                             "resolution": how,
                             "definition": mine[0].as_dict()["span"] if how == "resolved" else None,
                             "candidates": len(defs)})
    return {"project": project.slug, "symbol": symbol, "status": _status(targets),
            "definitions": [d.as_dict() for d in targets], "references": refs, "total": total,
            "truncated": total > len(refs) or targets_truncated, "complete": complete}


# --------------------------------------------------------------------------- files
def _document(*, project: Project, path: str, dataset: str | int | None) -> Document:
    if not isinstance(path, str) or not path.strip() or len(path) > 1000:
        raise BadInput("Must be a non-empty path of at most 1000 characters.", field="path")
    datasets = datasets_for(project=project, dataset=dataset)
    docs = list(Document.objects.filter(dataset__in=datasets, path=path).select_related("dataset"))
    if not docs:
        raise NotFound("No indexed file at this path in this project.", field="path")
    return min(docs, key=lambda d: (d.dataset.project_id != project.pk, d.dataset_id))


def outline(*, project: Project, path: str, dataset: str | int | None = None, limit: int = DEFAULT_OUTLINE,
            offset: int = 0) -> dict[str, Any]:
    """A file's definitions in line order (nesting by `depth`) and its imports, one page at a time: from `offset`,
    at most `limit` of each (a 1 MB file can define tens of thousands of names; its whole outline was megabytes of
    JSON). `complete` says whether this page ends both lists; otherwise `next` is the offset to ask for."""
    if not 1 <= limit <= MAX_OUTLINE:
        raise BadInput(f"Must be between 1 and {MAX_OUTLINE}.", field="limit")
    if not 0 <= offset <= 10 ** 7:
        raise BadInput("Must be between 0 and 10000000.", field="offset")
    doc = _document(project=project, path=path, dataset=dataset)
    defs = [Def(*row) for row in Symbol.objects.filter(document_id=doc.pk).order_by("start_line", "pk")
            .values_list(*DEF_FIELDS)[offset:offset + limit + 1]]
    imports = list(SymbolRef.objects.filter(document_id=doc.pk, kind="import").order_by("line", "name", "pk")
                   .values_list("line", "name", "qualifier", "alias")[offset:offset + limit + 1])
    more = len(defs) > limit or len(imports) > limit
    return {"project": project.slug, "dataset_id": doc.dataset_id, "path": doc.path, "lang": doc.lang,
            "symbols": [{**d.as_dict(), "depth": d.qualname.count(".")} for d in defs[:limit]],
            "imports": [{"line": line, "name": name, "module": module, "alias": alias, "span": f"{doc.path}:{line}"}
                        for line, name, module, alias in imports[:limit]],
            "limit": limit, "offset": offset, "complete": not more, "next": offset + limit if more else None}


def list_files(*, project: Project, dataset: str | int | None = None, glob: str | None = None,
               limit: int = 200, offset: int = 0) -> dict[str, Any]:
    """Indexed files the project can read, in dataset and path order, narrowed by a path glob."""
    if not 1 <= limit <= MAX_FILES:
        raise BadInput(f"Must be between 1 and {MAX_FILES}.", field="limit")
    if not 0 <= offset <= 10 ** 7:
        raise BadInput("Must be between 0 and 10000000.", field="offset")
    datasets = datasets_for(project=project, dataset=dataset)
    docs = Document.objects.filter(dataset__in=datasets)
    if glob:
        try:
            g = compile_glob(glob)
        except BadInput as exc:
            raise BadInput(exc.detail, field="glob") from None
        docs = docs.filter(path__startswith=g.prefix, path__regex=g.regex)
    rows = list(docs.order_by("dataset_id", "path").values_list("dataset_id", "path", "lang", "size_bytes")
                [offset:offset + limit + 1])
    names = {ds.pk: ds.name for ds in datasets}
    return {"project": project.slug, "files": [{"dataset_id": ds, "dataset": names[ds], "path": path, "lang": lang,
                                                "size_bytes": size} for ds, path, lang, size in rows[:limit]],
            "limit": limit, "offset": offset, "truncated": len(rows) > limit}
