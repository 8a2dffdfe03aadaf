"""Request shapes. DRF validation errors become {code: invalid, detail, field} via config.errors."""
from __future__ import annotations

from rest_framework import serializers


class SearchRequestSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=1000, trim_whitespace=True, allow_blank=False)
    open_to_work_only = serializers.BooleanField(required=False, allow_null=True, default=None)
    preferred_locations = serializers.ListField(child=serializers.CharField(max_length=100), required=False,
                                                max_length=10, default=list)
    salary_min = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=10**10,
                                          default=None)
    salary_max = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=10**10,
                                          default=None)

    def validate(self, attrs):  # noqa: ANN001, ANN201
        lo, hi = attrs.get("salary_min"), attrs.get("salary_max")
        if lo is not None and hi is not None and lo > hi:
            raise serializers.ValidationError({"salary_min": "salary_min must be <= salary_max"})
        return attrs


class UnlockRequestSerializer(serializers.Serializer):
    search_id = serializers.UUIDField()


class DiscoverQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=20)
    offset = serializers.IntegerField(required=False, min_value=0, max_value=10**6, default=0)


class ProfileQuerySerializer(serializers.Serializer):
    search_id = serializers.UUIDField()
