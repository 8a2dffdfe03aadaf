from __future__ import annotations

from rest_framework import serializers

from accounts.models import ApiKey
from config.fields import InputSerializer, TextField


class ProjectRoleSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    role = serializers.CharField()


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField()
    name = serializers.CharField(allow_blank=True)
    is_staff = serializers.BooleanField()
    balance = serializers.IntegerField()
    projects = ProjectRoleSerializer(many=True)


class ApiKeySerializer(serializers.ModelSerializer):
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiKey
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at", "is_active"]
        read_only_fields = fields


class ApiKeyCreateSerializer(InputSerializer):
    name = TextField(max_length=100, required=False, default="default", allow_blank=False)


class IssuedApiKeySerializer(ApiKeySerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once; only a hash is stored.")

    class Meta(ApiKeySerializer.Meta):
        fields = ApiKeySerializer.Meta.fields + ["secret"]
        read_only_fields = fields
