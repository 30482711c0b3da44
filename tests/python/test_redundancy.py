"""rckpt.redundancy: who keeps whose copy (a pure function of the ranks' nodes),
SCR's XOR parity (any one member of a set rebuilt from the others), and both
over a job's communicator under mpirun and torchrun (gloo), nodes simulated
by name on one machine (redundancy_driver.py)."""

import json
import os
import random
import tempfile

import numpy as np
import pytest

from rckpt import redundancy
from rckpt.errors import InvalidArgumentError
from test_distributed import launcher, run_job  # noqa: F401  (the launcher fixture)

DRIVER = os.path.join(os.path.dirname(__file__), "redundancy_driver.py")


def check_plan(p):
    """What every plan must hold: each rank protected once, never on its own node."""
    for r in range(p.world_size):
        holder, index = p.partner[r], p.set_of[r]
        assert p.scheme is None or (holder is None) != (index is None), (r, p)
        if holder is not None:
            assert p.nodes[holder] != p.nodes[r], (r, p)
    for i, members in enumerate(p.sets):
        assert len(members) >= 2 and list(members) == sorted(members)
        assert len({p.nodes[m] for m in members}) == len(members), members
        assert all(p.set_of[m] == i for m in members)
    assert redundancy.Plan.from_json(p.to_json()) == p


def test_partner_copies_go_to_the_same_place_on_the_next_node():
    p = redundancy.plan(["a", "a", "b", "b"], "partner")
    assert p.partner == (2, 3, 0, 1)
    assert p.copies_held_by(2) == [0] and p.copies_held_by(0) == [2]
    check_plan(p)
    # Uneven nodes: node c's one rank keeps the copies of both of b's.
    p = redundancy.plan(["a", "b", "b", "c"], "partner")
    assert p.partner == (1, 3, 3, 0)
    check_plan(p)


def test_xor_sets_take_one_rank_a_node_and_a_lone_rank_joins_or_gets_a_partner():
    p = redundancy.plan([f"n{i}" for i in range(8)], "xor", set_size=3)
    assert p.sets == ((0, 1, 2), (3, 4, 5), (6, 7))
    p = redundancy.plan([f"n{i}" for i in range(7)], "xor", set_size=3)
    assert p.sets == ((0, 1, 2), (3, 4, 5, 6))  # a last set of one joins the one before
    # Ranks 0, 1 on a, 2 on b: 1 is alone at its place and every set has a
    # rank of a, so a copy on b protects it.
    p = redundancy.plan(["a", "a", "b"], "xor")
    assert p.sets == ((0, 2),) and p.partner == (None, 2, None)
    # Two ranks on a, one on b and one on c: 1 joins the set of b and c's.
    p = redundancy.plan(["a", "a", "b", "b", "c"], "xor", set_size=2)
    check_plan(p)
    check_plan(redundancy.plan(["x", "y"], "xor"))
    p = redundancy.plan(["x"], None)
    assert p.partner == (None,) and p.sets == ()
    check_plan(p)


@pytest.mark.parametrize("scheme", ["partner", "xor"])
def test_every_layout_protects_every_rank_off_its_node(scheme):
    rng = random.Random(7)
    for _ in range(300):
        world = rng.randint(2, 40)
        names = [f"node{rng.randint(0, rng.randint(1, 9))}" for _ in range(world)]
        if len(set(names)) < 2:
            continue
        size = rng.randint(2, 9)
        p = redundancy.plan(names, scheme, set_size=size)
        check_plan(p)
        assert redundancy.plan(list(names), scheme, set_size=size) == p  # the same on every rank


def test_bad_requests_are_refused_with_the_reason():
    with pytest.raises(InvalidArgumentError, match="all 3 ranks are on node 'h'"):
        redundancy.plan(["h", "h", "h"], "partner")
    with pytest.raises(InvalidArgumentError, match="must be None, 'partner' or 'xor', not 'raid'"):
        redundancy.plan(["a", "b"], "raid")
    with pytest.raises(InvalidArgumentError, match="at least 2 members, not 1"):
        redundancy.plan(["a", "b"], "xor", set_size=1)
    with pytest.raises(InvalidArgumentError, match="node name"):
        redundancy.plan(["a", ""], "xor")


