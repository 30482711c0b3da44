"""The job's side of test_redundancy.py: for each scenario, every rank
protects its own bytes over the job's communicator (rckpt.redundancy.protect),
the ranks named lost drop their own bytes and what they kept, and every rank
rebuilds (rckpt.redundancy.rebuild). Each rank writes what happened in each
scenario to OUT/<rank>.json.

    redundancy_driver.py OUT SCENARIOS

SCENARIOS: a JSON list of [nodes, scheme, lost, damage]: a node name per rank,
"partner" or "xor", the lost ranks, and "" or "parity" (a byte of every
survivor's parity block flipped before the rebuild) or "copy" (of every
partner copy).
"""

import json
import os
import sys

from distributed_driver import job


def data_of(rank):
    """Rank r's file: lengths differ from rank to rank (the set pads to its longest)."""
    import numpy as np
    rng = np.random.default_rng(1000 + rank)
    return rng.integers(0, 256, 10_000 + 3_333 * rank, dtype=np.uint8).tobytes()


def scenario(comm, rank, nodes, scheme, lost, damage):
    from rckpt import redundancy
    from rckpt.errors import Error
    plan = redundancy.plan(nodes, scheme, set_size=3)
    kept = redundancy.protect(comm, plan, data_of(rank))
    record = {"rank": rank, "copies": sorted(kept.copies),
              "parity_bytes": len(kept.parity.block) if kept.parity else 0}
    if damage == "parity" and kept.parity is not None:
        block = bytearray(kept.parity.block)
        block[len(block) // 2] ^= 0x10
        kept.parity = redundancy.Parity(kept.parity.members, kept.parity.member,
                                        kept.parity.lengths, kept.parity.digests, bytes(block))
    if damage == "copy":
        kept.copies = {r: redundancy.Copy(c.data[:-1] + bytes([c.data[-1] ^ 1]), c.digest)
                       for r, c in kept.copies.items()}
    own = None if rank in lost else data_of(rank)
    if rank in lost:
        kept = redundancy.Protection({}, None)
    try:
        back = redundancy.rebuild(comm, plan, lost, own, kept)
        record["rebuilt"] = back is not None
        record["rebuilt_equal"] = back == data_of(rank) if back is not None else None
    except Error as e:
        record["error"] = [type(e).__name__, str(e)]
    return record


def main(out, scenarios):
    from rckpt.distributed import _communicator
    me = job()
    comm = _communicator(me.comm, 60)
    records = [scenario(comm, me.rank, *s) for s in json.loads(scenarios)]
    with open(os.path.join(out, f"{me.rank}.json"), "w") as f:
        json.dump(records, f)
    comm.barrier()
    me.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
