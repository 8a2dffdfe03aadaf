"""The embedded store opens again after a handle was dropped without close() while the collector was held off."""
from __future__ import annotations

import gc

from search.engine.index_embedded import EdgeIndex


def test_a_store_dropped_without_close_in_a_reference_cycle_does_not_keep_it_locked(tmp_path):
    first = EdgeIndex(path=tmp_path, model_id="base-model", dim=4)
    first.for_model(model_id="adapted-model", dim=4)  # a sibling: the handle and it refer to each other
    gc.disable()  # as a bulk job defers the cyclic collector (config.gcpolicy)
    try:
        del first  # dropped without close(): its shards keep their WAL locks until the cycle is collected
        again = EdgeIndex(path=tmp_path, model_id="base-model", dim=4)
    finally:
        gc.enable()
    assert again.counts() == {name: 0 for name in again.counts()}
    again.close()
