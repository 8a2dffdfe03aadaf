"""Request shapes. DRF validation errors become {code: invalid, detail, field} via config.errors."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from config.fields import FlagField, InputSerializer, IntField, TextField


class SearchRequestSerializer(InputSerializer):
    query = TextField(max_length=1000, trim_whitespace=True, allow_blank=False)
    open_to_work_only = FlagField(required=False, allow_null=True, default=None)
    preferred_locations = serializers.ListField(child=TextField(max_length=100), required=False,
                                                max_length=10, default=list)
    salary_min = IntField(required=False, allow_null=True, min_value=0, max_value=10**10, default=None)
    salary_max = IntField(required=False, allow_null=True, min_value=0, max_value=10**10, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        lo, hi = attrs.get("salary_min"), attrs.get("salary_max")
        if lo is not None and hi is not None and lo > hi:
            raise serializers.ValidationError({"salary_min": "salary_min must be <= salary_max"})
        return attrs


class UnlockRequestSerializer(InputSerializer):
    search_id = serializers.UUIDField()


class DiscoverQuerySerializer(InputSerializer):
    limit = IntField(required=False, min_value=1, max_value=100, default=20)
    offset = IntField(required=False, min_value=0, max_value=10**6, default=0)  # `?offset=` is a 400 (IntField)


class ProfileQuerySerializer(InputSerializer):
    search_id = serializers.UUIDField()


# Response shapes: the services build plain dicts and the views render them through these, so what the schema
# documents is exactly what is sent.
def _s(**kw: Any) -> serializers.CharField:
    return serializers.CharField(allow_blank=True, **kw)


class CardChildSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = _s()
    summary = _s()
    child_type = _s()


class CardSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = _s()
    summary = _s()
    company_norm = _s()
    team_norm = _s()
    intent_primary = _s()
    domain = _s()
    sub_domain = _s()
    employment_type = _s()
    seniority_level = _s()
    city = _s()
    country = _s()
    location_text = _s()
    start_date = serializers.DateField(allow_null=True)
    end_date = serializers.DateField(allow_null=True)
    is_current = serializers.BooleanField()
    search_phrases = serializers.ListField(child=_s())


class CardFamilySerializer(CardSerializer):
    children = CardChildSerializer(many=True)


class UnderstoodSerializer(serializers.Serializer):
    kind = _s(help_text="company | exclude_company | city | country | team | skill | intent | seniority | "
                        "employment_type | domain | time | salary | open_to_work | exclude_keyword | title")
    text = _s(help_text="the words of the query")
    value = serializers.JSONField(help_text="what they became (a normalised name, a date range, INR per year)")
    how = _s(help_text="exact | alias | fuzzy (a typo corrected against the directory's vocabulary) | rule | "
                       "semantic (words no vocabulary entry has, mapped by embedding similarity)")
    score = serializers.FloatField(required=False, help_text="semantic only: the cosine similarity of the words "
                                                             "to the vocabulary entry they were mapped to")


class ParsedSummarySerializer(serializers.Serializer):
    parser = _s(help_text="deterministic | llm")
    understood = UnderstoodSerializer(many=True)
    unused_terms = serializers.ListField(child=serializers.CharField(), help_text=(
        "Words that matched no company, place, skill or rule: used as free text only (lexical bonus, embedding), "
        "never as a filter."))


class ConstraintSerializer(serializers.Serializer):
    constraint = _s(help_text="time | location | company | intent")
    value = _s()


class RelaxationSerializer(serializers.Serializer):
    tier = serializers.IntegerField(allow_null=True, help_text=(
        "0 strict; 1-3 relax time, location and company/team in the relaxation policy's order (the seed's: time, "
        "location, company/team); 4 intent/domain/seniority (only with RELAX_INTENT_TIER)"))
    tier_name = _s()
    people_per_tier = serializers.DictField(child=serializers.IntegerField(),
                                            help_text="people each tier that ran found")
    relaxed = ConstraintSerializer(many=True, help_text="no longer a filter, still ranked by (a penalty if missed)")
    dropped = ConstraintSerializer(many=True, help_text="ignored entirely to find enough people")
    demoted_to_should = serializers.ListField(child=serializers.CharField(),
                                              help_text="parsed values kept as soft keywords, not filters")
    notice = _s(help_text='e.g. "No one in Pune matched; showing people from other cities." Empty when strict.')
    policy = _s(required=False, help_text="the relaxation policy (PEOPLE_SEARCH RELAXATION_POLICY): seed, graded, …; "
                                          "under graded, people meeting more of the asked-for constraints come first")


class SearchPersonSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField(allow_null=True)
    headline = serializers.CharField(allow_null=True)
    bio = serializers.CharField(allow_null=True)
    similarity_percent = serializers.IntegerField(min_value=0, max_value=100)
    why_matched = serializers.ListField(child=serializers.CharField(), help_text="1-6 deterministic bullets.")
    unmet = serializers.ListField(child=serializers.CharField(), help_text=(
        "Relaxed or dropped constraints (time, location, company, intent) that none of this person's public cards "
        "meets."))
    open_to_work = serializers.BooleanField()
    open_to_contact = serializers.BooleanField()
    work_preferred_locations = serializers.ListField(child=serializers.CharField())
    work_preferred_salary_min = serializers.IntegerField(allow_null=True)
    matched_cards = CardSerializer(many=True)


class SearchResponseSerializer(serializers.Serializer):
    search_id = serializers.UUIDField(help_text="Opens a 24 h session for profile views and unlocks.")
    parsed = ParsedSummarySerializer()
    relaxation = RelaxationSerializer()
    refinement = _s(help_text="off | pending: LLM-refined why_matched will appear at GET /api/searches/{id}")
    people = SearchPersonSerializer(many=True)


class PastSearchPersonSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = _s()
    headline = serializers.CharField(allow_null=True)
    rank = serializers.IntegerField()
    score = serializers.FloatField()
    similarity_percent = serializers.IntegerField(min_value=0, max_value=100)
    why_matched = serializers.ListField(child=serializers.CharField(), help_text="the refined bullets once ready, "
                                                                                  "else the deterministic ones")
    why_matched_deterministic = serializers.ListField(child=serializers.CharField())
    why_matched_refined = serializers.ListField(child=serializers.CharField(), help_text="empty until refined")
    why_source = serializers.CharField(help_text="deterministic | llm")
    unmet = serializers.ListField(child=serializers.CharField())
    open_to_work = serializers.BooleanField()
    open_to_contact = serializers.BooleanField()
    matched_parent_ids = serializers.ListField(child=serializers.UUIDField())
    matched_child_ids = serializers.ListField(child=serializers.UUIDField())


class PastSearchSerializer(serializers.Serializer):
    search_id = serializers.UUIDField()
    query = _s()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    fallback_tier = serializers.IntegerField(allow_null=True)
    relaxation = RelaxationSerializer()
    refinement = _s(help_text="off | pending | done | failed (the deterministic bullets stay)")
    parsed = ParsedSummarySerializer()
    parsed_constraints = serializers.DictField()
    people = PastSearchPersonSerializer(many=True)


class DiscoverPersonSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    display_name = _s()
    current_location = serializers.CharField(allow_null=True)
    summaries = serializers.ListField(child=serializers.CharField())


class DiscoverSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    results = DiscoverPersonSerializer(many=True)


class ContactSerializer(serializers.Serializer):
    email = _s()
    phone = _s()
    linkedin_url = _s()


class PersonProfileSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    display_name = _s()
    headline = serializers.CharField(allow_null=True)
    bio = serializers.CharField(allow_null=True)
    current_city = serializers.CharField(allow_null=True)
    open_to_work = serializers.BooleanField()
    open_to_contact = serializers.BooleanField()
    work_preferred_locations = serializers.ListField(child=serializers.CharField())
    work_preferred_salary_min = serializers.IntegerField(allow_null=True)
    contact_unlocked = serializers.BooleanField()
    contact = ContactSerializer(allow_null=True, help_text="Only after an unlock, and only if open to work/contact.")
    experience_cards = CardSerializer(many=True)
    card_families = CardFamilySerializer(many=True)


class PublicProfileSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    display_name = _s()
    bio = serializers.CharField(allow_null=True)
    card_families = CardFamilySerializer(many=True)


class UnlockResponseSerializer(serializers.Serializer):
    unlocked = serializers.BooleanField()
    charged = serializers.IntegerField(help_text="Credits taken: 0 for a repeat.")
    person_id = serializers.UUIDField()
    search_id = serializers.UUIDField()
    contact = ContactSerializer()
    balance = serializers.IntegerField()
