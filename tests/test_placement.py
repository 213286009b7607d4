"""Placement options for the actors that prefer a node (actors.common.placement), in-process.

The two-node test (tests/test_multinode.py) shows the options at work; these pin down the two
things it depends on: the preference is soft, and the request is never empty (Ray places an
actor that asks for no resource at all on a random node, whatever its soft affinity says)."""

from __future__ import annotations

from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.common.placement import strategy

NODE = "ab" * 28


def test_no_preferred_node_means_no_options() -> None:
    assert strategy([]) == {}


def test_a_preferred_node_is_soft_and_the_request_is_not_empty() -> None:
    options = strategy([NODE])
    affinity = options["scheduling_strategy"]
    assert isinstance(affinity, NodeAffinitySchedulingStrategy)
    assert affinity.node_id == NODE and affinity.soft
    assert options["memory"] >= 1


def test_one_of_several_nodes_is_chosen() -> None:
    others = ["cd" * 28, "ef" * 28]
    chosen = {strategy([NODE, *others])["scheduling_strategy"].node_id for _ in range(60)}
    assert chosen <= {NODE, *others} and len(chosen) > 1
