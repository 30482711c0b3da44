"""Redundancy of the node-local tier: which rank keeps a copy of which rank's
local file, and XOR parity over sets of ranks on different nodes.

A job that checkpoints to node-local storage (a RAM disk, an NVMe drive)
loses a node's files with the node. Two schemes keep them recoverable, both
sent over the job's own process group, never through the shared store:

``"partner"``
    a whole copy of each rank's file on a rank of the next node (space and
    traffic: the file's size again);
``"xor"``
    SCR's XOR scheme: the ranks form sets whose members are on different
    nodes; each member's file, padded to the set's longest and cut into
    ``G - 1`` segments, adds one segment to the parity block each other
    member keeps, so the loss of any one node (one member of each set) is
    rebuilt from the survivors (space: ``1 / (G - 1)`` of the file per rank;
    traffic: each rank sends its file's size once, in segments).

The assignment is a pure function of the ranks' node names (:func:`plan`),
so every rank computes the same one, and :meth:`Plan.to_json` records it in
each local file. The codec works on bytes; what it rebuilds is checked as
any file is (every chunk's checksum) and against the length and digest that
were recorded when it was protected, before anything trusts it.
docs/DISTRIBUTED.md, "Tiers".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .errors import CorruptionError, InvalidArgumentError, NotFoundError

#: The schemes :func:`plan` knows (None: no redundancy).
SCHEMES = (None, "partner", "xor")

#: Members per XOR set unless told otherwise (SCR's SCR_SET_SIZE).
DEFAULT_SET_SIZE = 8


def digest(data: bytes) -> str:
    """The digest recorded for a protected file (BLAKE2b, 128 bits, hex)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True)
