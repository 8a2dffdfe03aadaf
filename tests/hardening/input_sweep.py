"""The input-class sweep: every API operation in the OpenAPI schema and every page form, sent the
inputs a hostile probe used, class by class.

Why a generator of its own and not only schemathesis: schemathesis draws values that fit or break a JSON
Schema, so it rarely sends what broke the platform in practice (a body a thousand levels deep, a "\\u0000"
inside a list item, `[[:foo:]]` as a path glob, `²` as a page number, a NUL in `Idempotency-Key`, a body
past the size limit, text/plain). Here each class is spelled out and put into every place it can go:
every string field (top level, nested objects, list items), every integer field, every query parameter,
path parameter and header, every page form field, every field of the page forms that write (form bodies), and
every string argument of every MCP tool (JSON-RPC over POST /mcp). `tests/hardening/test_input_sweep.py` runs it in
`make test`; `bench/fuzz_inputs.py` prints the count per class for the README.

Each request runs in a rolled-back savepoint (fuzz_world.InProcessRequests). A response must never be a 5xx;
an API error must be JSON with `code` and `detail`; a request refused with a 4xx must have written nothing
and charged nothing (row counts and the balance are compared inside the savepoint, before the rollback).
"""
from __future__ import annotations

import io
import json
import tarfile
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

CLASSES = ("nesting", "characters", "patterns", "numbers", "size", "content_type", "unknown_field", "headers",
           "path_params", "page_forms", "form_bodies", "mcp_arguments")
BAD_TEXT = ["\x00", "a\x00b", "\ud800", "x\udfffy"]
PATTERNS = ["[[:foo:]]", "[[.x.]]*", "[z-a]", "*" * 300, "a*" * 40, "(a+)+$", "%_\\", "**/" * 30, "[!]]", "?" * 200]
NUMBERS: list[Any] = [10**30, -(10**30), 2**63, "１２", "²", "①", "١٢", 1e308, True, 1.5, "5"]
SIZE_LIMIT = 20_000  # the sweep runs with DATA_UPLOAD_MAX_MEMORY_SIZE at this, so an oversized body is cheap
WRONG_TYPES = ["text/plain", "application/xml", "application/x-www-form-urlencoded"]
PAGE_FORMS: list[tuple[str, str, dict[str, str]]] = [
    ("GET", "/search/", {"project": "{slug}", "q": "wallet", "repo": "shop", "path": "billing/*", "lang": "python"}),
    ("GET", "/rules/", {"project": "{slug}", "q": "grapple", "book": "", "render": "1"}),
    ("GET", "/rules/stream", {"project": "{slug}", "q": "grapple", "book": ""}),
    ("POST", "/search/feedback", {"session_id": "{session_id}", "chunk_id": "{chunk_id}", "relevance": "2"}),
    ("POST", "/people/", {"query": "backend engineers", "salary_max": "100", "preferred_locations": "pune",
                          "open_to_work_only": "yes"}),
    ("GET", "/people/", {"search_id": "{search_id}"}),
    ("GET", "/people/discover", {"offset": "20"}),
]


# Page forms that write (POST bodies, form-encoded or multipart): every field gets each BAD_TEXT value, which no
# store can hold, so each must be refused (by the input guard, config/middleware.py) before the view runs.
WRITE_FORMS: list[tuple[str, dict[str, str]]] = [
    ("/projects/new", {"name": "Probe", "slug": "probe"}),
    ("/projects/{slug}/settings/rename", {"name": "Renamed"}),
    ("/projects/{slug}/members/add", {"email": "someone@example.com", "role": "viewer"}),
    ("/projects/{slug}/datasets/new", {"name": "n", "kind": "code", "description": "d"}),
    ("/projects/{slug}/datasets/{dataset_id}/documents/delete", {"path": "x.py"}),
    ("/projects/{slug}/datasets/{dataset_id}/source", {"type": "git", "url": "https://93.184.216.34/o/r.git",
                                                       "ref": "main"}),
    ("/account/keys", {"name": "probe", "scopes": "query"}),
    ("/search/feedback", {"session_id": "{session_id}", "chunk_id": "{chunk_id}", "relevance": "2"}),
    ("/people/", {"query": "backend engineers"}),
]


