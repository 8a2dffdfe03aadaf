"""The root URLs: only includes, in the order they are matched. Each app routes its own pages and API in its own
urls module; the console's pages (home, the account pages, the staff dashboard, /healthz) are in console/routes.py.

Order matters twice: logging in and password reset (accounts/auth_urls.py: accounts/login_limits.py,
accounts/password_reset.py) come before the admin's and Django's own views of the same paths, which they wrap or
replace; and where two routes share a name, `reverse()` finds the later one."""
from django.contrib import admin
from django.urls import include, path

handler400 = "config.errors.json_400"
handler404 = "config.errors.json_404"
handler500 = "config.errors.json_500"

urlpatterns = [
    path("", include("accounts.auth_urls")),
    path("", include("console.routes")),  # before the admin's: /admin/dashboard/ is the console's
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("accounts.urls")),
    path("", include("projects.urls")),
    path("", include("credits.urls")),
    path("", include("search.edge.urls")),
    path("", include("people.urls")),
]
