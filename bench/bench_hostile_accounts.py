"""What an outsider could do to accounts: take an address over before its owner signs up, guess a password, and
use password reset to learn who has an account or to flood an inbox; by the code before the fixes and the code
now, in the same run.

Each side runs in its own process (its own private embedded Postgres and Redis, bench/_common.setup_django) with
Django's test client against the real views, killed after `--cap` seconds; its peak resident memory is the
process's. Mail goes over SMTP to a sink this script serves on 127.0.0.1, which counts what arrives: the old reset
view talks to it inside the request, the new one only enqueues (no worker runs here, so the queued mails stay
queued). The "before" tree is a git worktree at `--before`, made here if missing.

    .venv/bin/python bench/bench_hostile_accounts.py [--cap 60] [--before 97d1acf]
"""
from __future__ import annotations

import argparse
import json
import os
import socketserver
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402


class _SmtpSink(socketserver.StreamRequestHandler):
    """Just enough SMTP for Django's backend: accept every message, count it and append it to `log` (the child
    reads its sign-up links there). A client that says COUNT gets the count instead."""

    count = 0
    log: Path
    lock = threading.Lock()

    def handle(self) -> None:
        self.wfile.write(b"220 sink\r\n")
        data: list[bytes] | None = None
        for line in self.rfile:
            if data is not None:
                if line in (b".\r\n", b".\n"):
                    with self.lock:
                        type(self).count += 1
                        with self.log.open("ab") as f:
                            f.write(b"".join(data))
                    data = None
                    self.wfile.write(b"250 ok\r\n")
                else:
                    data.append(line)
                continue
            verb = line[:5].upper().strip()
            if verb == b"COUNT":
                self.wfile.write(f"{type(self).count}\r\n".encode())
                return
            if verb == b"DATA":
                data = []
                self.wfile.write(b"354 go\r\n")
            elif verb == b"QUIT":
                self.wfile.write(b"221 bye\r\n")
                return
            else:
                self.wfile.write(b"250 sink\r\n")


# Run in the tree under test: the three attacks through the test client; one JSON line per case.
CHILD = r'''
import json, os, re, resource, statistics, sys, time
tree = sys.argv[1]
sys.path.insert(0, tree)
sys.path.insert(0, os.path.join(tree, "bench"))
os.chdir(tree)
from _common import setup_django
setup_django()
from django.conf import settings
settings.ALLOWED_HOSTS = ["*"]
from django.test import Client
from accounts.models import User
from config.celery import app

def say(case, **kw):
    kw["peak_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps({"case": case, **kw}), flush=True)

def ask_sink():
    import socket
    s = socket.create_connection(("127.0.0.1", int(os.environ["SINK_PORT"])))
    f = s.makefile("rb")
    f.readline()  # the banner
    s.sendall(b"COUNT\r\n")
    n = int(f.readline().split()[0])
    s.close()
    return n

# 1. pre-account takeover: the attacker signs up the victim's address first, then the victim; the victim opens
# the attacker's email first, typing the only password they know.
t0 = time.perf_counter()
victim, attacker_pw, victim_pw = "victim@example.com", "attacker-knows-this-3", "victim-owns-this-7"
for pw in (attacker_pw, victim_pw):
    Client(REMOTE_ADDR="10.0.0.1").post("/api/signup", {"email": victim, "password": pw}, content_type="application/json")
tokens = re.findall(r"/accounts/signup/confirm/([A-Za-z0-9_-]+)", open(os.environ["SINK_LOG"]).read())[-2:]
browser = Client(REMOTE_ADDR="10.0.0.2")
for token in tokens:
    r = browser.post(f"/accounts/signup/confirm/{token}", {"password": victim_pw})
    if User.objects.filter(email=victim).exists():
        break
u = User.objects.filter(email=victim).first()
outcome = ("no account" if u is None else "account with the ATTACKER's password" if u.check_password(attacker_pw)
           else "attacker's link refused; account with the victim's password")
say("takeover", s=round(time.perf_counter() - t0, 3), outcome=outcome)

# 2. 30 wrong passwords, then the right one, one account, one address.
User.objects.create_user(email="target@example.com", password="the-right-one-42")
t0 = time.perf_counter()
codes = []
for i in range(30):
    codes.append(Client(REMOTE_ADDR="10.0.0.3").post("/accounts/login/", {"username": "target@example.com", "password": f"guess-{i}"}).status_code)
c = Client(REMOTE_ADDR="10.0.0.3")
r = c.post("/accounts/login/", {"username": "target@example.com", "password": "the-right-one-42"})
checked = sum(1 for x in codes if x == 200)
say("login", s=round(time.perf_counter() - t0, 3),
    outcome=f"{checked} of 30 guesses checked, {codes.count(429)} refused (429); the right password: "
            + ("logged in" if "_auth_user_id" in c.session else f"refused ({r.status_code})"))

# 3. reset timing: registered and unknown addresses, interleaved, one request each (each from its own client
# address, so no limit is reached), after one warm-up request.
def queued():
    try:
        with app.connection_for_read() as conn:
            return conn.default_channel.queue_declare(settings.CELERY_TASK_DEFAULT_QUEUE, passive=True).message_count
    except Exception:
        return 0

Client(REMOTE_ADDR="10.1.9.9").post("/accounts/password_reset/", {"email": "warm-up@example.com"})
times = {"known": [], "unknown": []}
before = ask_sink()
for i in range(5):
    User.objects.create_user(email=f"known{i}@example.com", password="the-right-one-42")
    for kind in ("known", "unknown"):
        t = time.perf_counter()
        Client(REMOTE_ADDR=f"10.1.{i}.{len(kind)}").post("/accounts/password_reset/", {"email": f"{kind}{i}@example.com"})
        times[kind].append((time.perf_counter() - t) * 1000)
k, u = statistics.median(times["known"]), statistics.median(times["unknown"])
say("reset_timing", s=round(sum(times["known"] + times["unknown"]) / 1000, 3),
    outcome=f"registered {k:.0f} ms, unknown {u:.0f} ms (median of 5 each); {ask_sink() - before} mails sent in-request")

# 4. one inbox flooded: 20 reset requests for one address, each from another client address.
User.objects.create_user(email="flooded@example.com", password="the-right-one-42")
before, before_q = ask_sink(), queued()
t0 = time.perf_counter()
codes = [Client(REMOTE_ADDR=f"10.2.0.{i}").post("/accounts/password_reset/", {"email": "flooded@example.com"}).status_code
         for i in range(20)]
dt = time.perf_counter() - t0
n = ask_sink() - before
say("reset_flood", s=round(dt, 3), outcome=f"{n} mails sent ({n / dt:.1f}/s), {codes.count(429)} refused (429), "
                                            f"{queued() - before_q} queued for the worker")
'''


