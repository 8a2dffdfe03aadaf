from django.contrib import admin

from people.models import (
    ExperienceCard,
    ExperienceCardChild,
    Person,
    PersonProfile,
    Search,
    SearchResult,
    UnlockContact,
)


class ProfileInline(admin.StackedInline):
    model = PersonProfile
    extra = 0


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ("display_name", "headline", "created_at")
    search_fields = ("display_name", "email", "external_id")
    inlines = [ProfileInline]


class ChildInline(admin.TabularInline):
    model = ExperienceCardChild
    fk_name = "parent"
    extra = 0
    exclude = ("embedding",)


@admin.register(ExperienceCard)
class ExperienceCardAdmin(admin.ModelAdmin):
    list_display = ("title", "person", "company_norm", "city", "start_date", "end_date", "visibility")
    list_filter = ("visibility", "intent_primary", "city")
    search_fields = ("title", "company_norm", "person__display_name")
    exclude = ("embedding",)
    raw_id_fields = ("person",)
    inlines = [ChildInline]


class ResultInline(admin.TabularInline):
    model = SearchResult
    extra = 0
    raw_id_fields = ("person",)


@admin.register(Search)
class SearchAdmin(admin.ModelAdmin):
    list_display = ("query_text", "searcher", "created_at", "expires_at")
    inlines = [ResultInline]


@admin.register(UnlockContact)
class UnlockAdmin(admin.ModelAdmin):
    list_display = ("searcher", "target_person", "search", "created_at")
