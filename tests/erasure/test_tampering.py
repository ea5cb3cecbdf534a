"""Tampered certificates, audit exports and subject exports are refused, naming why;
untampered certificates verify with an independent JOSE library (jwcrypto)."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from jwcrypto import jwk, jws

from certificates import VERIFICATION_REASONS, CertificateVerificationError
from eventstore.exports import chain_problem
from oblivio import MemoryClient
from oblivio.memory.compliance import (
    ExportVerificationError,
    verify_audit_export,
    verify_subject_export,
)
from tests.erasure._support import completed, seed_subject

ALICE, BOB, CAROL = "alice@example.org", "bob@example.org", "carol@example.org"
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
Refusal = (ExportVerificationError, CertificateVerificationError)


@pytest.fixture
def certified(client: MemoryClient) -> dict[str, Any]:
    """A verified forget certificate of a seeded subject."""
    seed_subject(client, ALICE)
    return completed(client.forget(ALICE, wait=True))


@pytest.fixture
def audited(client: MemoryClient) -> None:
    """Several erasures, so that the audit stream has lines to tamper with."""
    for user in (ALICE, BOB, CAROL):
        event_id = client.store(f"note {user}", user_id=user)
        client.store(f"another note {user}", user_id=user)
        completed(client.delete_event(event_id, wait=True))
    completed(client.forget(BOB, wait=True))


def flip(text: str, index: int) -> str:
    """``text`` with the base64url character at ``index`` replaced by another one."""
    old = text[index]
    new = B64URL[(B64URL.index(old) + 17) % 64]
    return text[:index] + new + text[index + 1 :]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def refusal_reason(client: MemoryClient, certificate: Any) -> str:
    with pytest.raises(CertificateVerificationError) as caught:
        client.verify_certificate(certificate)
    reason = caught.value.reason
    assert reason in VERIFICATION_REASONS
    assert reason in str(caught.value)
    return reason


@pytest.mark.parametrize("member", ["protected", "payload", "signature"])
def test_a_flipped_byte_anywhere_is_refused(
    client: MemoryClient, certified: dict[str, Any], member: str
) -> None:
    text = certified[member]
    for index in (0, len(text) // 3, len(text) // 2, len(text) - 2, len(text) - 1):
        tampered = {**certified, member: flip(text, index)}
        reason = refusal_reason(client, tampered)
        if member != "protected" and index < len(text) - 1:
            # Decodable bytes that differ: only the signature can notice.
            assert reason == "bad_signature", (member, index, reason)


def test_structural_tampering_is_refused_with_the_right_reason(
    client: MemoryClient, certified: dict[str, Any]
) -> None:
    payload = json.loads(unb64(certified["payload"]))
    payload["erasure"]["events_erased"] += 1
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert refusal_reason(client, {**certified, "payload": b64(canonical.encode())}) == (
        "bad_signature"
    )
    assert refusal_reason(client, {k: v for k, v in certified.items() if k != "signature"}) == (
        "malformed_serialization"
    )
    with_header = {**certified, "header": {"kid": "other"}}
    assert refusal_reason(client, with_header) == "malformed_serialization"
    header = json.loads(unb64(certified["protected"]))
    for changed in ({**header, "alg": "none"}, {**header, "alg": "HS256"}):
        protected = b64(json.dumps(changed, sort_keys=True, separators=(",", ":")).encode())
        assert refusal_reason(client, {**certified, "protected": protected}) == ("unsupported_alg")
    assert refusal_reason(client, "{not json") == "malformed_serialization"
    with pytest.raises(CertificateVerificationError) as caught:
        client.verify_certificate(certified, {"keys": []})
    assert caught.value.reason == "unknown_kid"


def test_certificate_verifies_with_jwcrypto(
    client: MemoryClient, certified: dict[str, Any]
) -> None:
    header = json.loads(unb64(certified["protected"]))
    [entry] = [k for k in client.jwks()["keys"] if k["kid"] == header["kid"]]
    assert (header["alg"], entry["kty"], entry["crv"]) == ("Ed25519", "OKP", "Ed25519")

    token = jws.JWS()
    token.deserialize(json.dumps(certified))
    token.verify(jwk.JWK(**entry), alg="Ed25519")

    assert json.loads(token.payload) == client.verify_certificate(certified)
    assert token.jose_header["typ"] == "oblivio-forget-certificate+jws"

    tampered = jws.JWS()
    tampered.deserialize(json.dumps({**certified, "payload": flip(certified["payload"], 40)}))
    with pytest.raises(jws.InvalidJWSSignature):
        tampered.verify(jwk.JWK(**entry), alg="Ed25519")


def test_audit_manifest_verifies_with_jwcrypto(
    client: MemoryClient, certified: dict[str, Any]
) -> None:
    manifest = json.loads(client.export_audit().splitlines()[-1])["manifest"]
    kid = json.loads(unb64(manifest["protected"]))["kid"]
    [entry] = [k for k in client.jwks()["keys"] if k["kid"] == kid]
    token = jws.JWS()
    token.deserialize(json.dumps(manifest))
    token.verify(jwk.JWK(**entry), alg="Ed25519")
    assert json.loads(token.payload)["format"] == "oblivio-audit-export/2"


# -- audit exports ---------------------------------------------------------------------------


def audit_lines(client: MemoryClient) -> list[str]:
    text = client.export_audit()
    verify_audit_export(text, client.jwks())
    lines = text.splitlines(keepends=True)
    assert len(lines) >= 5, "too few audit lines to tamper with"
    return lines


def change_a_hex_digit(line: str, key: str) -> str:
    """The line with one hex digit of ``key``'s value changed: still valid JSON."""
    start = line.index(f'"{key}":"') + len(key) + 4
    digit = line[start]
    return line[:start] + ("0" if digit != "0" else "1") + line[start + 1 :]


