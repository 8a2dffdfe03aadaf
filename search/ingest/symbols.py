"""The symbol graph's facts of one file: its definitions, its references and calls, its imports and inheritance.

Why from the indexed text and nothing else: Postgres keeps a file only as its chunks, and a chunk's text is its
lines exactly (every line of a file is in some chunk, blank and comment-only runs aside), so `indexed_text`
rebuilds the file with every line where it was. Extracting from that text, at ingest and again in the reconcile
check (search.engine.code_reconcile), gives the same facts both times: the graph can be proved equal to a fresh
build of what Postgres holds, and repaired from it, with no second copy of the source.

Why facts per file and resolution at query time (search.engine.code_graph): a reference is stored as the name it
uses, where and in which definition, with the import it came through; which definition that name means depends
on the other files of the dataset, which change independently. Resolving when asked keeps a diff sync to "rewrite
the changed files' rows" and a delete to "drop the file's rows", and the answer is always the current one.

Python goes through its AST (scopes: a function's own parameters and locals are not references to anything
else); the tree-sitter languages (search.ingest.syntax.GRAMMARS) through their syntax trees, keeping calls, type
uses, imports and inheritance (plain identifier reads are left out: without scopes they are mostly locals).
Pure: text in, facts out.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from search.engine.module_names import module_of
from search.ingest import syntax

if TYPE_CHECKING:
    from tree_sitter import Node

MAX_NAME = 300
MAX_QUALNAME = 500
MAX_SIGNATURE = 300
MAX_QUALIFIER = 300

REF_KINDS = ("call", "reference", "import", "inherit")
# languages with an extractor, as search.ingest.code.detect_lang names them (`.tsx` is typescript with JSX)
SYMBOL_LANGS = frozenset({"python", *syntax.GRAMMARS})
_SKIP_NAMES = frozenset(dir(builtins)) | {"self", "cls", "__name__", "__file__"}


class Definition(NamedTuple):
    """A named definition; lines 1-based and inclusive, decorators and the attached doc comment included.

    A named tuple: a file has hundreds of facts, built, deduplicated and sorted on every ingest and check, and a
    tuple does all three in C (ordered by its fields in this order, as the digest needs)."""

    start_line: int
    end_line: int
    qualname: str  # `Wallet.deduct` (containers joined by dots, within the file)
    name: str  # the last part: what a reference uses
    kind: str  # function | method | class | interface | struct | enum | trait | type | module | variable | ...
    signature: str = ""


class Reference(NamedTuple):
    """One use of a name. `qualifier`: what it was reached through (`self`, `ledger`, the module of an import);
    `container`: the qualname of the definition it sits in ("" at file level); `alias`: for an import, the name it
    binds in the file. A named tuple, as Definition."""

    line: int
    name: str
    kind: str  # call | reference | import | inherit
    qualifier: str = ""
    container: str = ""
    alias: str = ""


@dataclass(frozen=True)
class FileSymbols:
    definitions: tuple[Definition, ...] = ()
    references: tuple[Reference, ...] = ()

    def digest(self) -> str:
        """A hash of every fact, so a check can tell whether the stored rows are still exactly these."""
        # each fact as the repr of the plain tuple of its fields, in field order, hashed in one piece (the same
        # bytes as one update per fact)
        h = hashlib.sha256("".join(map(tuple.__repr__, sorted(self.definitions))).encode())
        h.update(b"|")
        h.update("".join(map(tuple.__repr__, sorted(self.references))).encode())
        return h.hexdigest()


def indexed_text(spans: Iterable[tuple[int, int, str]]) -> str:
    """A file rebuilt from its chunks: (start_line, text) placed by line number, a line no chunk holds left empty.

    Chunks may overlap (windows of a long definition); the first chunk holding a line gives it (all agree)."""
    lines: dict[int, str] = {}
    for start, _end, text in spans:
        for i, line in enumerate(text.split("\n")):
            lines.setdefault(start + i, line)
    last = max(lines, default=0)
    return "\n".join(lines.get(n, "") for n in range(1, last + 1))


def extract(*, path: str, text: str, lang: str) -> FileSymbols:
    """The facts of one file, or no facts for a language without an extractor or a file that does not parse."""
    if lang == "python":
        return _python(path=path, text=text)
    grammar = "tsx" if path.lower().endswith(".tsx") else lang
    if grammar in syntax.GRAMMARS:
        return _tree_sitter(path=path, text=text, lang=grammar)
    return FileSymbols()


def _cap(value: str, n: int) -> str:
    return value if len(value) <= n else value[:n]


def _facts(defs: Iterable[Definition], refs: Iterable[Reference]) -> FileSymbols:
    return FileSymbols(definitions=tuple(sorted(set(defs))), references=tuple(sorted(set(refs))))


# --------------------------------------------------------------------------- Python
def _python_module(path: str, level: int, module: str | None) -> str:
    """The absolute module of `from <level dots><module> import ...` written in `path`."""
    if not level:
        return module or ""
    package = module_of(path).split(".") if path.endswith("__init__.py") else module_of(path).split(".")[:-1]
    base = package[: len(package) - (level - 1)] if level - 1 <= len(package) else []
    return ".".join([*base, *([module] if module else [])])


def _unparse(node: ast.AST) -> str:
    """`ast.unparse`, capped; "" where it cannot write the node. The usual shapes (names, dotted names, literals,
    calls, subscripts, `X | Y`, plain parameter lists and assignments) are written by `_source` directly, to the
    same text: the general writer costs tens of microseconds a call, most of it setting itself up."""
    try:
        text = _source(node)
        if text is None:
            text = ast.unparse(node)
    except (ValueError, TypeError, AttributeError):
        return ""
    return text if len(text) <= MAX_QUALIFIER else text[:MAX_QUALIFIER]


def _source(node: ast.AST, atom: bool = False) -> str | None:
    """`ast.unparse(node)` (Python 3.11) for the shapes it writes without choices, None for any other.

    `atom`: the node is an operand that binds tightest (an attribute's, a call's or a subscript's value), where
    `ast.unparse` would bracket an operator."""
    writer = _WRITERS.get(node.__class__)
    return None if writer is None else writer(node, atom)


def _attribute_source(node: ast.Attribute, atom: bool) -> str | None:
    value = node.value
    if value.__class__ is ast.Constant and isinstance(value.value, int):
        return None  # written `1 .real`
    inner = _source(value, True)
    return None if inner is None else f"{inner}.{node.attr}"


def _constant_source(node: ast.Constant, atom: bool) -> str | None:
    value = node.value
    if value is None or value.__class__ in (int, bool, bytes):
        return repr(value)
    if value.__class__ is str:
        return "u" + repr(value) if node.kind == "u" else repr(value)
    return "..." if value is ... else None  # floats, complex numbers, tuples: written their own way


def _call_source(node: ast.Call, atom: bool) -> str | None:
    parts = [_source(node.func, True)]
    parts.extend(_source(a) for a in node.args)  # a starred argument is None: not written here
    for kw in node.keywords:
        if kw.arg is None:
            return None
        value = _source(kw.value)
        parts.append(None if value is None else f"{kw.arg}={value}")
    if None in parts:
        return None
    return f"{parts[0]}({', '.join(parts[1:])})"


def _subscript_source(node: ast.Subscript, atom: bool) -> str | None:
    inner = _source(node.value, True)
    index = node.slice
    text = _items(index.elts) if index.__class__ is ast.Tuple and index.elts else _source(index)
    return None if inner is None or text is None else f"{inner}[{text}]"


def _union_source(node: ast.BinOp, atom: bool) -> str | None:
    if node.op.__class__ is not ast.BitOr or atom:
        return None
    left = node.left
    text = _source(left) if left.__class__ is ast.BinOp else _source(left, True)  # `a | b | c`: no brackets
    right = _source(node.right, True)
    return None if text is None or right is None else f"{text} | {right}"


def _list_source(node: ast.List | ast.Set, atom: bool) -> str | None:
    if not node.elts:
        return "[]" if node.__class__ is ast.List else None  # an empty set is written `{*()}`
    parts = [_source(e) for e in node.elts]
    if None in parts:
        return None
    return f"[{', '.join(parts)}]" if node.__class__ is ast.List else f"{{{', '.join(parts)}}}"


def _tuple_source(node: ast.Tuple, atom: bool) -> str | None:
    text = _items(node.elts) if node.elts else ""
    return None if text is None else f"({text})"


def _dict_source(node: ast.Dict, atom: bool) -> str | None:
    parts = []
    for key, value in zip(node.keys, node.values, strict=False):
        if key is None:
            return None  # `**mapping`
        k, v = _source(key), _source(value)
        if k is None or v is None:
            return None
        parts.append(f"{k}: {v}")
    return f"{{{', '.join(parts)}}}"


def _assign_source(node: ast.Assign, atom: bool) -> str | None:
    parts = [_items(t.elts) if t.__class__ is ast.Tuple and t.elts else _source(t) for t in node.targets]
    parts.append(_source(node.value))
    return None if None in parts else " = ".join(parts)


def _ann_assign_source(node: ast.AnnAssign, atom: bool) -> str | None:
    if not node.simple or node.target.__class__ is not ast.Name:
        return None
    annotation = _source(node.annotation)
    if annotation is None:
        return None
    if node.value is None:
        return f"{node.target.id}: {annotation}"
    value = _source(node.value)
    return None if value is None else f"{node.target.id}: {annotation} = {value}"


def _items(elts: list[ast.expr]) -> str | None:
    """A tuple's items where it needs no brackets (`x[a, b]`, `a, b = ...`): one item keeps its comma."""
    parts = [_source(e) for e in elts]
    if None in parts:
        return None
    return f"{parts[0]}," if len(parts) == 1 else ", ".join(parts)


def _parameter(arg: ast.arg, default: ast.expr | None) -> str | None:
    text = arg.arg
    if arg.annotation is not None:
        annotation = _source(arg.annotation)
        if annotation is None:
            return None
        text = f"{text}: {annotation}"
    if default is not None:
        value = _source(default)
        if value is None:
            return None
        text = f"{text}={value}"
    return text


def _parameters(node: ast.arguments) -> str | None:
    """A parameter list as `ast.unparse` writes it: `a, /, b=1, *args, c, **kw`."""
    positional = [*node.posonlyargs, *node.args]
    defaults = [None] * (len(positional) - len(node.defaults)) + node.defaults
    parts = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=False), 1):
        parts.append(_parameter(arg, default))
        if index == len(node.posonlyargs):
            parts.append("/")
    if node.vararg is not None or node.kwonlyargs:
        vararg = _parameter(node.vararg, None) if node.vararg is not None else ""
        parts.append(None if vararg is None else "*" + vararg)
    parts.extend(_parameter(arg, default) for arg, default in zip(node.kwonlyargs, node.kw_defaults, strict=False))
    if node.kwarg is not None:
        parts.append(_parameter(node.kwarg, None))
        if parts[-1] is not None:
            parts[-1] = "**" + parts[-1]
    return None if None in parts else ", ".join(parts)


