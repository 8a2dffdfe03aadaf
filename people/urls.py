from django.urls import path

from people.edge import api, pages

urlpatterns = [
    # The pages share their names with the API routes below, which reverse() finds (the later of two alike).
    path("people/", pages.people_search, name="people-search"),
    path("people/discover", pages.discover, name="people-discover"),
    path("people/p/<uuid:person_id>", pages.person_profile, name="people-profile"),
    path("api/search", api.SearchView.as_view(), name="people-search"),
    path("api/searches/<uuid:search_id>", api.SearchDetailView.as_view(), name="people-search-detail"),
    path("api/people", api.PeopleListView.as_view(), name="people-discover"),
    path("api/people/<uuid:person_id>", api.PersonView.as_view(), name="people-person"),
    path("api/people/<uuid:person_id>/profile", api.PublicProfileView.as_view(), name="people-public-profile"),
    path("api/people/<uuid:person_id>/unlock-contact", api.UnlockContactView.as_view(), name="people-unlock"),
]
