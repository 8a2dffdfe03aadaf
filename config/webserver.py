"""The threaded WSGI server that `make run` serves with, bounded in time per socket.

Why not Django's runserver as it is: its threads wait on a client for ever. A client that sends its headers and
then nothing (or opens a stream and never reads it) keeps a thread, and, once a view has touched the database, a
Postgres connection; a few dozen such clients from one account exhaust the connections of every tenant. Here each
accepted socket gets REQUEST_SOCKET_TIMEOUT_S: a read or write that waits longer fails and the request ends.
The other bounds live where their work is: the body is read before any view runs (config.middleware), MCP
requests end within MCP_REQUEST_TIMEOUT_S (search.edge.mcp.http), streamed answers within STREAM_MAX_S
(search.rules.answer). See docs/security.md, "Requests that end".
"""
from __future__ import annotations

import socket

from django.conf import settings
from django.core.servers.basehttp import WSGIServer


class BoundedWSGIServer(WSGIServer):
    """Django's WSGIServer whose every connection times out after REQUEST_SOCKET_TIMEOUT_S of silence. runserver
    mixes in the threads itself (one per connection, daemonic); each request's database connections close when
    it finishes (Django's request_finished, CONN_MAX_AGE)."""

    request_queue_size = 128  # a burst of connections waits in the backlog instead of being reset

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = super().get_request()
        sock.settimeout(settings.REQUEST_SOCKET_TIMEOUT_S)
        return sock, addr
