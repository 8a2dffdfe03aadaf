"""The project resource as search's edge serves it (its datasets, shares, usage and reranker), and the dataset and
share resources. Projects' own serializers (members, creating a project) stay in projects.serializers."""
from __future__ import annotations

from rest_framework import serializers

from config.fields import FlagField, InputSerializer, IntField, TextField
from search.models import Dataset, ProjectShare


class ProjectSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    role = serializers.CharField()
    created_at = serializers.DateTimeField()
    reranker = serializers.CharField(allow_blank=True, help_text="The trained reranker this project's queries use by "
                                                                 "default ('' for none).")


class UsageSerializer(serializers.Serializer):
    documents = serializers.IntegerField()
    chunks = serializers.IntegerField()
    bytes = serializers.IntegerField()


class ProjectDetailSerializer(ProjectSerializer):
    members = serializers.ListField(child=serializers.DictField(), help_text="[{email, role}]")
    dataset_count = serializers.IntegerField(help_text="Datasets this project can search (own, global, shared).")
    usage = UsageSerializer(help_text="What the project's own datasets hold.")
    quota = UsageSerializer(help_text="The project's quotas; a push or upload past one is 413 quota_exceeded.")


class DatasetSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True,
                                           help_text="The owning project; null for a global dataset of a project "
                                                     "the caller is not in.")
    access = serializers.CharField(read_only=True, help_text="own | global | shared")

    class Meta:
        model = Dataset
        fields = ["id", "project", "name", "kind", "is_global", "description", "created_at", "access"]
        read_only_fields = fields


class DatasetDetailSerializer(DatasetSerializer):
    document_count = serializers.IntegerField(read_only=True)
    chunk_count = serializers.IntegerField(read_only=True)

    class Meta(DatasetSerializer.Meta):
        fields = [*DatasetSerializer.Meta.fields, "document_count", "chunk_count"]
        read_only_fields = fields


class DatasetUpdateSerializer(InputSerializer):
    name = TextField(max_length=200, required=False)
    description = TextField(required=False, allow_blank=True)
    is_global = FlagField(required=False, help_text="Staff only.")


class DatasetCreateSerializer(InputSerializer):
    name = TextField(max_length=200)
    kind = serializers.ChoiceField(choices=Dataset.Kind.choices, default=Dataset.Kind.CODE)
    description = TextField(required=False, allow_blank=True, default="")
    is_global = FlagField(required=False, default=False, help_text="Staff only.")


class ShareSerializer(serializers.ModelSerializer):
    dataset_id = serializers.IntegerField(read_only=True)
    dataset = serializers.CharField(source="dataset.__str__", read_only=True)
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    granted_by = serializers.EmailField(source="granted_by.email", read_only=True, allow_null=True, default=None)
    is_active = serializers.SerializerMethodField()

    class Meta:
        model = ProjectShare
        fields = ["id", "dataset_id", "dataset", "project", "granted_by", "granted_at", "revoked_at", "is_active"]
        read_only_fields = fields

    def get_is_active(self, obj: ProjectShare) -> bool:
        return obj.revoked_at is None


class ShareCreateSerializer(InputSerializer):
    dataset_id = IntField(min_value=1)


class ProjectUpdateSerializer(InputSerializer):
    name = TextField(max_length=200, required=False, help_text="The new display name (the slug never changes).")
    reranker = TextField(max_length=64, required=False, allow_blank=True,
                         help_text="A reranker trained here (manage.py train_reranker) for this project's queries; "
                                   "'' for none. An unknown name is 400 with field `reranker`.")

    def validate(self, attrs: dict) -> dict:
        if not attrs:
            raise serializers.ValidationError({"name": ["Give name, reranker or both."]})
        return attrs