@dataclass
class Case:
    klass: str
    method: str
    path: str
    body: bytes | None = None
    content_type: str | None = None
    query: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    page: bool = False
    must_refuse: bool = True  # a 2xx is a failure (the input is invalid by construction)
    mcp: bool = False  # a JSON-RPC tools/call: refused means a tool error with the API's 400 body

    def label(self) -> str:
        return f"{self.klass}: {self.method} {self.path} {self.query or ''} {(self.body or b'')[:80]!r}"


def _resolve(ref_or_schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in ref_or_schema:
        name = ref_or_schema["$ref"].rsplit("/", 1)[-1]
        ref_or_schema = spec["components"]["schemas"][name]
    return ref_or_schema


def sample(schema: dict[str, Any], spec: dict[str, Any], depth: int = 0) -> Any:
    """A plausible value for a schema: every property filled, so each one can be spoiled in turn."""
    schema = _resolve(schema, spec)
    if "oneOf" in schema or "anyOf" in schema or "allOf" in schema:
        return sample((schema.get("oneOf") or schema.get("anyOf") or schema.get("allOf"))[0], spec, depth)
    if "enum" in schema:
        return next((v for v in schema["enum"] if v not in ("", None)), schema["enum"][0])
    kind = schema.get("type", "object")
    if kind == "object" and depth < 4:
        return {name: sample(prop, spec, depth + 1) for name, prop in schema.get("properties", {}).items()
                if not prop.get("readOnly")}
    if kind == "array":
        return [sample(schema.get("items", {"type": "string"}), spec, depth + 1)]
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return True
    if schema.get("format") == "uuid":
        return "00000000-0000-0000-0000-000000000000"
    return "x"


def leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, leaf) for every string and integer in a sampled body."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))
    else:
        yield path, value


def replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = replace(value[path[0]], path[1:], new)
    return copy


def _dump(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=True).encode()


