"""Page-numbered lists: `?page=` and `?page_size=`, answered as {count, next, previous, results}.

Why: a list an account can grow (its API keys) must not come back whole in one response. A page past the end or
a page or page size that is not a bounded ASCII integer is 400 with its field, parsed by an Input serializer like
every other query (config.fields)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import NotFound as DrfNotFound
from rest_framework.pagination import PageNumberPagination

from config.errors import NotFound
from config.fields import InputSerializer, IntField

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from rest_framework.request import Request
    from rest_framework.views import APIView

MAX_PAGE_SIZE = 200
MAX_PAGE = 10 ** 7


class PageQuerySerializer(InputSerializer):
    page = IntField(required=False, default=1, min_value=1, max_value=MAX_PAGE, help_text="1-based (default 1).")
    page_size = IntField(required=False, min_value=1, max_value=MAX_PAGE_SIZE,
                         help_text=f"Rows per page, at most {MAX_PAGE_SIZE}.")


class NumberedPages(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def __init__(self, *, page_size: int) -> None:
        self.page_size = page_size

    def page(self, queryset: QuerySet, *, request: Request, view: APIView) -> list[Any]:
        """The requested page's rows; a page that does not exist is our 404 with field `page`."""
        query = PageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)  # DRF's paginator would read "１２" or "-1" as a size silently
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
