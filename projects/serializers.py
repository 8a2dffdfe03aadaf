from __future__ import annotations

from rest_framework import serializers

from config.fields import InputSerializer, TextField
from projects.models import Membership


class ProjectCreateSerializer(InputSerializer):
    name = TextField(max_length=200, help_text="Display name.")
    slug = TextField(max_length=80, required=False, allow_blank=True,
                     help_text="Lower-case letters, digits, '-' and '_', starting with a letter or digit; 'global' "
                               "is reserved. Default: derived from the name.")


class MemberSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The membership id (the {member_id} of the member endpoints).")
    email = serializers.EmailField(source="user.email")
    name = serializers.CharField(source="user.name", allow_blank=True)
    role = serializers.ChoiceField(choices=Membership.Role.choices, help_text="owner | editor | viewer")
    created_at = serializers.DateTimeField(help_text="When the account joined the project.")


class MemberCreateSerializer(InputSerializer):
    email = TextField(max_length=254, help_text="The email of an existing account.")
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.VIEWER)


class MemberUpdateSerializer(InputSerializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)
