"""Request models whose fields the routes hand to an operation as keyword arguments
(``schemas.arguments``) name each field as the operation names its parameter."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from oblivio.http import schemas as s
from oblivio.memory import commands, items, queries

FORWARDED: list[tuple[type[BaseModel], Callable[..., Any]]] = [
    (s.StoreRequest, commands.store_memory),
    (s.RetrieveRequest, queries.retrieve),
    (s.ItemPutRequest, items.put_item),
]


@pytest.mark.parametrize(("request_model", "operation"), FORWARDED)
def test_each_field_is_a_parameter_of_the_operation(
    request_model: type[BaseModel], operation: Callable[..., Any]
) -> None:
    parameters = set(inspect.signature(operation).parameters)
    assert set(request_model.model_fields) <= parameters


def test_the_given_arguments_replace_the_requests_own() -> None:
    body = s.RetrieveRequest(query="where does Ada work", user_id="ada", limit=3)
    forwarded = s.arguments(body, user_id="grace")
    assert forwarded["user_id"] == "grace"
    assert forwarded["query"] == "where does Ada work"
    assert forwarded["limit"] == 3
    assert set(forwarded) == set(s.RetrieveRequest.model_fields)
