"""Every error in the shape its API's clients read: OpenAI's on the OpenAI endpoints, Anthropic's on
``/v1/messages``.

- OpenAI (every path but ``/v1/messages``): ``{"error": {"message", "type", "param", "code"}}``
  (:func:`evalprism.serve.schemas.error_content`), with the service's statuses;
- Anthropic (``/v1/messages``): ``{"type": "error", "error": {"type", "message"}}``, the error type by
  status as Anthropic's API names them; a request the router refuses as invalid is a 400 there (the
  Anthropic API answers invalid requests with 400, never 422).

Extra top-level keys (``evalprism``: the attempts of a request no upstream answered) are kept in both.
"""

from __future__ import annotations

from typing import Any, Literal

from evalprism.serve.schemas import error_content

ErrorShape = Literal["openai", "anthropic"]
#: the paths whose clients read Anthropic's error shape
ANTHROPIC_PATHS = frozenset({"/v1/messages"})
#: Anthropic's error type for each status the service answers (else ``api_error``)
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def shape_of(path: str) -> ErrorShape:
    """The error shape the clients of ``path`` read."""
    return "anthropic" if path in ANTHROPIC_PATHS else "openai"


def error_body(
    shape: ErrorShape,
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of an error in ``shape`` (``kind``, ``param`` and ``code`` as OpenAI
    names them; the Anthropic shape has a type by status and names the field in the message)."""
    if shape == "openai":
        return status, error_content(message, kind, param, code)
    status = 400 if status == 422 else status
    return status, {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