_WRITERS = {ast.Name: lambda node, atom: node.id, ast.Attribute: _attribute_source, ast.Constant: _constant_source,
            ast.Call: _call_source, ast.Subscript: _subscript_source, ast.BinOp: _union_source,
            ast.List: _list_source, ast.Set: _list_source, ast.Tuple: _tuple_source, ast.Dict: _dict_source,
            ast.arguments: lambda node, atom: _parameters(node), ast.Assign: _assign_source,
            ast.AnnAssign: _ann_assign_source}


def _qualifier(node: ast.expr) -> str:
    """What an attribute was reached through, as `ast.unparse` writes it (capped): a dotted chain of names
    (`self`, `os.path`: most of them) joined here directly, anything else unparsed."""
    parts = []
    value = node
    while value.__class__ is ast.Attribute:
        parts.append(value.attr)
        value = value.value
    if value.__class__ is not ast.Name:
        return _unparse(node)
    if not parts:
        text = value.id
    else:
        parts.append(value.id)
        parts.reverse()
        text = ".".join(parts)
    return text if len(text) <= MAX_QUALIFIER else text[:MAX_QUALIFIER]


# fields of a node that never hold a node worth visiting: names, flags, operators, expression contexts
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "name", "id", "attr", "arg", "asname", "module",
                          "level", "kind", "conversion", "simple", "is_async", "tag", "kwd_attrs", "rest"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f for f in cls._fields if f not in _LEAF_FIELDS)
    for cls in vars(ast).values() if isinstance(cls, type) and issubclass(cls, ast.AST)}
