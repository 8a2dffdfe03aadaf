from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.apikeys import MAX_EXPIRY_DAYS, project_slugs
from accounts.models import SCOPES, ApiKey
from config.fields import InputSerializer, IntField, TextField


class ApiKeySerializer(serializers.ModelSerializer):
    is_active = serializers.BooleanField(read_only=True, help_text="Not revoked and not expired.")
    is_expired = serializers.BooleanField(read_only=True)
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=SCOPES), read_only=True)
    projects = serializers.SerializerMethodField(
        help_text="Slugs of the projects the key is limited to; null = every project you are a member of.")

    class Meta:
        model = ApiKey
        fields = ["id", "name", "prefix", "scopes", "projects", "expires_at", "created_at", "last_used_at",
                  "revoked_at", "is_active", "is_expired"]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.SlugField(), allow_null=True))
    def get_projects(self, obj: ApiKey) -> list[str] | None:
        return project_slugs(obj)


class ApiKeyCreateSerializer(InputSerializer):
    name = TextField(max_length=100, required=False, default="default", allow_blank=False)
    scopes = serializers.ListField(child=TextField(max_length=32), required=False, max_length=len(SCOPES) * 2,
                                   help_text=f"A non-empty subset of {', '.join(SCOPES)}; default: all "
                                             "(for a key created by a key: that key's scopes).")
    projects = serializers.ListField(child=TextField(max_length=100), required=False, max_length=100,
                                     help_text="Slugs of projects you are a member of; the key sees only these. "
                                               "Omit for every project.")
    expires_at = serializers.DateTimeField(required=False, help_text="A future time, at most 3650 days ahead.")
    expires_in_days = IntField(required=False, min_value=1, max_value=MAX_EXPIRY_DAYS,
                               help_text="Instead of expires_at: expire this many days from now.")

    def validate_scopes(self, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in SCOPES]
        if unknown:
            raise serializers.ValidationError(f"Unknown scope {unknown[0]!r}; scopes are {', '.join(SCOPES)}.")
        if not value:
            raise serializers.ValidationError("Give at least one scope (omit the field for all of them).")
        return value

    def validate_projects(self, value: list[str]) -> list[str]:
        if not value:
            raise serializers.ValidationError("Give at least one project slug (omit the field for every project).")
        return value

    def validate(self, attrs: dict) -> dict:
        if "expires_at" in attrs and "expires_in_days" in attrs:
            raise serializers.ValidationError({"expires_in_days": ["Give expires_at or expires_in_days, not both."]})
        return attrs


class IssuedApiKeySerializer(ApiKeySerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once; only a hash is stored.")

    class Meta(ApiKeySerializer.Meta):
        fields = ApiKeySerializer.Meta.fields + ["secret"]
        read_only_fields = fields


class SignupSerializer(InputSerializer):
    email = TextField(max_length=254, help_text="Your login; unique in any letter case.")
    password = TextField(max_length=1024, trim_whitespace=False,
                         help_text="Checked by the server's password validators (length, similarity to the email "
                                   "and name, common passwords, all digits).")
    name = TextField(max_length=200, required=False, allow_blank=True, default="")


class SignupAcceptedSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["confirmation_sent"])
    email = serializers.EmailField(help_text="The address the email went to (lower case).")
    detail = serializers.CharField(help_text="What happens next.")


class SignupConfirmSerializer(InputSerializer):
    token = TextField(max_length=100, help_text="The token from the sign-up email's link.")
    password = TextField(max_length=1024, trim_whitespace=False,
                         help_text="The password chosen at this sign-up: the account is created only for whoever "
                                   "knows it, so a link from someone else's sign-up of your address cannot give "
                                   "you an account with their password.")
