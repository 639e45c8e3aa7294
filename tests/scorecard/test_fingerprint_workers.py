"""Model info from several xdist workers: per-process counters add up, the model's own fields stay."""

from __future__ import annotations

from faithtests.scorecard.fingerprint import merge_worker_models


def test_process_counters_are_summed_over_workers() -> None:
    trunc = {"caption": {"truncated": 2, "checked": 10, "limit": 77, "longest_tokens": 90}}
    gw0 = {"clip": {"spec": "open_clip:ViT", "output_cache": {"dir": "/c", "hits": 3, "writes": 1},
                    "truncated_inputs": trunc}}
    gw1 = {"clip": {"spec": "open_clip:ViT", "output_cache": {"dir": "/c", "hits": 5, "writes": 0},
                    "truncated_inputs": {"caption": {"truncated": 1, "checked": 4, "limit": 77,
                                                     "longest_tokens": 120}}},
           "vlm": {"spec": "hf:/m"}}
    got = merge_worker_models({"gw1": gw1, "gw0": gw0})
    assert got["clip"]["spec"] == "open_clip:ViT" and got["vlm"] == {"spec": "hf:/m"}
    assert got["clip"]["output_cache"] == {"dir": "/c", "hits": 8, "writes": 1}
    assert got["clip"]["truncated_inputs"] == {
        "caption": {"truncated": 3, "checked": 14, "limit": 77, "longest_tokens": 120}}
    # one process: unchanged (the serial run)
    assert merge_worker_models({"main": gw0}) == gw0


def test_a_served_models_requests_per_suite_add_up_over_workers() -> None:
    """``endpoint`` (plugin.api_cost.endpoint_info): each worker's requests, probe and per-suite counts
    are its own process's; the run's are their sums, suite by suite."""
    gw0 = {"api": {"endpoint": {"requests": 12, "bounded_letters": 0, "probe": 2, "suites": {"a": 10}}}}
    gw1 = {"api": {"endpoint": {"requests": 9, "bounded_letters": 1, "probe": 2, "suites": {"a": 3, "b": 4}}}}
    got = merge_worker_models({"gw0": gw0, "gw1": gw1})["api"]["endpoint"]
    assert got == {"requests": 21, "bounded_letters": 1, "probe": 4, "suites": {"a": 13, "b": 4}}
    assert got["requests"] == got["probe"] + sum(got["suites"].values())
