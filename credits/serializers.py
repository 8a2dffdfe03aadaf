from __future__ import annotations

from rest_framework import serializers

from config.fields import InputSerializer, IntField
from credits.models import LedgerEntry

MAX_LIMIT = 200


class CreditsQuerySerializer(InputSerializer):
    limit = IntField(required=False, min_value=1, max_value=MAX_LIMIT, default=50,
                     help_text=f"Ledger entries to return, 1..{MAX_LIMIT}.")


class LedgerEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = LedgerEntry
        fields = ["id", "delta", "balance_after", "reason", "reference_type", "reference_id", "created_at"]
        read_only_fields = fields


class CreditsSerializer(serializers.Serializer):
    balance = serializers.IntegerField()
    entries = LedgerEntrySerializer(many=True, help_text="Most recent first.")
