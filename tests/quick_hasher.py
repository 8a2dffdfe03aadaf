"""A password hasher for the test process: Django's PBKDF2 with one iteration instead of a million.

Why: one hash costs about 0.45 s on the 2-core machines, and the suite makes and checks hundreds of passwords
(every make_user, every login), which was minutes of a run spent in key stretching that no test is about.
The algorithm name stays pbkdf2_sha256 and the iteration count is stored in each hash, so a server started by a
test (tests/live.py, with the product's settings) still verifies these hashes, and upgrades them on login as it
would any hash made with fewer iterations than it uses.
"""
from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
