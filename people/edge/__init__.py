"""The API views (api), the server-rendered pages (pages) and their Input and Output serializers (serializers);
the routes stay in people/urls.py and the admin in people/admin.py, where Django looks for them."""
