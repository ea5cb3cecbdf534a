"""The cache of verified API keys (``OBLIVIO_API_KEY_CACHE_SECONDS``).

What it may cost is bounded and tested: a key revoked by another process
authenticates for at most the cache time; a revocation in this process takes
effect at once; wrong secrets and unknown keys are never cached.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import sqlalchemy as sa

from appdata import apikeys, tables
from appdata.apikeys import Principal, VerifiedKeys
from eventstore.errors import InvalidInputError
from oblivio.settings import Settings
from tests.http.conftest import World, create_key, revoke_key


class Clock:
    """Monotonic seconds that only move when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def count(world: World, principal: str) -> int:
    headers = world.headers(principal)
    params = {"user_id": "carol"}  # the user of the user key; operators act for her
    return world.client.get("/v1/attractors/count", params=params, headers=headers).status_code


def revoke_elsewhere(world: World, token: str) -> None:
    """Revoke as another process would: the row changes, this process is not told."""
    key_id = token.split("_")[1]
    with world.ctx.store.transaction() as tx:
        tx.connection.execute(
            sa.update(tables.api_keys)
            .where(tables.api_keys.c.key_id == key_id)
            .values(revoked_at=world.ctx.clock())
        )


@pytest.fixture
def clock(world: World) -> Clock:
    clock = Clock()
    world.ctx.api_keys = VerifiedKeys(2.0, clock=clock)
    return clock


def test_a_key_revoked_elsewhere_stops_working_after_the_cache_time(
    world: World, clock: Clock
) -> None:
    token = create_key(world.ctx, "user", "carol")
    world.tokens["carol"] = token
    assert count(world, "carol") == 200
    revoke_elsewhere(world, token)
    clock.now += 1.9
    assert count(world, "carol") == 200  # the documented trade-off: still trusted
    clock.now += 0.2
    assert count(world, "carol") == 401


def test_a_revocation_in_this_process_takes_effect_at_once(world: World, clock: Clock) -> None:
    token = create_key(world.ctx, "operator")
    world.tokens["ops"] = token
    assert count(world, "ops") == 200
    revoke_key(world.ctx, token)
    assert count(world, "ops") == 401
    # Not cached again while a check that read the row before the revocation
    # committed could still try to.
    key_id = token.split("_")[1]
    world.ctx.api_keys.remember(token, Principal(key_id, "operator", None, namespace="default"))
    assert count(world, "ops") == 401


def test_wrong_secrets_and_unknown_keys_are_not_cached(world: World, clock: Clock) -> None:
    assert count(world, "operator") == 200
    assert count(world, "bad") == 401  # the operator's key id with a wrong secret
    world.tokens["unknown"] = "obl_0123456789abcdef_secret"
    assert count(world, "unknown") == 401
    assert world.ctx.api_keys.lookup(world.tokens["bad"]) is None
    assert world.ctx.api_keys.lookup(world.tokens["operator"]) is not None


def test_a_new_key_works_at_once(world: World, clock: Clock) -> None:
    world.tokens["new"] = "obl_0123456789abcdef_secret"
    assert count(world, "new") == 401
    world.tokens["new"] = create_key(world.ctx, "auditor")
    assert count(world, "new") == 403  # known at once (an auditor may not count)


def test_zero_turns_the_cache_off(world: World) -> None:
    world.ctx.api_keys = VerifiedKeys(0)
    token = create_key(world.ctx, "operator")
    world.tokens["ops"] = token
    assert count(world, "ops") == 200
    revoke_elsewhere(world, token)
    assert count(world, "ops") == 401


def test_the_cache_holds_no_token() -> None:
    keys = VerifiedKeys(1.0)
    token = "obl_0123456789abcdef_the-secret-part"
    dana = Principal("0123456789abcdef", "user", "dana", namespace="default")
    keys.remember(token, dana)
    assert keys.lookup(token) == dana
    assert not any(b"the-secret-part" in digest for digest in keys._verified)
    assert all(len(digest) == 32 for digest in keys._verified)


def test_the_cache_time_is_bounded() -> None:
    with pytest.raises(InvalidInputError):
        VerifiedKeys(2.5)
    with pytest.raises(ValueError, match="api_key_cache_seconds"):
        Settings.from_env({"OBLIVIO_API_KEY_CACHE_SECONDS": "30"})
    assert Settings.from_env({"OBLIVIO_API_KEY_CACHE_SECONDS": "0"}).api_key_cache_seconds == 0
    assert apikeys.MAX_CACHE_SECONDS == 2.0


def test_keys_revoke_returns_once_no_server_cache_holds_the_key(world: World) -> None:
    """`oblivio keys revoke` cannot reach a server's cache, so it outwaits the longest one."""
    world.ctx.api_keys = VerifiedKeys(apikeys.MAX_CACHE_SECONDS)  # the real clock
    token = create_key(world.ctx, "operator")
    world.tokens["ops"] = token
    assert count(world, "ops") == 200  # verified, so now trusted from the cache
    settings = world.settings
    store = ["--data-dir", str(settings.data_dir)]
    if settings.database_url is not None:
        store += ["--database-url", settings.database_url]
    key_id = token.split("_")[1]
    # Its own process, as an operator runs it: a revocation in this process
    # would reach the cache directly (see the test above).
    command = [sys.executable, "-c", "from oblivio.cli import main; main()"]
    result = subprocess.run(
        [*command, *store, "keys", "revoke", key_id], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert f"revoked {key_id}" in result.stdout
    assert count(world, "ops") == 401
