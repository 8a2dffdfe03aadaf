"""Dataset endpoints: list what a project can search, create one (optionally following a source), show one with
its content counts and source, rename, delete. Views parse, authorise, call one service, render.

Why in search: a dataset's detail is its content (documents, chunks) and its source, both search's; the
dataset row itself and its sharing are projects' services, called from here (docs/architecture.md).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from config.schema import ERROR_RESPONSES, WRITE_ERRORS
from projects.access import project_for_member
from search.edge.project_serializers import DatasetSerializer, DatasetUpdateSerializer
from search.edge.serializers import (
    DatasetCreateWithSourceSerializer,
    DatasetDetailWithSourceSerializer,
    DatasetWithSourceSerializer,
)
from search.ingest import datasets as datasets_service
from search.ingest import datasets as search_datasets
from search.ingest import sharing
from search.models import Dataset
from search.sources import sync as sources

if TYPE_CHECKING:
    from rest_framework.request import Request

class DatasetListView(APIView):
    required_scope = {"GET": "query", "POST": "manage"}

    @extend_schema(operation_id="datasets_list", responses={200: DatasetSerializer(many=True), **ERROR_RESPONSES},
                   tags=["projects"], description="Every dataset the project can search: own, global and shared.")
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        data = [dict(DatasetSerializer(r["dataset"]).data, access=r["access"], project=r["owner"])
                for r in sharing.datasets_seen_by(user=request.user, project=project)]
        return Response(data)

    @extend_schema(operation_id="datasets_create", request=DatasetCreateWithSourceSerializer,
                   responses={201: DatasetWithSourceSerializer, **WRITE_ERRORS}, tags=["projects"],
                   description="Create a dataset (editors, owners). With `source` it follows a git repository or "
                               "a web site from the start; the source is checked first, so a bad one creates "
                               "nothing. Sync it with POST .../datasets/{id}/sync. Past your account's dataset "
                               "limit it is 409 `account_limit` (field `datasets`).")
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        ser = DatasetCreateWithSourceSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        new = Dataset(project=project, name=data["name"], kind=data["kind"], description=data["description"],
                      is_global=data["is_global"])
        ds = sources.create_dataset_with_source(user=request.user, new=new, source=data.get("source"),
                                                interval_s=data.get("interval_s"), token=data.get("token"))
        ds.source_view = sources.describe_source(dataset=ds)
        return Response(dict(DatasetWithSourceSerializer(ds).data, access="own"), status=201)


class DatasetDetailView(APIView):
    required_scope = {"GET": "query", "PATCH": "manage", "DELETE": "ingest"}

    @extend_schema(operation_id="datasets_retrieve",
                   responses={200: DatasetDetailWithSourceSerializer, **ERROR_RESPONSES}, tags=["projects"],
                   description="One of the project's own datasets, with document and chunk counts and its source "
                               "(never its token).")
    def get(self, request: Request, slug: str, dataset_id: int) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        ds = search_datasets.own_dataset(user=request.user, project=project, dataset_id=dataset_id)
        return Response(_detail(ds))

    @extend_schema(operation_id="datasets_update", request=DatasetUpdateSerializer,
                   responses={200: DatasetDetailWithSourceSerializer, **WRITE_ERRORS}, tags=["projects"],
                   description="Rename or describe a dataset (editors, owners); `is_global` is staff only.")
    def patch(self, request: Request, slug: str, dataset_id: int) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        ds = search_datasets.own_dataset(user=request.user, project=project, dataset_id=dataset_id)
        ser = DatasetUpdateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        datasets_service.update_dataset(user=request.user, dataset=ds, **ser.validated_data)
        ds = search_datasets.own_dataset(user=request.user, project=project, dataset_id=dataset_id)
        return Response(_detail(ds))

    @extend_schema(operation_id="datasets_destroy", request=None,
                   responses={204: OpenApiResponse(description="Deleted, with all its content."), **WRITE_ERRORS},
                   tags=["projects"], description="Delete a dataset with its documents and chunks (editors, owners). "
                                                  "The index deletes are queued in the same transaction.")
    def delete(self, request: Request, slug: str, dataset_id: int) -> Response:
        project = project_for_member(user=request.user, slug=slug)
        ds = search_datasets.own_dataset(user=request.user, project=project, dataset_id=dataset_id)
        datasets_service.delete_dataset(user=request.user, dataset=ds)
        return Response(status=204)


def _detail(ds: Any) -> dict[str, Any]:
    ds.source_view = sources.describe_source(dataset=ds)
    return dict(DatasetDetailWithSourceSerializer(ds).data, access="own")