def operation_cases(spec: dict[str, Any], fill: dict[str, Any]) -> Iterator[Case]:
    """Every class of bad input for every operation of the schema (path parameters filled from `fill`)."""
    for raw_path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            params = op.get("parameters", [])
            path_params = {p["name"]: p for p in params if p["in"] == "path"}
            path = raw_path
            for name in path_params:
                path = path.replace("{" + name + "}", str(fill.get(name, "1")))
            m = method.upper()
            good_query = {p["name"]: sample(p.get("schema", {}), spec) for p in params if p["in"] == "query"}
            # path parameters: huge, Unicode and NUL ids
            for name in path_params:
                for bad in ("9" * 30, "１２", "%00", "%ED%A0%80", "x" * 300):
                    yield Case("path_params", m, _fill(raw_path, fill, name, bad), query=good_query)
            # query parameters
            for name, p in ((p["name"], p) for p in params if p["in"] == "query"):
                for bad in BAD_TEXT[:2]:
                    yield Case("characters", m, path, query={**good_query, name: bad})
                kind = _resolve(p.get("schema", {}), spec).get("type")
                if kind == "integer":  # a query string is text: only "5" (ASCII digits, in range) is valid
                    for bad in NUMBERS:
                        yield Case("numbers", m, path, query={**good_query, name: str(bad)}, must_refuse=bad != "5")
            # headers: every operation, and the idempotency header where one is declared
            for bad in BAD_TEXT:
                yield Case("headers", m, path, query=good_query, headers={"X-Probe": bad})
            for p in params:
                if p["in"] == "header":
                    for bad in BAD_TEXT:
                        yield Case("headers", m, path, query=good_query, headers={p["name"]: bad})
            content = (op.get("requestBody") or {}).get("content", {})
            if "application/json" not in content:
                continue
            base = sample(content["application/json"]["schema"], spec)
            ok = _dump(base)
            yield Case("nesting", m, path, body=b"[" * 1000 + b"]" * 1000, content_type="application/json")
            yield Case("nesting", m, path, body=b'{"a":' * 200 + b"1" + b"}" * 200, content_type="application/json")
            for leaf_path, leaf in leaves(base):
                if isinstance(leaf, str):
                    for bad in BAD_TEXT:
                        yield Case("characters", m, path, body=_dump(replace(base, leaf_path, leaf + bad)),
                                   content_type="application/json")
                    for pat in PATTERNS:
                        yield Case("patterns", m, path, body=_dump(replace(base, leaf_path, pat)),
                                   content_type="application/json", must_refuse=False)
                if isinstance(leaf, int) and not isinstance(leaf, bool):
                    for bad in NUMBERS:  # in JSON an integer field takes a JSON integer in range, nothing else
                        yield Case("numbers", m, path, body=_dump(replace(base, leaf_path, bad)),
                                   content_type="application/json")
            if isinstance(base, dict):
                yield Case("characters", m, path, body=_dump({**base, "k\x00": 1}), content_type="application/json")
                yield Case("unknown_field", m, path, body=_dump({**base, "zz_unknown": 1}),
                           content_type="application/json")
            yield Case("size", m, path, body=_dump({"pad": "x" * (SIZE_LIMIT + 10)}), content_type="application/json")
            for ctype in WRONG_TYPES:
                yield Case("content_type", m, path, body=ok, content_type=ctype)


def _fill(raw_path: str, fill: dict[str, Any], bad_name: str, bad: str) -> str:
    path = raw_path.replace("{" + bad_name + "}", bad)
    for name, value in fill.items():
        path = path.replace("{" + name + "}", str(value))
    return path


def page_cases(fill: dict[str, Any]) -> Iterator[Case]:
    """Every page form field, spoiled with each class (the pages parse their own forms)."""
    for method, path, form in PAGE_FORMS:
        good = {k: v.format(**fill) for k, v in form.items()}
        for name in good:
            for bad in [*BAD_TEXT[:2], *PATTERNS[:4], *[str(n) for n in NUMBERS]]:
                yield Case("page_forms", method, path, query={**good, name: bad}, page=True, must_refuse=False)
    for bad in ("9" * 30, "１２"):
        yield Case("page_forms", "GET", f"/rules/chunk/{bad}", page=True, must_refuse=False)
    yield Case("page_forms", "GET", f"/people/p/{fill['person_id']}", query={"search_id": "\x00"}, page=True)


def form_cases(fill: dict[str, Any]) -> Iterator[Case]:
    """Every field of every writing page form, and a path parameter of a form URL, with text no store holds."""
    for path, form in WRITE_FORMS:
        url = path.format(**fill)
        good = {k: v.format(**fill) for k, v in form.items()}
        for name in good:
            # NUL only: a form body is bytes, and a lone surrogate has no UTF-8 bytes (a browser's escapes of one
            # decode to replacement characters, which any store holds)
            for bad in BAD_TEXT[:2]:
                yield Case("form_bodies", "POST", url, query={**good, name: good[name] + bad}, page=True)
            yield Case("form_bodies", "POST", url, query={**good, name + "\x00": "1"}, page=True)
    yield Case("form_bodies", "POST", f"/projects/{fill['slug']}/datasets/%00/documents/delete", query={"path": "x"},
               page=True)


