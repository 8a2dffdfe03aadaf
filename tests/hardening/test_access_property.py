"""Access control as a property: random worlds, random queries, zero leaks.

A pool of small datasets is ingested once per test (real chunker, MiniLM, outbox, embedded Qdrant);
each generated world rewrites owners, global flags, shares (granted and revoked) and document
placement in Postgres only, inside a savepoint rolled back after the example, so the Qdrant payload
is stale in every world. The expected accessible set comes from the generated world, not from
projects/access.py. The bench (bench/access_property.py) runs the same property over >= 500 worlds.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.hardening.access_world import (
    Stats,
    build_people_pool,
    build_pool,
    check_people_world,
    check_world,
    people_worlds,
    worlds,
)
from tests.search.ctx_fixtures import edge_index  # noqa: F401

pytestmark = pytest.mark.django_db
SETTINGS = settings(max_examples=25, deadline=None, database=None, derandomize=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


@pytest.fixture
def pool(edge_index, tmp_path):
    return build_pool(tmp_path / "pool")


def test_no_query_channel_returns_or_logs_an_inaccessible_chunk(pool):
    """Context results, why, pack, rules results/candidates/book filter, answer citations, log rows, cited pages."""
    total = Stats()

    @SETTINGS
    @given(world=worlds)
    def prop(world):
        stats = check_world(pool, world)
        total.merge(stats)
        assert not stats.leaks, stats.leaks

    prop()
    # the property ran for real: queries were answered, results and log rows checked, non-members refused
    assert total.worlds >= 25 and total.queries > total.worlds and total.results_checked > 100
    assert total.log_rows_checked > 0 and total.completeness_checks > 0 and total.non_member_queries > 0
    assert total.pages_opened > 0


def test_stale_payload_after_revoke_and_move_never_leaks(pool):
    """The named cases, explicitly: a share revoked and a dataset moved after indexing (no outbox applied)."""
    world = {"n_projects": 2, "n_users": 1, "extra_members": [], "owners": [0, 1, 1, 1, 1, 1, 1, 1],
             "globals": [False] * 8, "shares": [(1, 0), (6, 0)],
             "ops": [("query", 0, 0, "context", "blorptex lantern", True, 50),
                     ("query", 0, 0, "rules", "in the alpha codex: zephyrine dash saving throw", True, 8),
                     ("revoke", 1, 0), ("revoke", 6, 0), ("owner", 0, 1),
                     ("query", 0, 0, "context", "zephyrine and blorptex", True, 50),
                     ("query", 0, 0, "rules", "in the alpha codex: glimmerack dash saving throw", True, 8),
                     ("query", 0, 0, "answer", "glimmerack dash saving throw", True, 8),
                     ("owner", 0, 0), ("move_doc", 0, 3),
                     ("query", 0, 0, "context", "zephyrine lantern", True, 50),
                     ("query", 0, 1, "context", "zephyrine lantern", True, 50)]}
    stats = check_world(pool, world)
    assert not stats.leaks, stats.leaks
    assert stats.completeness_checks == 3 and stats.non_member_queries == 1  # u0 is not in p1: 404


@pytest.fixture
def people_pool(db):
    return build_people_pool()


def test_people_search_never_surfaces_hidden_cards(people_pool):
    total = Stats()

    @settings(max_examples=10, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(world=people_worlds)
    def prop(world):
        stats = check_people_world(people_pool, world)
        total.merge(stats)
        assert not stats.leaks, stats.leaks

    prop()
    assert total.people_searches >= 10 and total.people_checked > 0
