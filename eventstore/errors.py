"""One error tree for the whole log.

Every error oblivio raises derives from :class:`OblivioError`; its docstring is
its default message.  The shape follows PEP 249: :class:`OperationalError` is
retryable (connection lost, serialisation failure, lock timeout), while
:class:`ConflictError` means the request itself clashes with stored state and
retrying the same request cannot succeed.  Errors about bad input also derive
from :class:`ValueError` so that callers following the seeds' contracts
(``ValueError`` for unavailable evidence, reused request ids, …) catch them.
"""

from __future__ import annotations


class OblivioError(Exception):
    """An oblivio operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class InvalidInputError(OblivioError, ValueError):
    """The request is malformed; nothing was written."""


class MalformedIdError(InvalidInputError):
    """An identifier is malformed."""


class PayloadTooLargeError(InvalidInputError):
    """The event is larger than the configured limit."""


class InvalidEncodingError(InvalidInputError):
    """Text must be valid UTF-8."""


class NotFoundError(OblivioError, LookupError):
    """The requested item is not available."""


class EventUnavailableError(NotFoundError, ValueError):
    """Event is not available."""


class ConflictError(OblivioError):
    """The request conflicts with what is already stored."""


class WrongExpectedVersionError(ConflictError):
    """The stream is not at the expected version."""

    def __init__(self, expected: int, actual: int) -> None:
        super().__init__(f"expected stream version {expected}, stream is at {actual}")
        self.expected = expected
        self.actual = actual


class DuplicateEventError(ConflictError):
    """An event with this id already exists with different content."""


class EventErasedError(ConflictError):
    """This event id belongs to an erased event and cannot be written again."""


class OperationalError(OblivioError):
    """The database could not complete the operation; retrying may succeed."""


class KeyUnavailableError(OblivioError):
    """A key needed for this operation is not available."""


class KekRetiredError(KeyUnavailableError):
    """This key-encryption key version was retired; what it wrapped cannot be unwrapped."""


class IntegrityViolationError(OblivioError):
    """Stored data failed an integrity check."""


class SubjectRestrictedError(ConflictError):
    """Processing of this subject is restricted (GDPR Art. 18): nothing new is written
    for them unless the operator acts on the restriction request."""


class LegalHoldError(ConflictError):
    """The subject is under a legal hold (GDPR Art. 17(3)); the erasure was refused."""

    def __init__(self, ground: str, reference: str, request_id: object = None) -> None:
        super().__init__(
            f"erasure refused: the subject is under a legal hold on ground {ground} "
            f"(reference {reference}); it was recorded in the register and can be run "
            "again once the hold is lifted"
        )
        self.ground = ground
        self.reference = reference
        self.request_id = request_id
