from __future__ import annotations

from rest_framework import serializers

from credits.models import LedgerEntry


class LedgerEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = LedgerEntry
        fields = ["id", "delta", "balance_after", "reason", "reference_type", "reference_id", "created_at"]
        read_only_fields = fields


class CreditsSerializer(serializers.Serializer):
    balance = serializers.IntegerField()
    entries = LedgerEntrySerializer(many=True, help_text="Most recent first.")
