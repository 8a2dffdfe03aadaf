from django.urls import path

from credits import api

urlpatterns = [
    path("api/credits", api.CreditsView.as_view(), name="api-credits"),
]
