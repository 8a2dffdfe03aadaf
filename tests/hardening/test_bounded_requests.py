"""Every request ends (docs/security.md, "Requests that end"), against the server `make run` starts
(`manage.py webserver`, config/webserver.py) on loopback, with short bounds set by the fixture.

The attack this answers: one account opening more never-ending requests than Postgres has connections
(`GET /mcp` with `Accept: text/event-stream` never answered; a body announced and never sent). Each held a
server thread and, once authenticated, a database connection, until the platform could serve no one. Here the
test opens more of each than the database's max_connections, shows the platform still serves a normal request
meanwhile, that every hostile request is answered or closed within its bound, and that the database's
connections return to their idle count."""
from __future__ import annotations

import concurrent.futures as cf
import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from tests.live import db_env, serving

pytestmark = pytest.mark.slow
SOCKET_TIMEOUT_S = 2.0


@pytest.fixture
def webserver(transactional_db):
    env = db_env(REQUEST_SOCKET_TIMEOUT_S=str(SOCKET_TIMEOUT_S), REQUEST_BODY_TIMEOUT_S=str(SOCKET_TIMEOUT_S),
                            MCP_REQUEST_TIMEOUT_S="5", RATE_LIMIT_DEFAULT="100000/m", RATE_LIMIT_SEARCH="100000/m")
    with serving(["manage.py", "webserver", "--noreload", "--insecure", "127.0.0.1:{port}"], env=env,
                 probe="/api/schema/", what="the webserver") as (url, _):
        yield {"url": url, "port": int(url.rsplit(":", 1)[1])}


def _db_connections() -> int:
    """Connections to the test database other than this test's own."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()")
        return cur.fetchone()[0]


def _max_connections() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SHOW max_connections")
        return int(cur.fetchone()[0])


def _get(url: str, *, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _wait_for_idle(baseline: int, *, within_s: float) -> int:
    deadline = time.time() + within_s
    now = _db_connections()
    while now > baseline and time.time() < deadline:
        time.sleep(0.25)
        now = _db_connections()
    return now


def test_more_never_ending_requests_than_database_connections_leave_the_platform_serving(webserver, make_user,
                                                                                         api_key_for):
    key = api_key_for(make_user("mallory@example.com"))
    auth = {"Authorization": f"Bearer {key}"}
    baseline = _wait_for_idle(_db_connections(), within_s=1)
    n = _max_connections() + 20

    # 1. GET /mcp asking for an event stream, from one account, more at once than Postgres has connections
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=n) as pool:
        answers = list(pool.map(lambda _: _get(f"{webserver['url']}/mcp", timeout=15, headers={
            **auth, "Accept": "text/event-stream"}), range(n)))
    elapsed = time.perf_counter() - t0
    assert {status for status, _ in answers} == {405}, {status for status, _ in answers}
    assert json.loads(answers[0][1])["code"] == "method_not_allowed"
    assert elapsed < 15  # each was answered at once, none waited for a stream (bound: the client's own timeout)

    # 2. as many bodies announced and never sent, by an authenticated caller, held open together
    head = (f"POST /api/projects/nowhere/query HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"q\": ").encode()
    slow = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", webserver["port"]), timeout=30)
        s.sendall(head)
        slow.append(s)
    try:
        # the platform still serves while they hang: a normal authenticated request gets its answer
        status, body = _get(f"{webserver['url']}/api/me", headers=auth, timeout=20)
        assert status == 200 and json.loads(body)["email"] == "mallory@example.com"
        # every hostile socket is answered (408) or closed by the server within its bound, not ours
        t0 = time.perf_counter()
        first_lines = []
        for s in slow:
            try:
                first_lines.append(s.recv(200).split(b"\r\n", 1)[0])
            except TimeoutError:
                first_lines.append(b"client timed out")
        assert all(line in (b"HTTP/1.1 408 Request Timeout", b"") for line in first_lines), set(first_lines)
        slow_s = time.perf_counter() - t0
        assert slow_s < 20
    finally:
        for s in slow:
            s.close()

    # 3. clients that go away mid-body free their thread and connection too
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", webserver["port"]), timeout=5) as s:
            s.sendall(head)
    t0 = time.perf_counter()
    idle = _wait_for_idle(baseline, within_s=3 * SOCKET_TIMEOUT_S + 10)
    assert idle <= baseline
    status, _ = _get(f"{webserver['url']}/api/me", headers=auth, timeout=20)
    assert status == 200
    print(f"\nbounded requests: max_connections+20 = {n}; {n} event-stream GET /mcp answered 405 in {elapsed:.2f} s; "
          f"{n} silent bodies held: /api/me served, {sum(1 for x in first_lines if x.startswith(b'HTTP/1.1 408'))} "
          f"answered 408 and the rest closed within {slow_s:.1f} s (socket bound {SOCKET_TIMEOUT_S:g} s); "
          f"connections back to idle ({idle} <= {baseline}) {time.perf_counter() - t0:.1f} s after 20 clients left")


def test_an_mcp_post_is_answered_and_delete_is_refused_at_once(webserver, make_user, api_key_for):
    key = api_key_for(make_user("agent@example.com"))
    req = urllib.request.Request(f"{webserver['url']}/mcp", method="DELETE",
                                 headers={"Authorization": f"Bearer {key}"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=10)
    assert caught.value.code == 405 and caught.value.headers["Allow"] == "POST"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    req = urllib.request.Request(f"{webserver['url']}/mcp", data=body, method="POST", headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        tools = {t["name"] for t in json.loads(resp.read())["result"]["tools"]}
    assert {"search_context", "read_span"} <= tools
