"""/api/me and /api/signup/confirm: account answers that carry other apps' figures (the balance from credits,
the projects from projects), so they are composed here rather than in accounts, which sits below both.
Views parse, authorise, call one service, render."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api import SIGNUP_ERRORS, AnonymousView
from accounts.apikeys import project_slugs
from accounts.models import ApiKey
from accounts.serializers import SignupConfirmSerializer
from accounts.signup import confirm_sign_up, enforce_signup_rate, require_signup_allowed
from config.schema import ERROR_RESPONSES, ErrorSerializer
from console.serializers import MeSerializer, SignedUpSerializer
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


class SignupConfirmView(AnonymousView):
    @extend_schema(operation_id="signup_confirm", request=SignupConfirmSerializer, auth=[],
                   responses={201: SignedUpSerializer, **SIGNUP_ERRORS,
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
