"""An MCP server (stdio) giving agents oblivio's memory tools.

The server acts for the principal of the API key it is started with: a user
key binds every tool to that user; an operator key lets tools name the user,
and adds the compliance tools (forget, delete an event).  Auditors get none.

A refused call (bad id, invalid scope, unknown node, empty query, …) comes
back to the agent as the tool's error content, ``<ErrorType>: <message>``
with the error type of ``oblivio.errors``, so the agent can read why; tool
parameters carry their enumerations and formats in the tool schema, and an
argument a tool does not take is refused before anything runs.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    create_model,
    model_validator,
)

from appdata.apikeys import Principal
from certificates import CertificateVerificationError
from eventstore.errors import InvalidInputError, OblivioError
from oblivio import __version__, json_text
from oblivio.memory import commands, compliance, ingest, queries, updates
from oblivio.memory.context import MemoryContext
from oblivio.memory.records import Correction
from projections.model import NodeType, Role, Scope, SourceType
from workers.policy import LegalGroundName, ReasonName

P = ParamSpec("P")
R = TypeVar("R")
#: Who a correction or erasure is recorded as coming from, unless the caller says.
DEFAULT_ACTOR = "mcp"
Actor = Annotated[str, Field(min_length=1, max_length=256)]
Limit = Annotated[int, Field(ge=1, le=1000)]
ToolFunction = Callable[..., Any]

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


class _KnownArguments(BaseModel):
    """Tool arguments that refuse names the tool does not take.

    The SDK's argument models ignore unknown names, so a misspelt optional
    argument (``first_persn_owner``) would run the call without it, where the
    HTTP API answers 422; here the call is refused, naming what the tool takes.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown(cls, arguments: Any) -> Any:
        if isinstance(arguments, dict):
            known = {field.alias or name for name, field in cls.model_fields.items()}
            unknown = sorted(set(arguments) - known)
            if unknown:
                raise ValueError(
                    f"unknown argument {', '.join(unknown)}; this tool takes "
                    f"{', '.join(sorted(known))}"
                )
        return arguments


