"""Check a real response against what the OpenAPI schema documents for its operation and status.

Why strict: a documented object is read as closed (`additionalProperties: false` unless the schema says
otherwise), so a field the code returns but the schema does not declare is a failure, like a missing
required field or a wrong type. That is what makes the schema the behaviour rather than a description of it.

OpenAPI 3.0 schemas are not quite JSON Schema: `nullable` becomes a union with null, `$ref`s into
`components/schemas` are inlined, and objects with declared properties are closed. The converted schema is
validated with jsonschema-rs (pinned in requirements.txt), formats (uuid, date-time, email) included.
"""
from __future__ import annotations

import json
from typing import Any

import jsonschema_rs

_NOT_JSON_SCHEMA = ("nullable", "readOnly", "writeOnly", "example", "examples", "discriminator", "xml",
                    "externalDocs", "deprecated")


def strict(schema: dict[str, Any], spec: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """The JSON Schema that an OpenAPI 3.0 schema means, with every object that lists properties closed."""
    if depth > 40:
        raise ValueError("schema nests too deep (a recursive $ref?)")
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return strict({**spec["components"]["schemas"][name], **{k: v for k, v in schema.items() if k != "$ref"}},
                      spec, depth + 1)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NOT_JSON_SCHEMA:
            continue
        if key == "properties":
            out[key] = {name: strict(sub, spec, depth + 1) for name, sub in value.items()}
        elif key in ("items", "not") or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = strict(value, spec, depth + 1)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [strict(sub, spec, depth + 1) for sub in value]
        else:
            out[key] = value
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if schema.get("nullable"):
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def response_schema(spec: dict[str, Any], op: dict[str, Any], status: int, media_type: str) -> dict[str, Any] | None:
    """The documented schema for this status and media type; None when the status documents no body."""
    responses = op["responses"]
    documented = responses.get(str(status))
    if documented is None:
        raise AssertionError(f"status {status} is not documented for {op['operationId']} "
                             f"(documented: {sorted(responses)})")
    content = documented.get("content")
    if not content:
        return None
    if media_type not in content:
        raise AssertionError(f"{op['operationId']} {status}: media type {media_type!r} is not documented "
                             f"({sorted(content)})")
    return strict(content[media_type]["schema"], spec)


def violations(schema: dict[str, Any], instance: Any) -> list[str]:
    """Every way `instance` breaks `schema` (empty when it conforms)."""
    validator = jsonschema_rs.Draft7Validator(schema, validate_formats=True)
    return [f"{'/'.join(str(p) for p in e.instance_path) or '<body>'}: {e.message}"
            for e in validator.iter_errors(instance)]


def sse_events(body: bytes) -> list[dict[str, str]]:
    """A text/event-stream body as the list of {event, data} objects the schema documents."""
    events = []
    for frame in body.decode().split("\n\n"):
        if not frame.strip():
            continue
        event: dict[str, str] = {}
        for line in frame.split("\n"):
            name, _, value = line.partition(": ")
            if name in ("event", "data"):
                event[name] = event[name] + "\n" + value if name in event else value
            else:  # an undocumented line (a comment, an `id:`) fails the closed event schema
                event["unexpected"] = line
        events.append(event)
    return events


def check_response(spec: dict[str, Any], op: dict[str, Any], status: int, content_type: str,
                   body: bytes) -> list[str]:
    """What is wrong with one real response, judged by the schema of its operation; empty when nothing is."""
    media_type = content_type.split(";")[0].strip() if content_type else ""
    documented = op["responses"].get(str(status), {})
    if not documented.get("content"):
        response_schema(spec, op, status, media_type)  # raises when the status itself is undocumented
        return [] if not body else [f"status {status} documents no body, got {body[:80]!r}"]
    schema = response_schema(spec, op, status, media_type)
    assert schema is not None
    if media_type == "text/event-stream":
        problems = []
        events = sse_events(body)
        if not events:
            problems.append("an empty event stream")
        for i, event in enumerate(events):
            problems += [f"event {i}: {v}" for v in violations(schema, event)]
            try:
                if not isinstance(json.loads(event.get("data", "")), dict):
                    problems.append(f"event {i}: data is not a JSON object")
            except ValueError:
                problems.append(f"event {i}: data is not JSON")
        return problems
    if schema.get("type") == "string" and schema.get("format") == "binary":
        return [] if body else ["an empty body where a file is documented"]  # a file's bytes: no JSON to check
    try:
        instance = json.loads(body)
    except ValueError:
        return [f"body is not JSON: {body[:80]!r}"]
    return violations(schema, instance)
