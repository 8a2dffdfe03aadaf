"""Page-numbered lists: `?page=` and `?page_size=`, answered as {count, next, previous, results}.

Why: a list an account can grow (its API keys) must not come back whole in one response. A page past the end or
a page that is not a number is 404 `not_found` with field `page`, as DRF's paginator refuses it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import NotFound as DrfNotFound
from rest_framework.pagination import PageNumberPagination

from config.errors import NotFound

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from rest_framework.request import Request
    from rest_framework.views import APIView

MAX_PAGE_SIZE = 200


class NumberedPages(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def __init__(self, *, page_size: int) -> None:
        self.page_size = page_size

    def page(self, queryset: QuerySet, *, request: Request, view: APIView) -> list[Any]:
        """The requested page's rows; a page that does not exist is our 404 with field `page`."""
        try:
            return list(self.paginate_queryset(queryset, request, view=view) or [])
        except DrfNotFound:
            raise NotFound("That page does not exist.", field="page") from None


def key_pages() -> NumberedPages:
    return NumberedPages(page_size=settings.API_KEYS_PAGE_SIZE)


def page_serializer(item: type[serializers.Serializer], *, name: str) -> type[serializers.Serializer]:
    """The OpenAPI shape of one page of `item` rows."""
    return type(name, (serializers.Serializer,), {
        "count": serializers.IntegerField(help_text="Rows in all pages."),
        "next": serializers.URLField(allow_null=True, help_text="The next page's URL; null on the last."),
        "previous": serializers.URLField(allow_null=True, help_text="The previous page's URL; null on the first."),
        "results": item(many=True),
    })
