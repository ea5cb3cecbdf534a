"""An MCP server (stdio) giving agents oblivio's memory tools.

The server acts for the principal of the API key it is started with: a user
key binds every tool to that user; an operator key lets tools name the user,
and adds the compliance tools (forget, delete an event).  Auditors get none.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from pydantic import StrictBool

from eventstore.apikeys import Principal
from eventstore.errors import InvalidInputError
from oblivio.memory import commands, compliance, ingest, queries
from oblivio.memory.context import MemoryContext

INSTRUCTIONS = (
    "Long-term memory about people, with explicit corrections and provable erasure. "
    "Store what you learn, retrieve before answering, supersede facts that changed, and "
    "reinforce facts the person confirms."
)


def _plain(value: Any) -> Any:
    """Dataclasses, UUIDs and datetimes as JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    result: Any = json.loads(json.dumps(value, default=str))
    return result


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
    def memory_store(
        content: str,
        user_id: str | None = None,
        scope: str = "personal",
        source_type: str = "user_stated",
        node_type: str = "fact",
    ) -> dict[str, Any]:
        """Remember something about a person; returns the event id and its node ids."""
        user = bind.user(user_id)
        stored = commands.store_memory(
            ctx, content, user_id=user, scope=scope, source_type=source_type, node_type=node_type
        )
        return {"event_id": str(stored.event_id), "node_ids": [str(n) for n in stored.node_ids]}

    @server.tool()
    def memory_ingest(
        message: str,
        user_id: str | None = None,
        role: str = "user",
        scope: str = "personal",
        source_type: str = "user_stated",
        session_id: str | None = None,
        occurred_at: str | None = None,
        first_person_owner: StrictBool = False,
        speaker: str | None = None,
        enable_speaker_references: StrictBool = False,
        wait_for_extraction: bool = False,
        request_id: str | None = None,
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
    def memory_retrieve(query: str, user_id: str | None = None, limit: int = 5) -> list[Any]:
        """The person's memories most relevant to the query, best first."""
        found = queries.retrieve(ctx, query, user_id=bind.user(user_id), limit=limit)
        return [
            {"node_id": str(r.node.id), "content": r.node.content, "score": r.score}
            for r in found.results
        ]

    @server.tool()
    def memory_get_node(node_id: str, include_superseded: bool = False) -> Any:
        """One memory node, or null when it is not available."""
        node = queries.get_node(
            ctx, node_id, user_id=bind.optional_user(), include_superseded=include_superseded
        )
        return None if node is None else _plain(node)

    @server.tool()
    def memory_supersede(old_node_id: str, new_node_id: str, evidence_id: str | None = None) -> Any:
        """Replace an outdated memory with a newer one (both of the same person and scope)."""
        return _plain(
            commands.supersede(
                ctx,
                old_node_id,
                new_node_id,
                evidence_id=evidence_id,
                user_id=bind.optional_user(),
                actor_id="mcp",
            )
        )

    @server.tool()
    def memory_reinforce(
        node_id: str, evidence_id: str | None = None, request_id: str | None = None
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
    def memory_forget(
        user_id: str, reason: str = "user_request", legal_ground: str = "art17-1-b"
    ) -> Any:
        """Erase everything of a person (GDPR Art. 17); returns the status and certificate."""
        return _plain(
            compliance.forget(
                ctx, bind.user(user_id), reason=reason, legal_ground=legal_ground, actor_id="mcp"
            )
        )

    @server.tool()
    def memory_delete_event(event_id: str, reason: str = "user_request") -> Any:
        """Hard-delete one stored memory event."""
        return _plain(compliance.delete_event(ctx, event_id, reason=reason, actor_id="mcp"))