def _run(tree: Path, *, cap: int, port: int, log: Path) -> dict[str, dict]:
    env = dict(os.environ, EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(port), EMAIL_USE_TLS="false",
               SINK_PORT=str(port), SINK_LOG=str(log), PYTHONPATH=str(tree))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(tree)], cwd=tree, env=env, capture_output=True,
                              text=True, timeout=cap)
        out = proc.stdout
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out += json.dumps({"case": "_killed", "outcome": f"> {cap} s (killed)"}) + "\n"
    rows = {}
    for line in out.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["case"]] = row
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap", type=int, default=300, help="seconds per side (includes starting its services)")
    ap.add_argument("--before", default="97d1acf")
    args = ap.parse_args()
    old = Path("/tmp") / f"bench-before-accounts-{args.before}"
    if not old.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(old), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        (old / ".venv").symlink_to(ROOT / ".venv")
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-accounts-mail-{os.getpid()}.log"

    log.write_bytes(b"")
    _SmtpSink.log = log
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _SmtpSink)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    sides = {}
    for name, tree in (("before", old), ("after", ROOT)):
        _SmtpSink.count = 0
        sides[name] = _run(tree, cap=args.cap, port=port, log=log)
    server.shutdown()
    log.unlink(missing_ok=True)
    names = {"takeover": "attacker signs up the victim's address, then the victim; victim opens the attacker's link "
                         "first",
             "login": "30 wrong passwords then the right one (one account, one client)",
             "reset_timing": "password reset: time to answer, registered vs unknown address",
             "reset_flood": "20 reset requests for one inbox from 20 client addresses"}

    def cell(side: str, case: str) -> str:
        row = sides[side].get(case) or sides[side].get("_killed")
        if row is None:
            return "(no result)"
        extra = f" · {row['s']} s, peak {row['peak_mib']} MiB" if "s" in row else ""
        return f"{row['outcome']}{extra}"

    rows = [[names[c], cell("before", c), cell("after", c)] for c in names]
    text = "\n".join([
        "# Hostile outsiders against accounts: before and after",
        "",
        f"Before: `{args.before}`; after: this tree. Each side one process (own Postgres and Redis), Django's test "
        "client against the real views, mail over SMTP to a local sink that counts what arrives; default limits "
        "(docs/security.md, \"Logging in and resetting a password\"). Peak memory is the side's whole process "
        "(Django and its clients), so it is a ceiling, not the attack's own cost.",
        "",
        table(["case", "before", "after"], rows),
        "",
        machine(),
    ])
    write_result("hostile_accounts", text)


if __name__ == "__main__":
    main()
