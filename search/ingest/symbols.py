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
from typing import TYPE_CHECKING

from search.engine.code_graph import module_of
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


@dataclass(frozen=True, order=True)
class Definition:
    """A named definition; lines 1-based and inclusive, decorators and the attached doc comment included."""

    start_line: int
    end_line: int
    qualname: str  # `Wallet.deduct` (containers joined by dots, within the file)
    name: str  # the last part: what a reference uses
    kind: str  # function | method | class | interface | struct | enum | trait | type | module | variable | ...
    signature: str = ""


@dataclass(frozen=True, order=True)
class Reference:
    """One use of a name. `qualifier`: what it was reached through (`self`, `ledger`, the module of an import);
    `container`: the qualname of the definition it sits in ("" at file level); `alias`: for an import, the name it
    binds in the file."""

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
        h = hashlib.sha256()
        for d in sorted(self.definitions):
            h.update(repr((d.start_line, d.end_line, d.qualname, d.name, d.kind, d.signature)).encode())
        h.update(b"|")
        for r in sorted(self.references):
            h.update(repr((r.line, r.name, r.kind, r.qualifier, r.container, r.alias)).encode())
        return h.hexdigest()  # the fields spelled out: dataclasses.astuple deep-copies each, several times slower


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
    try:
        return _cap(ast.unparse(node), MAX_QUALIFIER)
    except (ValueError, TypeError, AttributeError):
        return ""


class _PyVisitor(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.defs: list[Definition] = []
        self.refs: list[Reference] = []
        self.stack: list[tuple[str, str]] = []  # (qualname, kind) of the enclosing definitions
        self.locals: list[set[str]] = []  # a function's parameters and assigned names, innermost last

    @property
    def container(self) -> str:
        return self.stack[-1][0] if self.stack else ""

    def _qual(self, name: str) -> str:
        return f"{self.container}.{name}" if self.container else name

    def _ref(self, node: ast.AST, name: str, kind: str, qualifier: str = "", alias: str = "") -> None:
        if not name:
            return
        self.refs.append(Reference(line=getattr(node, "lineno", 1), name=_cap(name, MAX_NAME), kind=kind,
                                   qualifier=qualifier, container=_cap(self.container, MAX_QUALNAME), alias=alias))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        in_class = bool(self.stack) and self.stack[-1][1] == "class"
        prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        returns = f" -> {_unparse(node.returns)}" if node.returns is not None else ""
        signature = f"{prefix} {node.name}({_unparse(node.args)}){returns}"
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        qual = self._qual(node.name)
        self.defs.append(Definition(start_line=start, end_line=node.end_lineno or node.lineno,
                                    qualname=_cap(qual, MAX_QUALNAME), name=_cap(node.name, MAX_NAME),
                                    kind="method" if in_class else "function",
                                    signature=_cap(signature, MAX_SIGNATURE)))
        for deco in node.decorator_list:
            self.visit(deco)
        for default in [*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]]:
            self.visit(default)
        for ann in [a.annotation for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
                    if a.annotation is not None]:
            self.visit(ann)
        if node.returns is not None:
            self.visit(node.returns)
        names = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        names |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
        names |= _assigned(node.body)
        self.stack.append((qual, "function"))
        self.locals.append(names)
        for stmt in node.body:
            self.visit(stmt)
        self.locals.pop()
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = ", ".join(_unparse(b) for b in node.bases)
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        qual = self._qual(node.name)
        self.defs.append(Definition(start_line=start, end_line=node.end_lineno or node.lineno,
                                    qualname=_cap(qual, MAX_QUALNAME), name=_cap(node.name, MAX_NAME), kind="class",
                                    signature=_cap(f"class {node.name}({bases})" if bases else f"class {node.name}",
                                                   MAX_SIGNATURE)))
        for deco in node.decorator_list:
            self.visit(deco)
        for kw in node.keywords:
            self.visit(kw.value)
        self.stack.append((qual, "class"))
        for base in node.bases:
            if isinstance(base, ast.Name):
                self._ref(base, base.id, "inherit")
            elif isinstance(base, ast.Attribute):
                self._ref(base, base.attr, "inherit", qualifier=_unparse(base.value))
            else:
                self.visit(base)
        for stmt in node.body:
            self.visit(stmt)
        self.stack.pop()

    def _assign_targets(self, targets: list[ast.expr], node: ast.stmt) -> None:
        """Module- and class-level names assigned are definitions (constants, settings, class attributes)."""
        if self.stack and self.stack[-1][1] == "function":
            return
        for target in targets:
            for name_node in ast.walk(target):
                if isinstance(name_node, ast.Name) and isinstance(name_node.ctx, ast.Store):
                    self.defs.append(Definition(
                        start_line=node.lineno, end_line=node.end_lineno or node.lineno,
                        qualname=_cap(self._qual(name_node.id), MAX_QUALNAME), name=_cap(name_node.id, MAX_NAME),
                        kind="variable", signature=_cap(_first_line(_unparse(node)), MAX_SIGNATURE)))

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign_targets(node.targets, node)
        self.visit(node.value)
        for target in node.targets:
            if not isinstance(target, ast.Name):
                self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign_targets([node.target], node)
        self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            module, _, last = alias.name.rpartition(".")
            bound = alias.asname or alias.name.split(".")[0]
            self._ref(node, last, "import", qualifier=module, alias=bound)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = _python_module(self.path, node.level, node.module)
        for alias in node.names:
            if alias.name == "*":
                continue
            self._ref(node, alias.name, "import", qualifier=module, alias=alias.asname or alias.name)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            if not self._is_local(func.id):
                self._ref(func, func.id, "call")
        elif isinstance(func, ast.Attribute):
            self._ref(func, func.attr, "call", qualifier=_unparse(func.value))
            self.visit(func.value)
        else:
            self.visit(func)
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            self.visit(kw.value)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and not self._is_local(node.id):
            self._ref(node, node.id, "reference")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            self._ref(node, node.attr, "reference", qualifier=_unparse(node.value))
        self.visit(node.value)

    def _is_local(self, name: str) -> bool:
        return name in _SKIP_NAMES or any(name in scope for scope in self.locals)