@pytest.mark.parametrize("g", [2, 3, 4, 5])
def test_any_one_member_is_rebuilt_from_the_others_parity_and_files(g):
    rng = np.random.default_rng(g)
    for lengths in ([0] * g, [1] * g, list(rng.integers(0, 5000, g)), [4096] * (g - 1) + [7]):
        files = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in lengths]
        blocks = [redundancy.parity_block(j, files) for j in range(g)]
        size = redundancy.segment_size(lengths)
        assert all(len(b) == size for b in blocks)
        for k in range(g):
            reduced = {}
            for j in range(g):
                if j != k:
                    acc = np.frombuffer(blocks[j], dtype=np.uint8).copy()
                    for i in range(g):
                        if i not in (j, k):
                            acc ^= redundancy.segment(files[i], redundancy.segment_index(i, j, g),
                                                      size)
                    reduced[j] = acc.tobytes()
            assert redundancy.rebuild_segments(k, g, reduced, size, lengths[k]) == files[k]


def test_parity_space_is_one_over_g_minus_one_of_the_longest_file():
    files = [bytes(9000), bytes(3000), bytes(100), bytes(9000)]
    assert len(redundancy.parity_block(0, files)) == 3000


# (nodes, scheme, lost ranks, damage): what each job runs, one job per
# world size and launcher (a job's start costs more than its scenarios).
SCENARIOS = {
    4: [(["a", "a", "b", "b"], "partner", [0, 1], ""),  # node a gone
        (["a", "b", "c", "d"], "xor", [2], ""),         # one member of the 3-set
        (["a", "a", "b", "b"], "xor", [2, 3], "")],     # node b gone: one member of each set
    3: [(["a", "a", "b"], "xor", [0, 1], ""),           # a set member and a partner-protected rank
        (["a", "b", "c"], "xor", [0, 1], ""),           # two members of one set: refused
        (["a", "b", "c"], "xor", [1], "parity"),        # damaged parity
        (["a", "b", "c"], "partner", [1], "copy")],     # a damaged copy
}


@pytest.fixture(scope="module")
def jobs(launcher):
    """Every rank's records of every scenario, per world size."""
    results = {}
    for world, scenarios in SCENARIOS.items():
        with tempfile.TemporaryDirectory() as out:
            run_job(launcher, world, DRIVER, out, json.dumps(scenarios))
            per_rank = [json.load(open(os.path.join(out, f"{r}.json"))) for r in range(world)]
        results[world] = [[per_rank[r][i] for r in range(world)] for i in range(len(scenarios))]
    return results


@pytest.mark.parametrize("world,index", [(4, 0), (4, 1), (4, 2), (3, 0)])
def test_a_lost_nodes_ranks_are_rebuilt_bit_for_bit_over_the_job(jobs, world, index):
    lost = SCENARIOS[world][index][2]
    for r in jobs[world][index]:
        assert "error" not in r, r
        assert r["rebuilt"] == (r["rank"] in lost)
        if r["rank"] in lost:
            assert r["rebuilt_equal"] is True, r


def test_two_members_of_one_set_lost_is_refused_on_every_rank(jobs):
    for r in jobs[3][1]:
        assert r["error"][0] == "NotFoundError" and "XOR set [0, 1, 2]" in r["error"][1], r


@pytest.mark.parametrize("index", [2, 3])
def test_damaged_redundancy_is_never_trusted(jobs, index):
    results = jobs[3][index]
    lost = results[1]
    assert lost["error"][0] == "CorruptionError" and "does not match" in lost["error"][1], lost
    assert all("error" not in r for r in results if r["rank"] != 1)


def test_partner_traffic_is_a_copy_and_xor_parity_a_segment(jobs):
    # 4 ranks on a, a, b, b with partners: each rank keeps one copy. On a,
    # b, c, d with set_size 3 the set is (0, 1, 2, 3) (a last set of one
    # joins the one before): each member keeps a block a third of the
    # longest file.
    assert [r["copies"] for r in jobs[4][0]] == [[2], [3], [0], [1]]
    longest = 10_000 + 3_333 * 3
    assert {r["parity_bytes"] for r in jobs[4][1]} == {-(-longest // 3)}
