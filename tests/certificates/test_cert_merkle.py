"""RFC 6962 Merkle tree hashes and audit paths."""

from __future__ import annotations

import hashlib

import pytest

from certificates import merkle_proof, merkle_root, verify_merkle_proof


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _leaf(data: bytes) -> bytes:
    return _h(b"\x00" + data)


def _node(left: bytes, right: bytes) -> bytes:
    return _h(b"\x01" + left + right)


A, B, C, D, E = (bytes([n]) * 32 for n in range(1, 6))


def test_empty_tree() -> None:
    assert merkle_root([]) == _h(b"")


def test_hand_computed_roots() -> None:
    ab = _node(_leaf(A), _leaf(B))
    cd = _node(_leaf(C), _leaf(D))
    assert merkle_root([A]) == _leaf(A)
    assert merkle_root([A, B]) == ab
    # Three leaves split at 2: the odd leaf is promoted, never duplicated.
    assert merkle_root([A, B, C]) == _node(ab, _leaf(C))
    assert merkle_root([A, B, C, D]) == _node(ab, cd)
    assert merkle_root([A, B, C, D, E]) == _node(_node(ab, cd), _leaf(E))


def test_leaf_and_node_hashes_are_domain_separated() -> None:
    # Without the prefixes, the two-leaf root would equal the one-leaf root of l||r.
    assert merkle_root([A, B]) != merkle_root([_leaf(A) + _leaf(B)])
    assert merkle_root([A]) != _h(A)


# The certificate-transparency reference vectors (leaves of 0, 1, 2, 4, 4, 8, 8, 16 bytes).
_CT_LEAVES = [
    bytes.fromhex(text)
    for text in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
_CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


@pytest.mark.parametrize("size", range(1, 9))
def test_certificate_transparency_vectors(size: int) -> None:
    assert merkle_root(_CT_LEAVES[:size]).hex() == _CT_ROOTS[size - 1]


def _leaves(size: int) -> list[bytes]:
    return [_h(index.to_bytes(4, "big")) for index in range(size)]


def _proofs(size: int) -> tuple[bytes, list[tuple[int, bytes, list[bytes]]]]:
    """The root of ``size`` leaves, and (index, leaf, proof) for every leaf."""
    leaves = _leaves(size)
    return merkle_root(leaves), [
        (i, leaf, merkle_proof(leaves, i)) for i, leaf in enumerate(leaves)
    ]


@pytest.mark.parametrize("size", range(1, 18))
def test_every_proof_verifies(size: int) -> None:
    root, proofs = _proofs(size)
    for index, leaf, proof in proofs:
        assert len(proof) <= max(1, (size - 1).bit_length())
        assert verify_merkle_proof(leaf, index, size, proof, root)


@pytest.mark.parametrize("size", range(1, 18))
def test_tampered_proofs_fail(size: int) -> None:
    root, proofs = _proofs(size)
    for index, leaf, proof in proofs:
        assert not verify_merkle_proof(leaf + b"x", index, size, proof, root)
        assert not verify_merkle_proof(leaf, index, size, proof, _h(root))
        assert not verify_merkle_proof(leaf, index, size, [*proof, root], root)
        for other in range(size + 1):
            if other != index:
                assert not verify_merkle_proof(leaf, other, size, proof, root)
        for position in range(len(proof)):
            bent = [*proof]
            bent[position] = _h(bent[position])
            assert not verify_merkle_proof(leaf, index, size, bent, root)
            assert not verify_merkle_proof(leaf, index, size, proof[:position], root)


def test_proof_does_not_verify_for_a_different_tree_size() -> None:
    for size in range(1, 18):
        leaves = _leaves(size)
        for index in range(size):
            proof = merkle_proof(leaves, index)
            for wrong in range(1, 18):
                if wrong != size:
                    root = merkle_root(_leaves(wrong))
                    assert not verify_merkle_proof(leaves[index], index, wrong, proof, root)


def test_known_proof_for_five_leaves() -> None:
    ab = _node(_leaf(A), _leaf(B))
    cd = _node(_leaf(C), _leaf(D))
    assert merkle_proof([A, B, C, D, E], 2) == [_leaf(D), ab, _leaf(E)]
    assert merkle_proof([A, B, C, D, E], 4) == [_node(ab, cd)]


@pytest.mark.parametrize(("size", "index"), [(0, 0), (3, 3), (3, -1)])
def test_proof_index_out_of_range(size: int, index: int) -> None:
    with pytest.raises(IndexError):
        merkle_proof(_leaves(size), index)


def test_verify_refuses_impossible_positions() -> None:
    assert not verify_merkle_proof(A, 0, 0, [], merkle_root([]))
    assert not verify_merkle_proof(A, -1, 1, [], merkle_root([A]))
