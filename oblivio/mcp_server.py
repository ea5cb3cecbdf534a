"""An MCP server (stdio) giving agents oblivio's memory tools.

The server acts for the principal of the API key it is started with: a user
key binds every tool to that user; an operator key lets tools name the user,
and adds the compliance tools (forget, delete an event).  Auditors get none.

A refused call (bad id, invalid scope, unknown node, empty query, …) comes
back to the agent as the tool's error content, ``<ErrorType>: <message>``
with the error type of ``oblivio.errors``, so the agent can read why; tool
parameters carry their enumerations and formats in the tool schema.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import AwareDatetime, Field, StrictBool

from certificates import CertificateVerificationError
from eventstore.apikeys import Principal
from eventstore.errors import InvalidInputError, OblivioError
from oblivio import json_text
from oblivio.memory import commands, compliance, ingest, queries
from oblivio.memory.context import MemoryContext
from projections.model import NodeType, Role, Scope, SourceType
from workers.policy import LegalGroundName, ReasonName

P = ParamSpec("P")
R = TypeVar("R")
#: Who a correction or erasure is recorded as coming from, unless the caller says.
DEFAULT_ACTOR = "mcp"
Actor = Annotated[str, Field(min_length=1, max_length=256)]
Limit = Annotated[int, Field(ge=1, le=1000)]

INSTRUCTIONS = (
    "Long-term memory about people, with explicit corrections and provable erasure. "
    "Store what you learn, retrieve before answering, supersede facts that changed, and "
    "reinforce facts the person confirms."
)


def _plain(value: Any) -> Any:
    """Dataclasses, UUIDs and datetimes as JSON-ready values, written as HTTP writes them."""
    return json_text.plain(value)


def typed_errors(tool: Callable[P, R]) -> Callable[P, R]:
    """``tool``, its typed errors raised as ``ToolError`` naming their type and message.

    The SDK hides every other exception behind "Error executing tool …" and
    sends the reason only to the server's stderr, where the agent cannot read it.
    """

    @functools.wraps(tool)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return tool(*args, **kwargs)
        except (OblivioError, CertificateVerificationError) as error:
            raise ToolError(f"{type(error).__name__}: {error}") from error

    return call


class _Binding:
    def __init__(self, who: Principal) -> None:
        self.who = who

    def user(self, named: str | None) -> str:
        if self.who.kind == "user":
            if named not in (None, self.who.user_id):
                raise InvalidInputError("this key acts only for its own user")
            assert self.who.user_id is not None
            return self.who.user_id
        if not named:
            raise InvalidInputError("user_id is required with an operator key")
        return named

    def optional_user(self) -> str | None:
        return self.who.user_id if self.who.kind == "user" else None


def build_mcp_server(ctx: MemoryContext, who: Principal) -> MCPServer:
    """The MCP server for one principal (see the module docstring)."""
    if who.kind == "auditor":
        raise InvalidInputError("auditor keys have no memory tools")
    server: MCPServer = MCPServer("oblivio", instructions=INSTRUCTIONS)
    bind = _Binding(who)
    _memory_tools(server, ctx, bind)
    if who.kind == "operator":
        _compliance_tools(server, ctx, bind)
    return server


def _memory_tools(server: MCPServer, ctx: MemoryContext, bind: _Binding) -> None:
    @server.tool()
    @typed_errors
    def memory_store(
        content: str,
        user_id: str | None = None,
        scope: Scope = Scope.PERSONAL,
        source_type: SourceType = SourceType.USER_STATED,
        node_type: NodeType = NodeType.FACT,
    ) -> dict[str, Any]:
        """Remember something about a person; returns the event id and its node ids."""
        user = bind.user(user_id)
        stored = commands.store_memory(
            ctx, content, user_id=user, scope=scope, source_type=source_type, node_type=node_type
        )
        return {"event_id": str(stored.event_id), "node_ids": [str(n) for n in stored.node_ids]}

    @server.tool()
    @typed_errors
    def memory_ingest(
        message: str,
        user_id: str | None = None,
        role: Role = Role.USER,
        scope: Scope = Scope.PERSONAL,
        source_type: SourceType = SourceType.USER_STATED,
        session_id: str | None = None,
        occurred_at: AwareDatetime | None = None,
        first_person_owner: StrictBool = False,
        speaker: str | None = None,
        enable_speaker_references: StrictBool = False,
        wait_for_extraction: StrictBool = False,
        request_id: uuid.UUID | None = None,
    ) -> Any:
        """Hand over a raw message; its claims are extracted and corrections retire old ones.

        Set first_person_owner=true only when the person themself wrote the
        message, so its "I"/"my" mean them.
        """
        return _plain(
            ingest.ingest(
                ctx,
                message,
                user_id=bind.user(user_id),
                role=role,
                scope=scope,
                source_type=source_type,
                session_id=session_id,
                occurred_at=occurred_at,
                first_person_owner=first_person_owner,
                speaker=speaker,
                enable_speaker_references=enable_speaker_references,
                wait_for_extraction=wait_for_extraction,
                request_id=request_id,
            )
        )

    @server.tool()
    @typed_errors
    def memory_retrieve(
        query: str,
        user_id: str | None = None,
        limit: Limit = 5,
        include_archived: StrictBool = False,
    ) -> list[Any]:
        """The person's memories most relevant to the query, best first.

        include_archived also ranks memories archived out of default retrieval
        (past the retrieval tier's capacity); archived_at says which those are.
        """
        found = queries.retrieve(
            ctx,
            query,
            user_id=bind.user(user_id),
            limit=limit,
            include_archived=include_archived,
        )
        return [
            {
                "node_id": str(r.node.id),
                "content": r.node.content,
                "score": r.score,
                "archived_at": _plain(r.node.archived_at),
            }
            for r in found.results
        ]

    @server.tool()
    @typed_errors
    def memory_get_node(node_id: uuid.UUID, include_superseded: StrictBool = False) -> Any:
        """One memory node, or null when it is not available."""
        node = queries.get_node(
            ctx, node_id, user_id=bind.optional_user(), include_superseded=include_superseded
        )
        return None if node is None else _plain(node)

    @server.tool()
    @typed_errors
    def memory_supersede(
        old_node_id: uuid.UUID,
        new_node_id: uuid.UUID,
        evidence_id: uuid.UUID | None = None,
        actor_id: Actor = DEFAULT_ACTOR,
    ) -> Any:
        """Replace an outdated memory with a newer one (both of the same person and scope).

        actor_id names who made the correction (recorded as a keyed hash).
        """
        return _plain(
            commands.supersede(
                ctx,
                old_node_id,
                new_node_id,
                evidence_id=evidence_id,
                user_id=bind.optional_user(),
                actor_id=actor_id,
            )
        )

    @server.tool()
    @typed_errors
    def memory_reinforce(
        node_id: uuid.UUID,
        evidence_id: uuid.UUID | None = None,
        request_id: uuid.UUID | None = None,
    ) -> Any:
        """Record that the person confirmed a memory; repeat the request_id to retry safely."""
        return _plain(
            commands.reinforce(
                ctx,
                node_id,
                evidence_id=evidence_id,
                user_id=bind.optional_user(),
                request_id=request_id,
            )
        )


def _compliance_tools(server: MCPServer, ctx: MemoryContext, bind: _Binding) -> None:
    @server.tool()
    @typed_errors
    def memory_forget(
        user_id: str,
        reason: ReasonName = "user_request",
        legal_ground: LegalGroundName = "art17-1-b",
        actor_id: Actor = DEFAULT_ACTOR,
    ) -> Any:
        """Erase everything of a person (GDPR Art. 17); returns the status and certificate.

        actor_id names who asked for the erasure (recorded as a keyed hash).
        """
        return _plain(
            compliance.forget(
                ctx, bind.user(user_id), reason=reason, legal_ground=legal_ground, actor_id=actor_id
            )
        )

    @server.tool()
    @typed_errors
    def memory_delete_event(
        event_id: uuid.UUID,
        reason: ReasonName = "user_request",
        legal_ground: LegalGroundName = "art17-1-b",
        actor_id: Actor = DEFAULT_ACTOR,
    ) -> Any:
        """Hard-delete one stored memory event.

        actor_id names who asked for the erasure (recorded as a keyed hash).
        """
        return _plain(
            compliance.delete_event(
                ctx, event_id, reason=reason, legal_ground=legal_ground, actor_id=actor_id
            )
        )
