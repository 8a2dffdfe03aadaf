"""/api/keys and /api/signup (/api/me and the sign-up confirmation answer with the account's balance and
projects: console/api.py). Views parse, authorise, call one service, render."""
from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.apikeys import create_api_key, keys_visible_to, revoke_api_key
from accounts.models import ApiKey
from accounts.permissions import KeyScopePermission
from accounts.serializers import (
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    IssuedApiKeySerializer,
    SignupAcceptedSerializer,
    SignupSerializer,
)
from accounts.signup import (
    CONFIRMATION_SENT,
    enforce_signup_rate,
    link_base,
    require_signup_allowed,
    sign_up,
)
from config.errors import NotFound
from config.pagination import key_pages, page_serializer
from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES, ErrorSerializer

if TYPE_CHECKING:
    from rest_framework.request import Request


ApiKeyPageSerializer = page_serializer(ApiKeySerializer, name="ApiKeyPage")


class ApiKeyListView(APIView):
    required_scope = "manage"

    @extend_schema(operation_id="keys_list", responses={200: ApiKeyPageSerializer, **ERROR_RESPONSES},
                   parameters=[OpenApiParameter("page", int, description="1-based (default 1)."),
                               OpenApiParameter("page_size", int, description="Keys per page (default "
                                                "API_KEYS_PAGE_SIZE, at most 200).")],
                   tags=["account"], description="Your keys, newest first, one page at a time.")
    def get(self, request: Request) -> Response:
        pages = key_pages()
        keys = pages.page(keys_visible_to(user=request.user).order_by("-created_at", "-pk"), request=request,
                          view=self)
        return pages.get_paginated_response(ApiKeySerializer(keys, many=True).data)

    @extend_schema(operation_id="keys_create", request=ApiKeyCreateSerializer,
                   responses={201: IssuedApiKeySerializer, **ERROR_RESPONSES}, tags=["account"],
                   description="Issue a new API key. The secret is in this response only. Optional scopes (default "
                               "all), projects (slugs; default every project) and expiry (expires_at or "
                               "expires_in_days). Needs a session or a key with the manage scope; a key cannot "
                               "issue a key with more scopes, more projects or a later expiry than its own. "
                               "Past your account's limit of active keys it is 409 `account_limit` (field "
                               "`api_keys`).")
    def post(self, request: Request) -> Response:
        enforce(request, group="api_keys")
        ser = ApiKeyCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        issued = create_api_key(user=request.user, creator=request.auth if isinstance(request.auth, ApiKey) else None,
                                **ser.validated_data)
        data = dict(ApiKeySerializer(issued.api_key).data, secret=issued.secret)
        return Response(data, status=201)


class ApiKeyDetailView(APIView):
    required_scope = "manage"

    @extend_schema(operation_id="keys_revoke", responses={200: ApiKeySerializer, **ERROR_RESPONSES},
                   tags=["account"], description="Revoke a key (kept for history). Revoking twice is harmless.")
    def delete(self, request: Request, key_id: int) -> Response:
        key = keys_visible_to(user=request.user).filter(pk=key_id).first()
        if key is None:
            raise NotFound("API key not found.")
        return Response(ApiKeySerializer(revoke_api_key(api_key=key)).data)


class AnonymousView(APIView):
    """Anonymous: no authentication at all (so no session, no CSRF exposure) and no scope; rate limited per IP.

    KeyScopePermission is listed only to keep the every-view contract (tests/accounts/test_key_scopes.py): with no
    authentication there is never an API key, so it always passes; `required_scope = None` says no scope is needed."""

    authentication_classes: list = []
    permission_classes = [AllowAny, KeyScopePermission]
    required_scope = None


SIGNUP_ERRORS = {**{k: v for k, v in ERROR_RESPONSES.items() if k in (400, 429)},
                 403: OpenApiResponse(ErrorSerializer, description="Sign-up is disabled (`signup_disabled`).")}


class SignupView(AnonymousView):
    @extend_schema(operation_id="signup", request=SignupSerializer, auth=[],
                   responses={202: SignupAcceptedSerializer, **SIGNUP_ERRORS}, tags=["account"],
                   description="Start an account (when the server allows sign-up): the address gets an email with a "
                               "link (or, for an address that already has an account, a note saying so). The "
                               "answer is the same either way, so it tells no one whether an address is "
                               "registered. Finish with POST /api/signup/confirm or the emailed link.")
    def post(self, request: Request) -> Response:
        require_signup_allowed()  # before counting: a closed door costs the caller nothing
        enforce_signup_rate(request)
        ser = SignupSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        email = sign_up(**ser.validated_data, link_base=link_base(request))
        data = {"status": "confirmation_sent", "email": email, "detail": CONFIRMATION_SENT}
        return Response(SignupAcceptedSerializer(data).data, status=202)
