"""The edge: API views, pages, the MCP server, serializers and routes. Parses, authorises, calls one service, renders.

See docs/architecture.md for where each job lives and which way imports point."""