class Plan:
    """Who protects whom: the result of :func:`plan`, the same on every rank.

    ``partner[r]`` is the rank that keeps a copy of rank r's file (None when
    r is protected by an XOR set); ``sets`` the XOR sets (ranks ascending,
    each on a node of its own); ``set_of[r]`` the index of r's set or None.
    """

    scheme: Optional[str]
    nodes: tuple[str, ...]
    partner: tuple[Optional[int], ...]
    sets: tuple[tuple[int, ...], ...]
    set_of: tuple[Optional[int], ...]

    @property
    def world_size(self) -> int:
        return len(self.nodes)

    def copies_held_by(self, rank: int) -> list[int]:
        """The ranks whose files ``rank`` keeps a whole copy of."""
        return [r for r, holder in enumerate(self.partner) if holder == rank]

    def to_json(self) -> str:
        return json.dumps({"scheme": self.scheme, "nodes": list(self.nodes),
                           "partner": list(self.partner), "sets": [list(s) for s in self.sets]},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        try:
            d = json.loads(text)
            nodes = tuple(str(n) for n in d["nodes"])
            sets = tuple(tuple(int(r) for r in s) for s in d["sets"])
            partner = tuple(None if p is None else int(p) for p in d["partner"])
            scheme = d["scheme"]
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptionError(f"a recorded redundancy plan is not one: {e}") from e
        set_of: list[Optional[int]] = [None] * len(nodes)
        for i, members in enumerate(sets):
            for r in members:
                set_of[r] = i
        return cls(scheme, nodes, partner, sets, tuple(set_of))


def _node_order(nodes: Sequence[str]) -> tuple[list[str], dict[str, list[int]]]:
    """The distinct nodes in the order of their first rank, and each node's ranks."""
    order: list[str] = []
    ranks: dict[str, list[int]] = {}
    for r, node in enumerate(nodes):
        if node not in ranks:
            order.append(node)
            ranks[node] = []
        ranks[node].append(r)
    return order, ranks


def _partner_of(rank: int, nodes: Sequence[str], order: list[str],
                ranks: dict[str, list[int]]) -> int:
    """The rank of the next node (in node order) at the same place on its node."""
    node = nodes[rank]
    local = ranks[node].index(rank)
    on_next = ranks[order[(order.index(node) + 1) % len(order)]]
    return on_next[local % len(on_next)]


def plan(nodes: Sequence[str], scheme: Optional[str],
         set_size: int = DEFAULT_SET_SIZE) -> Plan:
    """Who protects whom, from every rank's node name (``nodes[r]``: rank r's node).

    Nodes are ordered by their lowest rank; a rank's place on its node is its
    order among that node's ranks.

    - ``"partner"``: rank r's copy goes to the rank at r's place (modulo that
      node's count) on the next node, the last node's to the first's.
    - ``"xor"``: the ranks at one place on their nodes, in node order, are cut
      into sets of ``set_size`` (a last set of one joins the set before it);
      a rank alone at its place joins the first set with no rank of its node,
      else it is protected by a partner copy as above.

    A rank's copy or parity is never kept on its own node. Refused: an
    unknown scheme, a set size under 2, and redundancy with one node.
    """
    if scheme not in SCHEMES:
        raise InvalidArgumentError(f"redundancy must be None, 'partner' or 'xor', not {scheme!r}")
    if isinstance(set_size, bool) or not isinstance(set_size, int) or set_size < 2:
        raise InvalidArgumentError(f"an XOR set has at least 2 members, not {set_size!r}")
    nodes = tuple(str(n) for n in nodes)
    if not nodes or any(not n for n in nodes):
        raise InvalidArgumentError("every rank needs a node name (none may be empty)")
    order, ranks = _node_order(nodes)
    world = len(nodes)
    if scheme is None:
        return Plan(None, nodes, (None,) * world, (), (None,) * world)
    if len(order) < 2:
        raise InvalidArgumentError(
            f"redundancy={scheme!r} keeps copies on other nodes, but all {world} ranks are on "
            f"node {order[0]!r} (node names: RCKPT_NODE, else the host name)")
    partner: list[Optional[int]] = [None] * world
    if scheme == "partner":
        for r in range(world):
            partner[r] = _partner_of(r, nodes, order, ranks)
        return Plan(scheme, nodes, tuple(partner), (), (None,) * world)
    sets: list[list[int]] = []
    alone: list[int] = []
    deepest = max(len(rs) for rs in ranks.values())
    for place in range(deepest):
        column = [ranks[n][place] for n in order if place < len(ranks[n])]
        if len(column) == 1:
            alone += column
            continue
        cut = [column[i:i + set_size] for i in range(0, len(column), set_size)]
        if len(cut) > 1 and len(cut[-1]) == 1:
            last = cut.pop()
            cut[-1] += last
        sets += cut
    for r in alone:
        home = next((s for s in sets if all(nodes[m] != nodes[r] for m in s)), None)
        if home is not None:
            home.append(r)
        else:
            partner[r] = _partner_of(r, nodes, order, ranks)
    set_of: list[Optional[int]] = [None] * world
    for i, members in enumerate(sets):
        members.sort()
        for r in members:
            set_of[r] = i
    return Plan(scheme, nodes, tuple(partner), tuple(tuple(s) for s in sets), tuple(set_of))


# --- XOR parity over one set ------------------------------------------------
#
# Members 0..G-1 (a set's ranks in ascending order). Member i's file, padded
# with zeros to the set's segment size times G - 1, is cut into G - 1
# segments; member j keeps the parity block
#     P_j = XOR over i != j of segment (j - i - 1) mod G of member i,
# so each of member i's segments is in exactly one other member's block. A
# lost member k is rebuilt segment by segment: for each j != k,
#     segment (j - k - 1) mod G of k = P_j XOR (XOR over i != j, k of
#                                               segment (j - i - 1) mod G of i).


def segment_size(lengths: Sequence[int]) -> int:
    """The segment length of a set whose members' files have these lengths."""
    g = len(lengths)
    if g < 2:
        raise InvalidArgumentError(f"an XOR set has at least 2 members, not {g}")
    return max(1, -(-max(lengths) // (g - 1)))


def segment_index(i: int, j: int, g: int) -> int:
    """Which of member i's segments goes into member j's parity block."""
    return (j - i - 1) % g


def segment(data: bytes, index: int, size: int) -> np.ndarray:
    """Segment ``index`` of ``data`` (zero-padded to ``size``)."""
    out = np.zeros(size, dtype=np.uint8)
    piece = np.frombuffer(data, dtype=np.uint8)[index * size:(index + 1) * size]
    out[:len(piece)] = piece
    return out


def parity_block(j: int, files: Sequence[bytes]) -> bytes:
    """Member j's parity block, from every member's file (what :func:`protect` computes apart)."""
    g, size = len(files), segment_size([len(f) for f in files])
    acc = np.zeros(size, dtype=np.uint8)
    for i, data in enumerate(files):
        if i != j:
            np.bitwise_xor(acc, segment(data, segment_index(i, j, g), size), out=acc)
    return acc.tobytes()


@dataclass(frozen=True)
class Parity:
    """What one member of an XOR set keeps besides its own file.

    ``members`` are the set's ranks; ``member`` this block's place among them;
    ``lengths`` and ``digests`` every member's file as it was protected (what
    a rebuilt file must match).
    """

    members: tuple[int, ...]
    member: int
    lengths: tuple[int, ...]
    digests: tuple[str, ...]
    block: bytes

    def meta(self) -> dict[str, Any]:
        return {"members": list(self.members), "member": self.member,
                "lengths": list(self.lengths), "digests": list(self.digests)}

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], block: bytes) -> Parity:
        try:
            p = cls(tuple(int(r) for r in meta["members"]), int(meta["member"]),
                    tuple(int(n) for n in meta["lengths"]), tuple(str(d) for d in meta["digests"]),
                    bytes(block))
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptionError(f"a parity block's record is not one: {e}") from e
        g = len(p.members)
        if not (g >= 2 and 0 <= p.member < g and len(p.lengths) == g == len(p.digests)
                and len(p.block) == segment_size(p.lengths)):
            raise CorruptionError(f"a parity block's record does not fit its block: {p.meta()}")
        return p


def rebuild_segments(k: int, g: int, reduced: Mapping[int, bytes], size: int,
                     length: int) -> bytes:
    """Member k's file from ``reduced[j]`` = P_j XOR the other survivors' segments in it."""
    out = np.zeros(size * (g - 1), dtype=np.uint8)
    for j in range(g):
        if j != k:
            index = segment_index(k, j, g)
            out[index * size:(index + 1) * size] = np.frombuffer(reduced[j], dtype=np.uint8)
    return out[:length].tobytes()


# --- over a job's process group ---------------------------------------------


@dataclass(frozen=True)
class Copy:
    """A whole copy of another rank's file, with the digest its owner computed."""

    data: bytes
    digest: str


@dataclass
class Protection:
    """What a rank keeps for others after :func:`protect`: partner copies and a parity block."""

    copies: dict[int, Copy]
    parity: Optional[Parity]


def _frame(meta: Mapping[str, Any], payload: bytes = b"") -> bytes:
    header = json.dumps(meta, separators=(",", ":")).encode()
    return len(header).to_bytes(4, "little") + header + payload


def _unframe(message: bytes) -> tuple[dict[str, Any], bytes]:
    n = int.from_bytes(message[:4], "little")
    return json.loads(message[4:4 + n]), message[4 + n:]


def _set_index(the_plan: Plan, rank: int) -> int:
    index = the_plan.set_of[rank]
    if index is None:
        raise InvalidArgumentError(f"rank {rank} is in no XOR set of the plan")
    return index


def _check_plan(comm: Any, the_plan: Plan) -> None:
    if the_plan.world_size != comm.size:
        raise InvalidArgumentError(f"the redundancy plan is for {the_plan.world_size} ranks, "
                                   f"the job has {comm.size}")


def protect(comm: Any, the_plan: Plan, data: bytes) -> Protection:
    """Collective: sends what protects this rank's ``data`` where ``the_plan`` says.

    ``comm`` is a communicator of rckpt.distributed (with ``exchange``); every
    rank calls this with its own local file's bytes. Returns what this rank
    keeps for others: the partner copies it holds and, in an XOR set, its
    parity block (with every member's length and digest).
    """
    _check_plan(comm, the_plan)
    rank, data = comm.rank, bytes(data)
    holder = the_plan.partner[rank]
    index = the_plan.set_of[rank]
    members = the_plan.sets[index] if index is not None else ()
    facts = _frame({"length": len(data), "digest": digest(data)})
    told = {r: facts for r in members if r != rank}
    if holder is not None:
        told[holder] = facts
    heard = {src: _unframe(m)[0] for src, m in comm.exchange(told).items()}
    sends: dict[int, bytes] = {}
    if holder is not None:
        sends[holder] = data
    if members:
        g, me = len(members), members.index(rank)
        lengths = tuple(len(data) if r == rank else int(heard[r]["length"]) for r in members)
        size = segment_size(lengths)
        for j, r in enumerate(members):
            if r != rank:
                sends[r] = segment(data, segment_index(me, j, g), size).tobytes()
    got = comm.exchange(sends)
    parity = None
    if members:
        acc = np.zeros(size, dtype=np.uint8)
        for r in members:
            if r != rank:
                np.bitwise_xor(acc, np.frombuffer(got[r], dtype=np.uint8), out=acc)
        digests = tuple(digest(data) if r == rank else str(heard[r]["digest"]) for r in members)
        parity = Parity(tuple(members), me, lengths, digests, acc.tobytes())
    copies = {src: Copy(got[src], str(heard[src]["digest"]))
              for src in the_plan.copies_held_by(rank)}
    return Protection(copies, parity)


def rebuild(comm: Any, the_plan: Plan, lost: Sequence[int], own: Optional[bytes],
            kept: Protection) -> Optional[bytes]:
    """Collective: rebuilds the files of the ranks in ``lost``; returns this rank's if it is one.

    ``lost`` (the same on every rank) are the ranks whose own files are gone;
    ``own`` is this rank's file (None exactly when this rank is lost) and
    ``kept`` what :func:`protect` left here (what a lost rank kept is gone:
    pass ``Protection({}, None)``). Raises, the same on every rank,
    NotFoundError when a lost rank cannot be rebuilt (its partner's copy gone
    too, two members of one set gone); on the lost rank, CorruptionError when
    what arrived does not match the length and digest recorded at protection.
    """
    _check_plan(comm, the_plan)
    rank = comm.rank
    lost_ranks = sorted({int(r) for r in lost})
    if (rank in lost_ranks) != (own is None):
        raise InvalidArgumentError(f"rank {rank}: own is None exactly when this rank is lost")
    offer = {"copies": sorted(kept.copies), "parity": kept.parity is not None}
    offers = [json.loads(m) for m in comm.allgather(json.dumps(offer).encode())]
    failing, lost_in_set = [], {}
    for k in lost_ranks:
        holder, index = the_plan.partner[k], the_plan.set_of[k]
        if holder is not None:
            if holder in lost_ranks or k not in offers[holder]["copies"]:
                failing.append(f"rank {k} (its copy on rank {holder} is gone too)")
        elif index is not None:
            members = the_plan.sets[index]
            gone = [r for r in members if r in lost_ranks or not offers[r]["parity"]]
            if len(gone) > 1:
                failing.append(f"rank {k} (its XOR set {list(members)} lost ranks {gone})")
            lost_in_set[index] = k
        else:
            failing.append(f"rank {k} (no redundancy)")
    if failing:
        raise NotFoundError("the local tier cannot be rebuilt for " + "; ".join(failing))
    # 1. Partner copies go home.
    copies = comm.exchange({k: _frame({"digest": kept.copies[k].digest}, kept.copies[k].data)
                            for k in lost_ranks if the_plan.partner[k] == rank})
    # 2. In a set that lost member k, each survivor sends every other survivor
    #    the segment of its file in that survivor's parity block; 3. each
    #    survivor j sends k its block reduced by them: k's segment for j.
    index = the_plan.set_of[rank]
    helped = lost_in_set.get(index) if index is not None else None
    parity = kept.parity if helped is not None and own is not None else None
    sends: dict[int, bytes] = {}
    if parity is not None and own is not None:
        members, g = parity.members, len(parity.members)
        me, k = parity.member, parity.members.index(helped)
        size = segment_size(parity.lengths)
        sends = {r: segment(own, segment_index(me, j, g), size).tobytes()
                 for j, r in enumerate(members) if r != rank and j != k}
    pieces = comm.exchange(sends)
    reduced_sends: dict[int, bytes] = {}
    if parity is not None and helped is not None:
        acc = np.frombuffer(parity.block, dtype=np.uint8).copy()
        for piece in pieces.values():
            np.bitwise_xor(acc, np.frombuffer(piece, dtype=np.uint8), out=acc)
        reduced_sends[helped] = _frame(parity.meta(), acc.tobytes())
    reduced = comm.exchange(reduced_sends)
    if own is not None:
        return None
    holder = the_plan.partner[rank]
    if holder is not None:
        meta, data = _unframe(copies[holder])
        expected_length = len(data)
    else:
        members = the_plan.sets[_set_index(the_plan, rank)]
        g, k = len(members), members.index(rank)
        blocks, records = {}, []
        for j, r in enumerate(members):
            if r != rank:
                record, blocks[j] = _unframe(reduced[r])
                records.append((record["lengths"], record["digests"]))
        if any(r != records[0] for r in records):
            raise CorruptionError(f"rank {rank}: the parity blocks of XOR set {list(members)} "
                                  f"disagree on what they protect")
        lengths, digests = records[0]
        expected_length = int(lengths[k])
        meta = {"digest": digests[k]}
        data = rebuild_segments(k, g, blocks, segment_size(lengths), expected_length)
    if len(data) != expected_length or digest(data) != meta["digest"]:
        raise CorruptionError(f"rank {rank}: the file rebuilt from the local tier's redundancy "
                              f"does not match what was protected (digest {digest(data)}, "
                              f"expected {meta['digest']})")
    return data
