"""The account console's composed answers: who you are with your balance and projects (/api/me), and a
confirmed sign-up with the credits it starts with."""
from __future__ import annotations

from rest_framework import serializers

from accounts.models import SCOPES


class ProjectRoleSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    role = serializers.CharField()


class CurrentKeySerializer(serializers.Serializer):
    prefix = serializers.CharField()
    name = serializers.CharField()
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=SCOPES))
    projects = serializers.ListField(child=serializers.SlugField(), allow_null=True,
                                     help_text="The key's project limit; null = every project.")
    expires_at = serializers.DateTimeField(allow_null=True)


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField()
    name = serializers.CharField(allow_blank=True)
    is_staff = serializers.BooleanField()
    balance = serializers.IntegerField()
    projects = ProjectRoleSerializer(many=True)
    key = CurrentKeySerializer(allow_null=True, help_text="The API key of this request (null for a session).")


class SignedUpSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField(help_text="As stored (lower case).")
    name = serializers.CharField(allow_blank=True)
    balance = serializers.IntegerField(help_text="Credits the new account starts with (SIGNUP_FREE_CREDITS).")