def _assigned(body: list[ast.stmt]) -> set[str]:
    """Names a function body binds (assignments, loops, with, except, imports, comprehensions' outer targets),
    nested definitions' bodies left out."""
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


def _python(*, path: str, text: str) -> FileSymbols:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return FileSymbols()
    visitor = _PyVisitor(path)
    try:
        visitor.visit(tree)
    except RecursionError:
        return FileSymbols()
    return _facts(visitor.defs, visitor.refs)


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
            if node.type in _IMPORTS:
                self._import(node, container)
                continue
            if node.type in _CALLS:
                callee = _callee(node)
                if callee is not None:
                    name, qualifier = _last_ident(syntax._text(callee))
                    self._ref(node, name, "call", container, qualifier)
            elif node.type in _TYPE_USES and not _is_declared_name(node):
                self._ref(node, syntax._text(node), "reference", container)
            elif _HERITAGE.search(node.type) and container:
                for leaf in syntax._walk(node):
                    if leaf.type in ("identifier", "type_identifier", "constant", "name", "scoped_identifier"):
                        name, qualifier = _last_ident(syntax._text(leaf))
                        self._ref(leaf, name, "inherit", container, qualifier)
                continue
            definition = self._definition(node, container, in_class)
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
        if node.type in ("export_statement", "decorated_definition", "attribute_item", "template_declaration",
                         "lexical_declaration", "variable_declaration", "program", "source_file",
                         "translation_unit"):
            return None
        is_def = bool(syntax._DEFINITION.search(node.type)) or (
            node.type == "variable_declarator" and node.child_by_field_name("value") is not None
            and re.search(r"function|arrow|class", node.child_by_field_name("value").type or "") is not None)
        if not is_def or node.type in _CALLS or _NOT_DEFINITION.search(node.type):
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
