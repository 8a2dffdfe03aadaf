from django.urls import path

from people import api

urlpatterns = [
    path("api/search", api.SearchView.as_view(), name="people-search"),
    path("api/searches/<uuid:search_id>", api.SearchDetailView.as_view(), name="people-search-detail"),
    path("api/people", api.PeopleListView.as_view(), name="people-discover"),
    path("api/people/<uuid:person_id>", api.PersonView.as_view(), name="people-person"),
    path("api/people/<uuid:person_id>/profile", api.PublicProfileView.as_view(), name="people-public-profile"),
    path("api/people/<uuid:person_id>/unlock-contact", api.UnlockContactView.as_view(), name="people-unlock"),
]
