"""RFC 6962 / RFC 9162 Merkle tree hashes over SHA-256, with inclusion (audit) proofs.

Leaves and interior nodes are hashed with different one-byte prefixes (0x00 and 0x01), so
an interior node can never be passed off as a leaf (second-preimage hazard of plain
Merkle trees). A tree of n leaves splits at the largest power of two smaller than n.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"


def leaf_hash(leaf: bytes) -> bytes:
    """Return ``SHA-256(0x00 || leaf)``."""
    return hashlib.sha256(_LEAF_PREFIX + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """Return the Merkle tree hash (RFC 6962 §2.1 MTH) of ``leaves``, in order.

    The root of the empty list is ``SHA-256(b"")``.
    """
    if not leaves:
        return hashlib.sha256(b"").digest()
    return _subtree_root([leaf_hash(leaf) for leaf in leaves])


def merkle_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """Return the audit path (RFC 6962 §2.1.1 PATH) for ``leaves[index]``, leaf side first.

    Raises ``IndexError`` when ``index`` is not a position in ``leaves``.
    """
    if not 0 <= index < len(leaves):
        raise IndexError(f"leaf index {index} outside a tree of {len(leaves)} leaves")
    return _path(index, [leaf_hash(leaf) for leaf in leaves])


def verify_merkle_proof(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Return whether ``proof`` shows ``leaf`` at ``index`` in the tree of ``size`` with ``root``.

    Implements the inclusion-proof check of RFC 9162 §2.1.3.2; never raises for bad input.
    """
    if not 0 <= index < size:
        return False
    computed = _root_from_path(leaf_hash(leaf), index, size, proof)
    return computed is not None and hmac.compare_digest(computed, root)


def _split_point(count: int) -> int:
    """Largest power of two strictly smaller than ``count`` (``count`` >= 2)."""
    return 1 << ((count - 1).bit_length() - 1)


def _subtree_root(hashes: Sequence[bytes]) -> bytes:
    if len(hashes) == 1:
        return hashes[0]
    split = _split_point(len(hashes))
    return node_hash(_subtree_root(hashes[:split]), _subtree_root(hashes[split:]))


def _path(index: int, hashes: Sequence[bytes]) -> list[bytes]:
    if len(hashes) == 1:
        return []
    split = _split_point(len(hashes))
    if index < split:
        return [*_path(index, hashes[:split]), _subtree_root(hashes[split:])]
    return [*_path(index - split, hashes[split:]), _subtree_root(hashes[:split])]


def _root_from_path(computed: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes | None:
    position, last = index, size - 1
    for sibling in proof:
        if last == 0:
            return None  # proof longer than the tree is deep
        if position % 2 == 1 or position == last:
            computed = node_hash(sibling, computed)
            # A right-edge node with no sibling at this level is promoted unchanged.
            while position % 2 == 0 and position != 0:
                position, last = position >> 1, last >> 1
        else:
            computed = node_hash(computed, sibling)
        position, last = position >> 1, last >> 1
    return computed if last == 0 else None
