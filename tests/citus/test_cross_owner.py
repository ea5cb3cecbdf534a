"""Cross-owner reads on the cluster: 0, over HTTP against the real app.

The single-node suites prove it route by route (tests/http/test_authorization.py for
two users' keys, tests/http/test_isolation.py for two namespaces); on Citus every
read below is routed to the shards of the stream it names, or fans out to all of
them (a read by id alone), so the same checks run here for every reading route:
a user's key naming another user's ids, and a namespace's user and operator keys
naming another namespace's ids, get what an id that exists nowhere gets, and no
answer carries the other owner's ids or text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.conftest import ALICE, BOB, BOUND_USER, World, open_world, settings_for
from tests.http.test_authorization import SPECS, normalised
from tests.http.test_isolation import Findings, check_routes, tenants

pytestmark = pytest.mark.citus

#: Every route that reads (GET, and retrieval), except those without a subject's data.
READS = [
    key
    for key in SPECS
    if (key[0] == "GET" or key == ("POST", "/v1/retrieve"))
    and key not in {("GET", "/v1/health"), ("GET", "/metrics"), ("GET", "/v1/compliance/keys")}
]


@pytest.fixture
def citus_world(citus_url: str, tmp_path: Path) -> Iterator[World]:
    with open_world(settings_for(citus_url, tmp_path / "data")) as world:
        yield world


def test_a_users_key_reads_nothing_of_another_user(citus_world: World) -> None:
    problems, probed = [], 0
    for key in READS:
        for principal, me in BOUND_USER.items():
            them = BOB if me == ALICE else ALICE
            for probe in SPECS[key].probes:
                got = probe.foreign(citus_world, me, them).send(citus_world, principal)
                absent = probe.missing(citus_world, me).send(citus_world, principal)
                probed += 1
                if got.status_code != 404 or normalised(got) != normalised(absent):
                    problems.append(
                        f"{key} as {principal} ({probe.name}): {normalised(got)}"
                        f" for another user's id, {normalised(absent)} for a missing one"
                    )
    assert probed >= 10  # the routes' probes ran
    assert not problems, "\n".join(problems)


def test_no_namespace_reads_another_namespace(citus_world: World) -> None:
    home, other = tenants(citus_world)
    for tenant in (home, other):  # both namespaces hold the same people
        tenant.shared_seed(ALICE)
        tenant.shared_seed(BOB)
    findings = Findings([])
    # One direction: both namespaces are alike, and each route costs seconds on the tier.
    check_routes(home, other, findings, READS, ("user", "operator"))
    assert not findings.problems, "\n".join(findings.problems)