def test_audit_export_tampering_is_refused(client: MemoryClient, audited: None) -> None:
    lines = audit_lines(client)
    body, manifest = lines[:-1], lines[-1]
    keys = client.jwks()

    def refused(changed: list[str], what: str) -> None:
        with pytest.raises(Refusal):
            verify_audit_export("".join(changed), keys)
        assert what

    for index in (0, len(body) // 2, len(body) - 1):
        for key in ("digest", "chain_hash", "event_id"):
            changed = [*body]
            changed[index] = change_a_hex_digit(body[index], key)
            refused([*changed, manifest], f"one byte of {key} in line {index}")
        broken = [*body]
        broken[index] = body[index].replace("{", "[", 1)
        refused([*broken, manifest], "a line that is no longer JSON")
    for index in (0, len(body) // 2, len(body) - 1):
        refused([*body[:index], *body[index + 1 :], manifest], f"line {index} removed")
    swapped = [*body]
    swapped[1], swapped[2] = swapped[2], swapped[1]
    refused([*swapped, manifest], "two lines reordered")
    refused([*body[1:], manifest], "head truncated")
    refused(body, "manifest removed")
    refused([*body, *body[-1:], manifest], "a line duplicated")
    signed = json.loads(manifest)["manifest"]
    refused(
        [*body, json.dumps({"manifest": {**signed, "payload": flip(signed["payload"], 30)}})],
        "manifest payload flipped",
    )


def test_audit_chain_alone_catches_removed_and_reordered_lines(
    client: MemoryClient, audited: None
) -> None:
    # The signed digest catches any change; the hash chain is a second, unsigned line of
    # defence that an auditor can recompute from the lines alone.
    lines = audit_lines(client)
    manifest = verify_audit_export("".join(lines), client.jwks())
    entries = [json.loads(line) for line in lines[:-1]]
    previous = manifest["previous_chain_hash"]
    assert chain_problem(entries, previous) is None
    assert chain_problem(entries[:2] + entries[3:], previous) is not None
    assert chain_problem([entries[1], entries[0], *entries[2:]], previous) is not None
    assert chain_problem(entries[1:], previous) is not None
    edited = copy.deepcopy(entries)
    edited[2]["digest"] = "00" * 32
    assert chain_problem(edited, previous) is not None


# -- subject exports -------------------------------------------------------------------------


def test_subject_export_tampering_is_refused(client: MemoryClient) -> None:
    seed_subject(client, ALICE)
    seed_subject(client, BOB)
    exported = client.export_subject(user_id=ALICE)
    keys = client.jwks()
    assert verify_subject_export(exported, keys)["counts"] == {
        "events": len(exported["events"]),
        "nodes": len(exported["nodes"]),
    }
    other = client.export_subject(user_id=BOB)

    edits: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
        ("event content", lambda e: e["events"][0]["data"].update(content="something else")),
        ("event dropped", lambda e: e["events"].pop()),
        ("node content", lambda e: e["nodes"][0].update(content="something else")),
        ("subject swapped", lambda e: e.update(subject_ref=other["subject_ref"])),
        ("manifest swapped", lambda e: e.update(manifest=other["manifest"])),
        ("time changed", lambda e: e.update(exported_at="2000-01-01T00:00:00+00:00")),
        (
            "signature flipped",
            lambda e: e["manifest"].update(signature=flip(e["manifest"]["signature"], 10)),
        ),
    ]
    for what, edit in edits:
        changed = copy.deepcopy(exported)
        edit(changed)
        with pytest.raises(Refusal):
            verify_subject_export(changed, keys)
        assert what
    with pytest.raises(CertificateVerificationError):
        verify_subject_export(exported, {"keys": []})