def mcp_cases(fill: dict[str, Any]) -> Iterator[Case]:
    """Every string argument of every MCP tool (and a key of its arguments) with text no store holds."""
    from search.edge.mcp.server import mcp

    filled = {"project": fill["slug"], "search_session_id": str(fill["session_id"]), "chunk_id": fill["chunk_id"]}
    for tool in mcp._tool_manager.list_tools():
        props = tool.parameters.get("properties", {})
        base = {name: filled.get(name, sample(prop, {})) for name, prop in props.items()}
        for name, value in base.items():
            if not isinstance(value, str):
                continue
            for bad in BAD_TEXT:
                args = {**base, name: value + bad}
                yield Case("mcp_arguments", "POST", "/mcp", body=_dump(_rpc(tool.name, args)),
                           content_type="application/json", mcp=True)
        yield Case("mcp_arguments", "POST", "/mcp", body=_dump(_rpc(tool.name, {**base, "k\x00": 1})),
                   content_type="application/json", mcp=True)


def _rpc(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def _mcp_refused(body: bytes) -> bool:
    """A tool error carrying the API's 400 (invalid_character), as every tool answers text no store holds; or a
    JSON-RPC error (a lone surrogate is not valid JSON text for the protocol's parser: -32700)."""
    try:
        message = json.loads(body)
        if "error" in message:
            return bool(message["error"].get("code")) and bool(message["error"].get("message"))
        result = message["result"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    content = result.get("structuredContent") or {}
    return bool(result.get("isError")) and content.get("status") == 400 and content.get("code") == "invalid_character"


@dataclass
class SweepReport:
    sent: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    slowest_ms: float = 0.0
    slowest: str = ""


def _state(user_id: int) -> tuple:
    from accounts.models import ApiKey, User
    from credits.ledger import get_balance
    from credits.models import LedgerEntry
    from people.models import Search
    from projects.models import Membership, Project
    from search.models import Dataset, Feedback, IngestJob, ProjectShare, QuerySession

    return (get_balance(user=User.objects.get(pk=user_id)), LedgerEntry.objects.count(), ApiKey.objects.count(),
            Dataset.objects.count(), Project.objects.count(), Membership.objects.count(),
            ProjectShare.objects.count(), IngestJob.objects.count(), QuerySession.objects.count(),
            Search.objects.count(), Feedback.objects.count())


def run_sweep(*, secret: str, user_id: int, spec: dict[str, Any], fill: dict[str, Any],
              page_client: Any, limit_per_class: int | None = None) -> SweepReport:
    """Send every case through the real app; return counts per class and the failures found."""
    from rest_framework.test import APIClient

    from tests.hardening.fuzz_world import InProcessRequests

    api = APIClient(raise_request_exception=False)  # a 500 is a finding to count, not an exception to stop at
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    page_client.raise_request_exception = False
    report = SweepReport()
    cases = [*operation_cases(spec, fill), *page_cases(fill), *form_cases(fill), *mcp_cases(fill)]
    for case in cases:
        if limit_per_class and report.sent[case.klass] >= limit_per_class:
            continue
        report.sent[case.klass] += 1
        with InProcessRequests():
            before = _state(user_id)
            client = page_client if case.page else api
            extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in case.headers.items()}
            t0 = time.perf_counter()
            if case.mcp:
                extra["HTTP_ACCEPT"] = "application/json, text/event-stream"
            if case.method == "GET":
                resp = client.get(case.path, case.query, **extra)
            elif case.page:
                resp = client.post(case.path, case.query, **extra)
            else:
                url = case.path + ("?" + "&".join(f"{k}={v}" for k, v in case.query.items()) if case.query else "")
                resp = client.generic(case.method, url, case.body or b"", content_type=case.content_type or
                                      "application/json", **extra)
            body = b"".join(resp.streaming_content) if getattr(resp, "streaming", False) else resp.content
            ms = (time.perf_counter() - t0) * 1000
            if ms > report.slowest_ms:
                report.slowest_ms, report.slowest = ms, case.label()[:160]
            status = resp.status_code
            mcp_refused = case.mcp and status in (200, 400) and _mcp_refused(body)
            if mcp_refused:
                status = 400  # the API's 400 as a tool error, or a JSON-RPC error: a refusal either way
            if status >= 500 and not (status == 503 and b'"statement_timeout"' in body):
                report.failures.append(f"{status} {case.label()} -> {body[:200]!r}")
            elif status >= 400:
                report.refused[case.klass] += 1
                if not case.page and not mcp_refused:
                    try:
                        err = json.loads(body)
                        assert err["code"] and err["detail"]
                    except Exception:  # noqa: BLE001 - any non-JSON error is a finding
                        report.failures.append(f"non-JSON {status} {case.label()} -> {body[:120]!r}")
                if _state(user_id) != before:
                    report.failures.append(f"wrote or charged on {status}: {case.label()}")
            elif case.must_refuse and status < 300:
                report.failures.append(f"accepted {status}: {case.label()} -> {body[:120]!r}")
    return report


# --------------------------------------------------------------------------- hostile files
# The hostile PDFs (tests/hardening/hostile_pdfs.py, each at most 1 MB) as the bodies of every operation that takes
# a file: each alone as an uploaded file, all together in a zip and in a tar.gz (a code and a rules dataset), and each
# as a pushed document's text. Unlike the classes above, what is accepted must then be read: the job runs (as the
# worker runs it) inside the case's rolled-back savepoint, and every file must end read or refused by name.
FILE_CLASS = "hostile_files"


@dataclass
class FileCase:
    label: str
    method: str
    path: str
    names: dict[str, str]  # file name in the upload -> what its reader must do: "refuse", "read" or "either"
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # multipart field -> (file name, bytes)
    fields: dict[str, str] = field(default_factory=dict)
    json_body: Any = None


@dataclass
class FileOutcome:
    label: str
    status: int
    job_status: str
    seconds: float
    read: int
    refused: dict[str, str]  # file name -> the reason the job gave


def _pdf_name(case: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in case.lower()).strip("-").replace("--", "-") + ".pdf"


def hostile_pdf_files() -> dict[str, tuple[bytes, str]]:
    """file name -> (the hostile PDF's bytes, what a reader must do with it)."""
    from tests.hardening import hostile_pdfs as hp

    return {_pdf_name(case): (build(), expected) for case, (build, expected) in hp.CASES.items()}


def _archive(kind: str, files: dict[str, bytes]) -> bytes:
    """The files under `book/` in a zip or a tar, stored ("zip", "tar": the archive check passes them, so the job
    reads every PDF) or compressed ("zip-deflated", "tar.gz": deflate streams of repeated bytes deflate again, past
    the upload's compression-ratio limit, so the check refuses them before anything is stored)."""
    buf = io.BytesIO()
    if kind.startswith("zip"):
        method = zipfile.ZIP_DEFLATED if kind == "zip-deflated" else zipfile.ZIP_STORED
        with zipfile.ZipFile(buf, "w", method) as zf:
            for name, data in files.items():
                zf.writestr(f"book/{name}", data)
    else:
        with tarfile.open(fileobj=buf, mode="w:gz" if kind == "tar.gz" else "w") as tf:
            for name, data in files.items():
                info = tarfile.TarInfo(f"book/{name}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


ARCHIVES = (("zip", "hostile.zip", ""), ("tar", "hostile.tar", " (rules)"),
            ("zip-deflated", "hostile-deflated.zip", ""), ("tar.gz", "hostile.tar.gz", " (rules)"))


def file_cases(spec: dict[str, Any], fill: dict[str, Any], *, rules_dataset_id: int,
               pdfs: dict[str, tuple[bytes, str]]) -> Iterator[FileCase]:
    """Every operation of the schema whose body is a file (multipart with a binary field) gets each hostile PDF
    alone and all of them in each of ARCHIVES (a zip into `fill`'s dataset, a tar into the rules dataset; stored, so
    they are read, and compressed, so the ratio check refuses them); the push operation (a JSON body of documents)
    gets each as a document's text."""
    expect = {name: expected for name, (_, expected) in pdfs.items()}
    blobs = {name: data for name, (data, _) in pdfs.items()}
    for raw_path, item in spec["paths"].items():
        for method, op in item.items():
            content = (op.get("requestBody") or {}).get("content", {})
            if "multipart/form-data" in content:
                props = _resolve(content["multipart/form-data"]["schema"], spec).get("properties", {})
                binary = [n for n, p in props.items() if _resolve(p, spec).get("format") == "binary"]
                for prop in binary:
                    path = _filled(raw_path, fill)
                    for name, data in blobs.items():
                        yield FileCase(f"{op['operationId']}: {name}", method.upper(), path, {name: expect[name]},
                                       files={prop: (name, data)}, fields={"mode": "merge"})
                    rules_path = _filled(raw_path, {**fill, "dataset_id": rules_dataset_id})
                    for kind, filename, target in ARCHIVES:  # the rules dataset reads its upload as one book
                        yield FileCase(f"{op['operationId']}: all in a {kind}{target}", method.upper(),
                                       rules_path if target else path, expect,
                                       files={prop: (filename, _archive(kind, blobs))},
                                       fields={"book": "hostile"} if target else {"mode": "merge"})
            elif op.get("operationId") == "documents_push":
                path = _filled(raw_path, fill)
                for name, data in blobs.items():
                    # a push is text: the PDF's bytes as Latin-1 characters (what a client that read the file as
                    # text would send); its reader sees %PDF and must refuse or read it like an uploaded one
                    doc = {"external_id": name, "path": f"pushed/{name}", "text": data.decode("latin-1")}
                    yield FileCase(f"documents_push: {name}", method.upper(), path, {name: "either"},
                                   json_body={"documents": [doc]})


def _filled(raw_path: str, fill: dict[str, Any]) -> str:
    for name, value in fill.items():
        raw_path = raw_path.replace("{" + name + "}", str(value))
    return raw_path


def _content_state(dataset_ids: list[int]) -> tuple:
    from search.models import Chunk, Document, DocumentOriginal, StagedContent

    return (Document.objects.filter(dataset_id__in=dataset_ids).count(),
            Chunk.objects.filter(dataset_id__in=dataset_ids).count(),
            DocumentOriginal.objects.filter(document__dataset_id__in=dataset_ids).count(),
            StagedContent.objects.count())


def run_file_sweep(*, secret: str, user_id: int, spec: dict[str, Any], fill: dict[str, Any],
                   rules_dataset_id: int, pdfs: dict[str, tuple[bytes, str]],
                   seconds_per_file: float) -> tuple[SweepReport, list[FileOutcome]]:
    """Send every hostile-file case through the real app, run the job it starts, and judge what it left: no 5xx;
    a refused request is a JSON error that wrote and charged nothing; an accepted one ends with every file read
    (a document with chunks) or refused by name with a reason, never charged, no document without chunks, within
    `seconds_per_file` per file."""
    from rest_framework.test import APIClient

    from search.ingest.jobs import run_job
    from search.models import Chunk, Document, IngestJob
    from tests.hardening.fuzz_world import InProcessRequests

    api = APIClient(raise_request_exception=False)
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    report, outcomes = SweepReport(), []
    datasets = [int(fill["dataset_id"]), rules_dataset_id]
    for case in file_cases(spec, fill, rules_dataset_id=rules_dataset_id, pdfs=pdfs):
        report.sent[FILE_CLASS] += 1
        with InProcessRequests():
            before, rows_before = _state(user_id), _content_state(datasets)
            t0 = time.perf_counter()
            if case.files:
                files = {}
                for prop, (name, data) in case.files.items():
                    f = io.BytesIO(data)
                    f.name = name
                    files[prop] = f
                resp = api.generic(case.method, case.path, **_multipart({**case.fields, **files}))
            else:
                resp = api.generic(case.method, case.path, _dump(case.json_body), content_type="application/json")
            status = resp.status_code
            if status >= 500:
                report.failures.append(f"{status} {case.label} -> {resp.content[:200]!r}")
                continue
            if status >= 400:
                report.refused[FILE_CLASS] += 1
                err = resp.json()
                if not (err.get("code") and err.get("detail")):
                    report.failures.append(f"non-JSON {status} {case.label}")
                if _state(user_id) != before or _content_state(datasets) != rows_before:
                    report.failures.append(f"wrote or charged on {status}: {case.label}")
                outcomes.append(FileOutcome(case.label, status, "", time.perf_counter() - t0, 0,
                                            {n: f"{status} {err.get('code')}" for n in case.names}))
                continue
            job = IngestJob.objects.get(pk=resp.json()["id"])
            try:
                run_job(job=job)
            except Exception:  # noqa: BLE001 - a failed job is judged by its row, as the worker leaves it
                pass
            job.refresh_from_db()
            seconds = time.perf_counter() - t0
            outcomes.append(_judge(case=case, job=job, seconds=seconds, report=report, datasets=datasets,
                                   rows_before=rows_before, charged=_state(user_id)[:2] != before[:2],
                                   limit_s=seconds_per_file * len(case.names) + 30,
                                   documents=Document.objects, chunks=Chunk.objects))
    return report, outcomes


def _multipart(form: dict[str, Any]) -> dict[str, Any]:
    from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

    return {"data": encode_multipart(BOUNDARY, form), "content_type": MULTIPART_CONTENT}


def _judge(*, case: FileCase, job: Any, seconds: float, report: SweepReport, datasets: list[int],
           rows_before: tuple, charged: bool, limit_s: float, documents: Any, chunks: Any) -> FileOutcome:
    """One accepted case's job: every file read or refused by name, nothing half-written, nothing charged."""
    from search.models import StagedContent

    skipped = {PurePath(s["path"]).name: s["reason"] for s in (job.result or {}).get("skipped", [])}
    written = {PurePath(p).name: pk for pk, p in documents.filter(dataset_id__in=datasets).values_list("pk", "path")
               if PurePath(p).name in case.names}
    read = 0
    if job.status not in ("done", "failed"):
        report.failures.append(f"job {job.status}: {case.label}")
    if job.status == "failed":  # a whole job refused (a quota, a broken archive): it wrote nothing, and says why
        if not job.error or _content_state(datasets) != rows_before:
            report.failures.append(f"failed job wrote rows or gave no reason ({job.error!r}): {case.label}")
        skipped = {n: f"job failed: {job.error}" for n in case.names}
    for name, expected in case.names.items():
        if job.status == "failed":
            continue
        if name in written:
            read += 1
            if expected == "refuse":
                report.failures.append(f"read a PDF that must be refused ({name}): {case.label}")
            if not chunks.filter(document_id=written[name]).exists():
                report.failures.append(f"a document without chunks ({name}): {case.label}")
        elif not skipped.get(name, "").strip():
            report.failures.append(f"{name} neither read nor refused with a reason: {case.label} {job.result}")
        elif expected == "read":
            report.failures.append(f"refused a PDF that must be read ({name}: {skipped[name]}): {case.label}")
    if StagedContent.objects.filter(job=job).exists() and job.status == "done":
        report.failures.append(f"staged bytes left behind: {case.label}")
    if charged:
        report.failures.append(f"charged for an ingest: {case.label}")
    if seconds > limit_s:
        report.failures.append(f"took {seconds:.0f} s (bound {limit_s:.0f} s): {case.label}")
    report.slowest_ms, report.slowest = max((report.slowest_ms, report.slowest), (seconds * 1000, case.label))
    return FileOutcome(case.label, 202, job.status, seconds, read, {n: r for n, r in skipped.items() if n in case.names})