def strict_tool(function: ToolFunction) -> Tool:
    """``function`` as an MCP tool whose arguments are exactly its parameters (the
    published schema says so too: ``additionalProperties: false``)."""
    tool = Tool.from_function(function)
    loose = tool.fn_metadata.arg_model
    strict = cast(
        type[ArgModelBase], create_model(loose.__name__, __base__=(loose, _KnownArguments))
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool


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
    """The MCP server for one principal (see the module docstring), serving the
    namespace of its key (a cluster-wide key: ``ctx``'s)."""
    if who.kind == "auditor":
        raise InvalidInputError("auditor keys have no memory tools")
    ctx = ctx.for_key(who.namespace)
    bind = _Binding(who)
    tools = [
        *_memory_tools(ctx, bind),
        *_correction_tools(ctx, bind),
        *_ranking_tools(ctx, bind),
        *(_compliance_tools(ctx, bind) if who.kind == "operator" else []),
    ]
    return MCPServer(
        "oblivio",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=[strict_tool(typed_errors(tool)) for tool in tools],
    )


def _corrector(ctx: MemoryContext, bind: _Binding) -> Callable[..., Any]:
    """Runs a correction between two nodes (supersede, contradict, resolve) for the key."""

    def correct(
        command: Callable[..., Correction],
        first: uuid.UUID,
        second: uuid.UUID,
        evidence_id: uuid.UUID | None,
        actor_id: str,
    ) -> Any:
        done = command(
            ctx,
            first,
            second,
            evidence_id=evidence_id,
            user_id=bind.optional_user(),
            actor_id=actor_id,
        )
        return _plain(done)

    return correct


def _memory_tools(ctx: MemoryContext, bind: _Binding) -> list[ToolFunction]:
    correct = _corrector(ctx, bind)

    def memory_store(
        content: str,
        user_id: str | None = None,
        scope: Scope = Scope.PERSONAL,
        source_type: SourceType = SourceType.USER_STATED,
        node_type: NodeType = NodeType.FACT,
        occurred_at: AwareDatetime | None = None,
    ) -> dict[str, Any]:
        """Remember something about a person; returns the event id and its node ids.

        occurred_at is when it took effect (timezone-aware; default: now), e.g. a
        move that happened last year.
        """
        user = bind.user(user_id)
        stored = commands.store_memory(
            ctx,
            content,
            user_id=user,
            scope=scope,
            source_type=source_type,
            node_type=node_type,
            occurred_at=occurred_at,
        )
        return {"event_id": str(stored.event_id), "node_ids": [str(n) for n in stored.node_ids]}

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

    def memory_retrieve(
        query: str,
        user_id: str | None = None,
        limit: Limit = 5,
        scopes: list[Scope] | None = None,
        node_types: list[NodeType] | None = None,
        exclude_node_types: list[NodeType] | None = None,
        source_types: list[SourceType] | None = None,
        include_superseded: StrictBool = False,
        include_archived: StrictBool = False,
        consistent: StrictBool = True,
        as_of: AwareDatetime | None = None,
        occurred_since: AwareDatetime | None = None,
        occurred_until: AwareDatetime | None = None,
        meta: dict[str, str | int | float | bool | dict[str, str] | None] | None = None,
        resolve_dates: StrictBool = False,
        event_ids: list[uuid.UUID] | None = None,
    ) -> list[Any]:
        """The person's memories most relevant to the query, best first.

        scopes, node_types and source_types keep only memories of those;
        exclude_node_types drops some (e.g. ["entity"]). include_superseded also
        ranks retired memories (lifecycle says which); include_archived also ranks
        memories archived out of default retrieval (archived_at says which).
        consistent=false answers without waiting for the last write to be indexed.
        as_of ranks what was true at that moment ("where did she live in 2023?");
        resolve_dates=true takes it from a year, month or day the query names.
        occurred_since/occurred_until keep memories that took effect in that window;
        meta keeps memories whose metadata has those values (or, for {"$prefix": text},
        a string value starting with text); event_ids ranks only the
        memories of those stored events.
        """
        found = queries.retrieve(
            ctx,
            query,
            user_id=bind.user(user_id),
            limit=limit,
            scopes=scopes,
            node_types=node_types,
            exclude_node_types=exclude_node_types,
            source_types=source_types,
            include_superseded=include_superseded,
            include_archived=include_archived,
            consistent=consistent,
            as_of=as_of,
            occurred_since=occurred_since,
            occurred_until=occurred_until,
            meta=meta,
            resolve_dates=resolve_dates,
            event_ids=event_ids,
        )
        return [
            {
                "node_id": str(r.node.id),
                "content": r.node.content,
                "score": r.score,
                "lifecycle": r.node.lifecycle.value,
                "scope": r.node.scope.value,
                "node_type": r.node.node_type.value,
                "source_type": r.node.source_type.value,
                "archived_at": _plain(r.node.archived_at),
                "occurred_at": _plain(r.node.occurred_at),
                "valid_to": _plain(r.node.valid_to),
            }
            for r in found.results
        ]

    def memory_get_node(node_id: uuid.UUID, include_superseded: StrictBool = False) -> Any:
        """One memory node, or null when it is not available."""
        node = queries.get_node(
            ctx, node_id, user_id=bind.optional_user(), include_superseded=include_superseded
        )
        return None if node is None else _plain(node)

    def memory_supersede(
        old_node_id: uuid.UUID,
        new_node_id: uuid.UUID,
        evidence_id: uuid.UUID | None = None,
        actor_id: Actor = DEFAULT_ACTOR,
    ) -> Any:
        """Replace an outdated memory with a newer one (both of the same person and scope).

        actor_id names who made the correction (recorded as a keyed hash).
        """
        return correct(commands.supersede, old_node_id, new_node_id, evidence_id, actor_id)

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

    return [
        memory_store,
        memory_ingest,
        memory_retrieve,
        memory_get_node,
        memory_supersede,
        memory_reinforce,
    ]


def _correction_tools(ctx: MemoryContext, bind: _Binding) -> list[ToolFunction]:
    correct = _corrector(ctx, bind)

    def memory_contradict(
        node_id: uuid.UUID,
        other_node_id: uuid.UUID,
        evidence_id: uuid.UUID | None = None,
        actor_id: Actor = DEFAULT_ACTOR,
    ) -> Any:
        """Record that two memories of one person contradict each other; both become
        contested until memory_resolve_contradiction settles it. A repeat is a no-op."""
        return correct(commands.contradict, node_id, other_node_id, evidence_id, actor_id)

    def memory_resolve_contradiction(
        winner_node_id: uuid.UUID,
        loser_node_id: uuid.UUID,
        evidence_id: uuid.UUID | None = None,
        actor_id: Actor = DEFAULT_ACTOR,
    ) -> Any:
        """Settle a contradiction: the loser is superseded by the winner."""
        return correct(
            commands.resolve_contradiction, winner_node_id, loser_node_id, evidence_id, actor_id
        )

    def memory_get_assertion_state(node_id: uuid.UUID, as_of: AwareDatetime | None = None) -> Any:
        """Whether a memory is current, contested or superseded, and by which memories
        (for an extracted claim also its structure and validity); null when unavailable.

        as_of answers as it stood at that moment (null before it took effect).
        """
        state = queries.get_assertion_state(ctx, node_id, user_id=bind.optional_user(), as_of=as_of)
        return None if state is None else _plain(state)

    def memory_confirm_likely_update(node_id: uuid.UUID, actor_id: Actor = DEFAULT_ACTOR) -> Any:
        """Confirm that the newer memory which likely updates this one replaces it (the
        memory is superseded); an error when no open likely update names it."""
        return _plain(
            updates.confirm_likely_update(
                ctx, node_id, user_id=bind.optional_user(), actor_id=actor_id
            )
        )

    def memory_reject_likely_update(node_id: uuid.UUID, actor_id: Actor = DEFAULT_ACTOR) -> Any:
        """Reject the likely update of this memory: it and the newer one both stand as
        before; an error when no open likely update names it."""
        return _plain(
            updates.reject_likely_update(
                ctx, node_id, user_id=bind.optional_user(), actor_id=actor_id
            )
        )

    return [
        memory_contradict,
        memory_resolve_contradiction,
        memory_get_assertion_state,
        memory_confirm_likely_update,
        memory_reject_likely_update,
    ]


def _ranking_tools(ctx: MemoryContext, bind: _Binding) -> list[ToolFunction]:
    def memory_add_resonance_trigger(
        user_id: str | None = None,
        keyword: str | None = None,
        text: str | None = None,
        weight: float = 1.0,
        threshold: float = 0.8,
    ) -> dict[str, str]:
        """Boost the person's memories that contain keyword, or resemble text (give one),
        in retrieval; weight in [0, 10], threshold the similarity text needs."""
        trigger_id = commands.add_resonance_trigger(
            ctx,
            user_id=bind.user(user_id),
            keyword=keyword,
            text=text,
            weight=weight,
            threshold=threshold,
        )
        return {"trigger_id": str(trigger_id)}

    def memory_remove_resonance_trigger(
        trigger_id: uuid.UUID, user_id: str | None = None
    ) -> dict[str, str]:
        """Remove one of the person's resonance triggers."""
        commands.remove_resonance_trigger(ctx, trigger_id, user_id=bind.user(user_id))
        return {"removed": str(trigger_id)}

    def memory_add_negative_attractor(
        text: str,
        user_id: str | None = None,
        description: str | None = None,
        source: str | None = None,
        severity: float = 1.0,
    ) -> dict[str, str]:
        """Demote the person's memories that resemble text in retrieval (something known
        to be wrong or unwanted); severity in [0, 1]."""
        attractor_id = commands.add_negative_attractor(
            ctx,
            text,
            user_id=bind.user(user_id),
            description=description,
            source=source,
            severity=severity,
        )
        return {"attractor_id": str(attractor_id)}

    def memory_clear_negative_attractors(user_id: str | None = None) -> dict[str, bool]:
        """Remove every negative attractor of the person."""
        commands.clear_negative_attractors(ctx, user_id=bind.user(user_id))
        return {"cleared": True}

    def memory_negative_attractor_count(user_id: str | None = None) -> dict[str, int]:
        """How many negative attractors apply to the person's retrieval."""
        return {"count": queries.negative_attractor_count(ctx, user_id=bind.user(user_id))}

    return [
        memory_add_resonance_trigger,
        memory_remove_resonance_trigger,
        memory_add_negative_attractor,
        memory_clear_negative_attractors,
        memory_negative_attractor_count,
    ]


def _compliance_tools(ctx: MemoryContext, bind: _Binding) -> list[ToolFunction]:
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

    return [memory_forget, memory_delete_event]
