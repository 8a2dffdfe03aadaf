"""/api/me and /api/keys. Views parse, authorise, call one service, render."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.apikeys import create_api_key, keys_visible_to, project_slugs, revoke_api_key
from accounts.models import ApiKey
from accounts.permissions import KeyScopePermission
from accounts.serializers import (
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    IssuedApiKeySerializer,
    MeSerializer,
    SignedUpSerializer,
    SignupAcceptedSerializer,
    SignupConfirmSerializer,
    SignupSerializer,
)
from accounts.signup import (
    CONFIRMATION_SENT,
    confirm_sign_up,
    enforce_signup_rate,
    link_base,
    require_signup_allowed,
    sign_up,
)
from config.errors import NotFound
from config.pagination import key_pages, page_serializer
from config.ratelimits import enforce
from config.schema import ERROR_RESPONSES, ErrorSerializer
from credits.ledger import get_balance
from projects.sharing import projects_of

if TYPE_CHECKING:
    from rest_framework.request import Request


class MeView(APIView):
    required_scope = None

    @extend_schema(operation_id="me", responses={200: MeSerializer, **ERROR_RESPONSES}, tags=["account"])
    def get(self, request: Request) -> Response:
        user = request.user
        data = {"id": user.pk, "email": user.email, "name": user.name, "is_staff": user.is_staff,
                "balance": get_balance(user=user),
                "projects": [{"slug": p["project"].slug, "name": p["project"].name, "role": p["role"]}
                             for p in projects_of(user=user)],
                "key": _current_key(request)}
        return Response(MeSerializer(data).data)


def _current_key(request: Request) -> dict[str, Any] | None:
    key = request.auth if isinstance(request.auth, ApiKey) else None
    if key is None:
        return None
    return {"prefix": key.prefix, "name": key.name, "scopes": key.scopes, "projects": project_slugs(key),
            "expires_at": key.expires_at}


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


class _Anonymous(APIView):
    """Anonymous: no authentication at all (so no session, no CSRF exposure) and no scope; rate limited per IP.

    KeyScopePermission is listed only to keep the every-view contract (tests/accounts/test_key_scopes.py): with no
    authentication there is never an API key, so it always passes; `required_scope = None` says no scope is needed."""

    authentication_classes: list = []
    permission_classes = [AllowAny, KeyScopePermission]
    required_scope = None


_SIGNUP_ERRORS = {**{k: v for k, v in ERROR_RESPONSES.items() if k in (400, 429)},
                  403: OpenApiResponse(ErrorSerializer, description="Sign-up is disabled (`signup_disabled`).")}


class SignupView(_Anonymous):
    @extend_schema(operation_id="signup", request=SignupSerializer, auth=[],
                   responses={202: SignupAcceptedSerializer, **_SIGNUP_ERRORS}, tags=["account"],
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


class SignupConfirmView(_Anonymous):
    @extend_schema(operation_id="signup_confirm", request=SignupConfirmSerializer, auth=[],
                   responses={201: SignedUpSerializer, **_SIGNUP_ERRORS,
                              409: OpenApiResponse(ErrorSerializer, description="The address got an account "
                                                                                "meanwhile (`email_taken`).")},
                   tags=["account"],
                   description="Create the account with the token from the sign-up email and the password chosen "
                               "at that sign-up (400 `wrong_password` otherwise). Then log in on the site or "
                               "create an API key from a session.")
    def post(self, request: Request) -> Response:
        require_signup_allowed()
        enforce_signup_rate(request)
        ser = SignupConfirmSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        user = confirm_sign_up(token=ser.validated_data["token"], password=ser.validated_data["password"])
        data = {"id": user.pk, "email": user.email, "name": user.name, "balance": get_balance(user=user)}
        return Response(SignedUpSerializer(data).data, status=201)