_Load, _Store = ast.Load, ast.Store


class _PyVisitor:
    """One walk over a module's AST.

    Why no second walk of each function body for its locals: a reference a function might bind is held back
    (`pending`) until the function's body has been walked, then kept unless the body bound it. The names a body
    binds are gathered on the way (`binds`), exactly those `_assigned` finds: its assignments, loop, with and except
    targets, imports and nested definitions' names, but nothing inside a nested definition (its decorators,
    defaults and annotations included) or a nested class body. A body with `global`/`nonlocal` goes through
    `_assigned` itself: there what a statement unbinds depends on where it stands."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.defs: list[tuple[int, int, str, str, str, str]] = []
        self.refs: list[tuple[int, str, str, str, str, str]] = []
        self.stack: list[tuple[str, str]] = []  # (qualname, kind) of the enclosing definitions
        self.container = ""  # the innermost definition's qualname, capped
        self.in_function = False  # the innermost definition is a function (its body's assignments define nothing)
        self.pending: list[tuple[str, tuple[int, str, str, str, str, str]]] | None = None  # (name, ref) to check
        self.binds: set[str] | None = None  # names the innermost function's own body binds; None: not gathering
        self.unbinds = False  # that body has `global` or `nonlocal`
        self.table = {ast.FunctionDef: self._function, ast.AsyncFunctionDef: self._function,
                      ast.ClassDef: self._class, ast.Assign: self._assign,
                      ast.AnnAssign: self._ann_assign, ast.Import: self._import,
                      ast.ImportFrom: self._import_from, ast.Call: self._call, ast.Name: self._name,
                      ast.Attribute: self._attribute, ast.ExceptHandler: self._except_handler,
                      ast.Global: self._global, ast.Nonlocal: self._global,
                      ast.Constant: self._leaf, ast.alias: self._leaf}

    def visit(self, node: ast.AST) -> None:
        self.table.get(node.__class__, self.generic_visit)(node)

    def generic_visit(self, node: ast.AST) -> None:
        table, generic, base = self.table, self.generic_visit, ast.AST
        for field in _CHILD_FIELDS[node.__class__]:
            value = getattr(node, field, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, base):
                        table.get(item.__class__, generic)(item)
            elif isinstance(value, base):
                table.get(value.__class__, generic)(value)

    def _leaf(self, node: ast.AST) -> None:
        pass

    def _push(self, qual: str, kind: str) -> tuple[str, bool]:
        saved = self.container, self.in_function
        self.stack.append((qual, kind))
        self.container = _cap(qual, MAX_QUALNAME)
        self.in_function = kind == "function"
        return saved

    def _pop(self, saved: tuple[str, bool]) -> None:
        self.stack.pop()
        self.container, self.in_function = saved

    def _qual(self, name: str) -> str:
        return f"{self.stack[-1][0]}.{name}" if self.stack else name

    def _ref(self, line: int, name: str, kind: str, qualifier: str = "", alias: str = "") -> None:
        if name:
            self.refs.append((line, name if len(name) <= MAX_NAME else name[:MAX_NAME], kind, qualifier,
                              self.container, alias))

    def _use(self, line: int, name: str, kind: str) -> None:
        """A reference by a bare name: none if it is a builtin, or a parameter or local of an enclosing function
        (those are known once each function's body has been walked)."""
        if name in _SKIP_NAMES:
            return
        ref = (line, name if len(name) <= MAX_NAME else name[:MAX_NAME], kind, "", self.container, "")
        if self.pending is None:
            self.refs.append(ref)
        else:
            self.pending.append((name, ref))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        in_class = bool(self.stack) and self.stack[-1][1] == "class"
        prefix = "async def" if node.__class__ is ast.AsyncFunctionDef else "def"
        returns = f" -> {_unparse(node.returns)}" if node.returns is not None else ""
        signature = f"{prefix} {node.name}({_unparse(node.args)}){returns}"
        decorators = node.decorator_list
        start = min([node.lineno] + [d.lineno for d in decorators]) if decorators else node.lineno
        qual = self._qual(node.name)
        self.defs.append((start, node.end_lineno or node.lineno, _cap(qual, MAX_QUALNAME), _cap(node.name, MAX_NAME),
                          "method" if in_class else "function", _cap(signature, MAX_SIGNATURE)))
        outer_binds = self.binds
        if outer_binds is not None:
            outer_binds.add(node.name)
        self.binds = None  # decorators, defaults and annotations bind nothing of the enclosing body's
        args = node.args
        for deco in decorators:
            self.visit(deco)
        for default in args.defaults:
            self.visit(default)
        for default in args.kw_defaults:
            if default is not None:
                self.visit(default)
        params = (*args.posonlyargs, *args.args, *args.kwonlyargs)
        for a in params:
            if a.annotation is not None:
                self.visit(a.annotation)
        if node.returns is not None:
            self.visit(node.returns)
        names = {a.arg for a in params}
        if args.vararg is not None:
            names.add(args.vararg.arg)
        if args.kwarg is not None:
            names.add(args.kwarg.arg)
        outer_pending, outer_unbinds = self.pending, self.unbinds
        self.pending, self.binds, self.unbinds = [], set(), False
        saved = self._push(qual, "function")
        for stmt in node.body:
            self.visit(stmt)
        self._pop(saved)
        names |= _assigned(node.body) if self.unbinds else self.binds
        pending = self.pending
        self.pending, self.binds, self.unbinds = outer_pending, outer_binds, outer_unbinds
        if outer_pending is None:
            self.refs.extend([ref for name, ref in pending if name not in names])
        else:
            outer_pending.extend([item for item in pending if item[0] not in names])

    def _class(self, node: ast.ClassDef) -> None:
        bases = ", ".join(_unparse(b) for b in node.bases)
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        qual = self._qual(node.name)
        self.defs.append((start, node.end_lineno or node.lineno, _cap(qual, MAX_QUALNAME), _cap(node.name, MAX_NAME),
                          "class", _cap(f"class {node.name}({bases})" if bases else f"class {node.name}",
                                        MAX_SIGNATURE)))
        outer_binds = self.binds
        if outer_binds is not None:
            outer_binds.add(node.name)
        self.binds = None  # a class body's names are its attributes, not the enclosing function's locals
        for deco in node.decorator_list:
            self.visit(deco)
        for kw in node.keywords:
            self.visit(kw.value)
        saved = self._push(qual, "class")
        for base in node.bases:
            if base.__class__ is ast.Name:
                self._ref(base.lineno, base.id, "inherit")
            elif base.__class__ is ast.Attribute:
                self._ref(base.lineno, base.attr, "inherit", qualifier=_qualifier(base.value))
            else:
                self.visit(base)
        for stmt in node.body:
            self.visit(stmt)
        self._pop(saved)
        self.binds = outer_binds

    def _assign_targets(self, targets: list[ast.expr], node: ast.stmt) -> None:
        """Module- and class-level names assigned are definitions (constants, settings, class attributes)."""
        signature = None
        for target in targets:
            for name_node in ast.walk(target) if target.__class__ is not ast.Name else (target,):
                if name_node.__class__ is ast.Name and isinstance(name_node.ctx, _Store):
                    if signature is None:
                        signature = _cap(_first_line(_unparse(node)), MAX_SIGNATURE)
                    self.defs.append((node.lineno, node.end_lineno or node.lineno,
                                      _cap(self._qual(name_node.id), MAX_QUALNAME), _cap(name_node.id, MAX_NAME),
                                      "variable", signature))

    def _assign(self, node: ast.Assign) -> None:
        if not self.in_function:
            self._assign_targets(node.targets, node)
        self.visit(node.value)
        binds = self.binds
        for target in node.targets:
            if target.__class__ is not ast.Name:
                self.visit(target)
            elif binds is not None and isinstance(target.ctx, _Store):
                binds.add(target.id)

    def _ann_assign(self, node: ast.AnnAssign) -> None:
        if not self.in_function:
            self._assign_targets([node.target], node)
        if self.binds is not None:  # the target is not walked for references, but it binds
            target = node.target
            if target.__class__ is ast.Name and isinstance(target.ctx, _Store):
                self.binds.add(target.id)
            else:
                self.binds |= _assigned([target])
        self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def _import(self, node: ast.Import) -> None:
        if self.binds is not None:
            self.binds.update((a.asname or a.name).split(".")[0] for a in node.names)
        for alias in node.names:
            module, _, last = alias.name.rpartition(".")
            bound = alias.asname or alias.name.split(".")[0]
            self._ref(node.lineno, last, "import", qualifier=module, alias=bound)

    def _import_from(self, node: ast.ImportFrom) -> None:
        if self.binds is not None:
            self.binds.update((a.asname or a.name).split(".")[0] for a in node.names)
        module = _python_module(self.path, node.level, node.module)
        for alias in node.names:
            if alias.name == "*":
                continue
            self._ref(node.lineno, alias.name, "import", qualifier=module, alias=alias.asname or alias.name)

    def _except_handler(self, node: ast.ExceptHandler) -> None:
        if node.name and self.binds is not None:
            self.binds.add(node.name)
        self.generic_visit(node)

    def _global(self, node: ast.Global | ast.Nonlocal) -> None:
        if self.binds is not None:
            self.unbinds = True

    def _call(self, node: ast.Call) -> None:
        func = node.func
        if func.__class__ is ast.Name:
            self._use(func.lineno, func.id, "call")
        elif func.__class__ is ast.Attribute:
            self._ref(func.lineno, func.attr, "call", qualifier=_qualifier(func.value))
            self.visit(func.value)
        else:
            self.visit(func)
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            self.visit(kw.value)

    def _name(self, node: ast.Name) -> None:
        ctx = node.ctx.__class__
        if ctx is _Load:
            self._use(node.lineno, node.id, "reference")
        elif ctx is _Store and self.binds is not None:
            self.binds.add(node.id)

    def _attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, _Load):
            self._ref(node.lineno, node.attr, "reference", qualifier=_qualifier(node.value))
        self.visit(node.value)


