"""OpenAPI pieces shared by every app's views: the one error shape."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. insufficient_credits.")
    detail = serializers.CharField(help_text="Human explanation.")
    field = serializers.CharField(required=False, help_text="The input at fault, when there is one.")
    # details some errors add (config.errors.ApiError.extra): documented here so an error body has one schema
    required_scope = serializers.CharField(required=False, help_text="403 insufficient_scope: the scope needed.")
    retry_after = serializers.IntegerField(required=False, help_text="429: seconds to wait (as Retry-After).")
    dependency = serializers.CharField(required=False, help_text="503: the backing service that failed.")
    balance = serializers.IntegerField(required=False, help_text="402: your balance.")
    required = serializers.IntegerField(required=False, help_text="402: the credits the request needs.")
    quota = serializers.DictField(child=serializers.IntegerField(), required=False,
                                  help_text="413 quota_exceeded: the quota passed, e.g. {documents: 1000}.")
    usage = serializers.DictField(child=serializers.IntegerField(), required=False,
                                  help_text="413 quota_exceeded: the project's usage of it.")
    requested = serializers.DictField(child=serializers.IntegerField(), required=False,
                                      help_text="413 quota_exceeded: what the request would add.")
    job_id = serializers.CharField(required=False, help_text="409 sync_running: the sync already queued or running.")


def _err(text: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=text)


ERROR_RESPONSES = {
    400: _err("Bad input (`field` names it)."),
    401: _err("Missing, wrong, revoked or expired (`key_expired`) API key."),
    403: _err("Forbidden: the API key lacks the scope this operation needs (`insufficient_scope`, with "
              "`required_scope`), or your role does not allow it."),
    404: _err("Not found, or not visible to you."),
    429: _err("Rate limited; see Retry-After."),
}
IDEMPOTENT_ERRORS = {
    402: _err("Insufficient credits; nothing was charged."),
    409: _err("A request with this Idempotency-Key is in progress."),
    422: _err("This Idempotency-Key was used with a different request."),
}
DEPENDENCY_ERRORS = {
    503: _err("A backing service is down (`dependency` names it: postgres, redis, qdrant, embeddings, llm); "
              "nothing was charged."),
}
# the writes of projects, members, shares and datasets: a role that may not write (403) and a clash (409)
WRITE_ERRORS = {**ERROR_RESPONSES, 403: ErrorSerializer, 409: ErrorSerializer}
SESSION_ERRORS = {410: _err("The people-search session has expired (24 h); run the search again.")}
