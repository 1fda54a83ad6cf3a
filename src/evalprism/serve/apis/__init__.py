"""The APIs the router serves, one adapter each, by name (:data:`APIS`): every endpoint that forwards
reads its request through its API's adapter and then takes the one routing path
(:mod:`evalprism.serve.forward`).

| API | endpoint | adapter |
|---|---|---|
| ``chat`` | ``POST /v1/chat/completions`` | :class:`~evalprism.serve.apis.chat.ChatApi` |
| ``responses`` | ``POST /v1/responses`` | :class:`~evalprism.serve.apis.responses.ResponsesApi` |
| ``messages`` | ``POST /v1/messages`` | :class:`~evalprism.serve.apis.messages.MessagesApi` |

There is no translation between APIs: a request goes to candidates whose upstream serves its API
(``apis:`` of each model in the config).
"""

from __future__ import annotations

from evalprism.serve.apis.base import Api
from evalprism.serve.apis.chat import ChatApi
from evalprism.serve.apis.messages import MessagesApi
from evalprism.serve.apis.responses import ResponsesApi
from evalprism.serve.conversation import ApiName

APIS: dict[ApiName, Api] = {api.name: api for api in (ChatApi(), ResponsesApi(), MessagesApi())}

__all__ = ["APIS", "Api"]