def _assigned(body: list[ast.AST]) -> set[str]:
    """Names a function body binds (assignments, loops, with, except, imports, comprehensions' outer targets),
    nested definitions' bodies left out; a `global` or `nonlocal` unbinds its names bound after it in this walk
    (from the last statement back)."""
    out: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.difference_update(node.names)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def python_tree(text: str) -> ast.Module | None:
    """A Python file's syntax tree, or None where it does not parse. The chunker and the facts share it
    (search.ingest.code.code_document): parsing was a third of what the facts cost."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None


def facts_of_chunks(*, path: str, lang: str, text: str, tree: ast.Module | None,
                    spans: Iterable[tuple[int, int, str]]) -> tuple[str, FileSymbols]:
    """(the file rebuilt from its chunks, its facts): exactly what `extract(indexed_text(spans))` gives, which is
    what the writer stores and the reconcile check rebuilds. `tree`: the tree the chunker parsed from `text`,
    reused where the rebuilt file parses to the same tree (`_same_tree`), so a file is parsed once."""
    rebuilt = indexed_text(spans)
    if lang not in SYMBOL_LANGS:
        return rebuilt, FileSymbols()
    if lang == "python" and tree is not None and _same_tree(tree=tree, text=text, rebuilt=rebuilt):
        return rebuilt, _python_facts(path=path, tree=tree)
    return rebuilt, extract(path=path, text=rebuilt, lang=lang)


def _same_tree(*, tree: ast.Module, text: str, rebuilt: str) -> bool:
    """Whether `rebuilt` parses to the same tree as `text`: every line they differ in is blank or a comment in the
    original (the chunker leaves out only those) and lies outside every statement at module or class level, so it
    cannot be a line of a multi-line string. Comments and blank lines between statements are no part of a tree,
    and the line numbers are the same."""
    a, b = text.split("\n"), rebuilt.split("\n")
    differ = [n for n in range(max(len(a), len(b))) if (a[n] if n < len(a) else "") != (b[n] if n < len(b) else "")]
    if not differ:
        return True
    if any(n >= len(a) or (a[n].strip() and not a[n].lstrip().startswith("#")) for n in differ):
        return False
    spans: list[tuple[int, int]] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if isinstance(node, ast.ClassDef) and node.body:
            first = node.body[0]
            spans.append((start, min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])]) - 1))
            todo.extend(node.body)
        else:
            spans.append((start, node.end_lineno or node.lineno))
    return not any(s <= n + 1 <= e for n in differ for s, e in spans)


def _python(*, path: str, text: str) -> FileSymbols:
    tree = python_tree(text)
    if tree is None:
        return FileSymbols()
    return _python_facts(path=path, tree=tree)


def _python_facts(*, path: str, tree: ast.Module) -> FileSymbols:
    visitor = _PyVisitor(path)
    try:
        visitor.visit(tree)
    except RecursionError:
        return FileSymbols()
    new = tuple.__new__
    return FileSymbols(definitions=tuple([new(Definition, d) for d in sorted(set(visitor.defs))]),
                       references=tuple([new(Reference, r) for r in sorted(set(visitor.refs))]))


# --------------------------------------------------------------------------- tree-sitter languages
_CALLS = frozenset({"call_expression", "call", "method_invocation", "invocation_expression",
                    "function_call_expression", "member_call_expression", "scoped_call_expression",
                    "nullsafe_member_call_expression", "new_expression", "object_creation_expression",
                    "macro_invocation"})
_CALLEE_FIELDS = ("function", "name", "method", "constructor", "type", "macro")
_IMPORTS = frozenset({"import_statement", "import_declaration", "use_declaration", "using_directive",
                      "preproc_include", "namespace_use_declaration", "import_spec"})
_HERITAGE = re.compile(r"heritage|superclass|super_interfaces|extends|implements|base_list|base_class_clause|"
                       r"base_clause|interface_clause|trait_bounds")
_TYPE_USES = frozenset({"type_identifier"})
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_STRING = re.compile(r"""["'`<]([^"'`<>]+)["'`>]""")
# node types whose names match syntax._DEFINITION but declare nothing: calls, anonymous functions, bodies, types
_NOT_DEFINITION = re.compile(r"expression|invocation|call|arrow|lambda|closure|reference|signature|_body$|_list$|"
                             r"_clause$|_type$|_parameters$|_identifier$|_arguments$")
_CONTAINERS_ONLY = frozenset({"impl_item"})  # Rust: `impl Wallet { fn deduct }` names Wallet.deduct, defines nothing


_WRAPPERS = frozenset({"export_statement", "decorated_definition", "attribute_item", "template_declaration",
                       "lexical_declaration", "variable_declaration", "program", "source_file", "translation_unit"})
_NEVER, _BY_NAME, _IF_VALUE_DEFINES = 0, 1, 2
# what a node's type alone says (tree-sitter has a few hundred types, a file tens of thousands of nodes): the
# regular expressions run once per type, not once per node
_GATES: dict[str, int] = {}
_HERITAGE_TYPES: dict[str, bool] = {}


def _definition_gate(node_type: str) -> int:
    """Whether a node of this type can define: never, if its name is one (`_BY_NAME`), or, for a JS/TS variable
    declarator, if its value is a function or class."""
    gate = _GATES.get(node_type)
    if gate is None:
        if node_type in _WRAPPERS or node_type in _CALLS or _NOT_DEFINITION.search(node_type):
            gate = _NEVER
        elif syntax._DEFINITION.search(node_type):
            gate = _BY_NAME
        else:
            gate = _IF_VALUE_DEFINES if node_type == "variable_declarator" else _NEVER
        _GATES[node_type] = gate
    return gate


def _is_heritage(node_type: str) -> bool:
    found = _HERITAGE_TYPES.get(node_type)
    if found is None:
        found = _HERITAGE_TYPES[node_type] = _HERITAGE.search(node_type) is not None
    return found


def _kind(node_type: str, *, in_class: bool) -> str:
    for word, kind in (("interface", "interface"), ("struct", "struct"), ("enum", "enum"), ("trait", "trait"),
                       ("class", "class"), ("constructor", "method"), ("method", "method"),
                       ("function", "method" if in_class else "function"), ("module", "module"),
                       ("namespace", "module"), ("type", "type"), ("macro", "macro"), ("record", "class"),
                       ("union", "struct"), ("object", "class"), ("singleton", "class")):
        if word in node_type:
            return kind
    return "variable" if node_type in ("variable_declarator", "lexical_declaration") else "definition"


def _last_ident(text: str) -> tuple[str, str]:
    """(name, qualifier) of a callee's text: `this.store.save` -> ("save", "this.store")."""
    found = list(_IDENT.finditer(text))
    if not found:
        return "", ""
    last = found[-1]
    qualifier = text[: last.start()].rstrip(".:->?!& \n\t")
    return last.group(0), _cap(qualifier, MAX_QUALIFIER)


def _callee(node: Node) -> Node | None:
    for name in _CALLEE_FIELDS:
        child = node.child_by_field_name(name)
        if child is not None:
            return child
    return node.named_children[0] if node.named_children else None


class _TSWalker:
    def __init__(self, path: str, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.defs: list[Definition] = []
        self.refs: list[Reference] = []

    def _ref(self, node: Node, name: str, kind: str, container: str, qualifier: str = "", alias: str = "") -> None:
        if name and name not in ("this", "self", "super"):
            self.refs.append(Reference(line=node.start_point.row + 1, name=_cap(name, MAX_NAME), kind=kind,
                                       qualifier=qualifier, container=_cap(container, MAX_QUALNAME), alias=alias))

    def walk(self, root: Node) -> None:
        # (node, container qualname, container is class-like)
        stack: list[tuple[Node, str, bool]] = [(root, "", False)]
        while stack:
            node, container, in_class = stack.pop()
            child_container, child_in_class = container, in_class
            node_type = node.type
            if node_type in _IMPORTS:
                self._import(node, container)
                continue
            if node_type in _CALLS:
                callee = _callee(node)
                if callee is not None:
                    name, qualifier = _last_ident(syntax._text(callee))
                    self._ref(node, name, "call", container, qualifier)
            elif node_type in _TYPE_USES and not _is_declared_name(node):
                self._ref(node, syntax._text(node), "reference", container)
            elif _is_heritage(node_type) and container:
                for leaf in syntax._walk(node):
                    if leaf.type in ("identifier", "type_identifier", "constant", "name", "scoped_identifier"):
                        name, qualifier = _last_ident(syntax._text(leaf))
                        self._ref(leaf, name, "inherit", container, qualifier)
                continue
            definition = self._definition(node, container, in_class) if _definition_gate(node_type) else None
            if definition is not None:
                child_container = definition.qualname
                child_in_class = definition.kind in ("class", "interface", "struct", "enum", "trait", "module") \
                    or node.type in _CONTAINERS_ONLY
                if node.type == "impl_item":
                    trait = node.child_by_field_name("trait")
                    if trait is not None:
                        self._ref(trait, _last_ident(syntax._text(trait))[0], "inherit", definition.qualname)
            for child in reversed(node.named_children):
                stack.append((child, child_container, child_in_class))

    def _definition(self, node: Node, container: str, in_class: bool) -> Definition | None:
        gate = _definition_gate(node.type)
        if gate == _NEVER:
            return None
        if gate == _IF_VALUE_DEFINES:
            value = node.child_by_field_name("value")
            if value is None or re.search(r"function|arrow|class", value.type or "") is None:
                return None
        if node.type in ("function_type", "type_arguments", "method_signature") and not container:
            return None
        name = syntax._name(node)
        if not name or not _IDENT.fullmatch(name.split("::")[-1]):
            return None
        receiver = node.child_by_field_name("receiver") if node.type == "method_declaration" else None
        recv = next((syntax._text(n) for n in syntax._walk(receiver) if n.type == "type_identifier"), "") \
            if receiver is not None else ""
        qual = f"{recv}.{name}" if recv else (f"{container}.{name}" if container else name)
        start, end = node.start_point.row + 1, syntax._last_line(node)
        signature = next((ln.strip() for ln in self.lines[start - 1:end] if ln.strip()), "")
        definition = Definition(start_line=start, end_line=end, qualname=_cap(qual, MAX_QUALNAME),
                                name=_cap(name, MAX_NAME), kind=_kind(node.type, in_class=in_class or bool(recv)),
                                signature=_cap(signature, MAX_SIGNATURE))
        if node.type not in _CONTAINERS_ONLY:
            self.defs.append(definition)
        return definition

    def _import(self, node: Node, container: str) -> None:
        text = syntax._text(node)
        source = _STRING.search(text)
        if source is not None:  # JS/TS `from './x'`, Go "path", C `#include "x.h"`
            module = source.group(1)
            if module.startswith("."):
                module = posixpath.normpath(posixpath.join(posixpath.dirname(self.path), module))
            bound = [syntax._text(n) for n in syntax._walk(node)
                     if n.type in ("import_specifier", "namespace_import", "identifier")
                     and n.parent is not None and n.parent.type in ("import_clause", "named_imports",
                                                                     "import_specifier", "namespace_import")]
            names = _specifiers(node)
            if names:
                for name, alias in names:
                    self._ref(node, name, "import", container, qualifier=module, alias=alias)
            else:
                last = module.rstrip("/").rsplit("/", 1)[-1]
                last = posixpath.splitext(last)[0] if "." in last else last
                self._ref(node, last, "import", container, qualifier=module, alias=bound[0] if bound else last)
            return
        # Java `import a.b.C;`, Rust `use a::b::C;`, C# `using A.B;`, PHP `use A\\B;`
        path = re.sub(r"^\s*(import|use|using|static|pub|namespace)\s+", "", text).rstrip(";").strip()
        path = re.sub(r"^(static|pub)\s+", "", path)
        parts = [p for p in re.split(r"\.|::|\\", path) if p]
        if not parts:
            return
        self._ref(node, parts[-1].strip("{} *"), "import", container, qualifier=_cap(".".join(parts[:-1]),
                                                                                     MAX_QUALIFIER),
                  alias=parts[-1].strip("{} *"))


def _specifiers(node: Node) -> list[tuple[str, str]]:
    """JS/TS `import { a as b, c } from ...` -> [(a, b), (c, c)]; `import x from ...` -> [("default", x)]."""
    out: list[tuple[str, str]] = []
    for n in syntax._walk(node):
        if n.type == "import_specifier":
            name = n.child_by_field_name("name")
            alias = n.child_by_field_name("alias")
            if name is not None:
                out.append((syntax._text(name), syntax._text(alias) if alias is not None else syntax._text(name)))
        elif n.type == "import_clause":
            for child in n.named_children:
                if child.type == "identifier":
                    out.append(("default", syntax._text(child)))
    return out


def _is_declared_name(node: Node) -> bool:
    """A type identifier that names the definition it sits in (`class Wallet`), not a use of a type."""
    parent = node.parent
    return parent is not None and parent.child_by_field_name("name") is not None \
        and parent.child_by_field_name("name").id == node.id


def _tree_sitter(*, path: str, text: str, lang: str) -> FileSymbols:
    parser = syntax.parser_for(lang)
    if parser is None:
        return FileSymbols()
    tree = parser.parse(text.encode("utf-8"))
    walker = _TSWalker(path, text.split("\n"))
    walker.walk(tree.root_node)
    return _facts(walker.defs, walker.refs)
