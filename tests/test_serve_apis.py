"""The router for today's clients, over real HTTP on loopback with the real SDKs: OpenAI Responses
(``responses.create``, its event stream, its tool runner, ``previous_response_id``) and Anthropic
Messages (``messages.create``, ``messages.stream``, the beta tool runner, ``x-api-key``) beside Chat
Completions; conversations that keep their model; routing on what the human wrote; answers that name
the candidate. The fake upstreams speak all three APIs (tests/fake_apis.py); the P2L model is a constant
stand-in whose routing distribution mixes two candidates under the budget, so that a conversation routed
anew on every request changes model (the control that makes the affinity checks able to fail).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_transcripts import REQUESTS, TASKS, TOOLS, human_message, human_turns, tool_result
from serve_harness import CLIENT_TIMEOUT_S, ConstantBackbone, FakeUpstreams, InProcessService, write_config

import evalprism.serve.app  # noqa: F401 - torch and the app load once, when the module is collected

openai = pytest.importorskip("openai", reason="the openai SDK (dev extra) is not installed")
anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK (dev extra) is not installed")

MODELS = ["alpha", "beta", "gamma", "delta"]
#: alpha is best and dearest: under the budget the router mixes beta (3/4) and delta (1/4)
COSTS = {"alpha": 4.0, "beta": 3.0, "gamma": 2.0, "delta": 1.0}
BIAS = [3.0, 2.0, 1.0, 0.0]
BUDGET = 2.5
KEY = "router-key"
ALL_APIS = ["chat", "responses", "messages"]


def start(
    fake: FakeUpstreams, tmp_path: Path, apis: dict[str, list[str]] | None = None, **settings: Any
) -> InProcessService:
    """A service over the four candidates (each serving every API unless ``apis`` says otherwise)."""
    settings = {"timeout_s": 30.0, "breaker_cooldown_s": 3600.0, "seed": 0, "budget": BUDGET, **settings}
    config = write_config(tmp_path / "router.yaml", fake, COSTS, apis=ALL_APIS, api_keys_env=["KEY"], **settings)
    if apis is not None:
        import yaml

        text = yaml.safe_load(config.read_text())
        for name, served in apis.items():
            text["models"][name]["apis"] = served
        config.write_text(yaml.safe_dump(text, sort_keys=False))
    model = ConstantBackbone.model(MODELS, BIAS)
    return InProcessService(model, config, tmp_path / "decisions.jsonl", dict.fromkeys(MODELS, "up-key"), (KEY,))


def openai_client(svc: InProcessService) -> Any:
    return openai.OpenAI(base_url=svc.url + "/v1", api_key=KEY, max_retries=0, timeout=CLIENT_TIMEOUT_S)


def anthropic_client(svc: InProcessService, **auth: Any) -> Any:
    auth = auth or {"api_key": KEY}
    return anthropic.Anthropic(base_url=svc.url, max_retries=0, timeout=CLIENT_TIMEOUT_S, **auth)


def anthropic_client_threads() -> bool:
    """Whether this anthropic SDK's tool runner sends message threads (2.x does)."""
    return bool(getattr(anthropic.Anthropic, "_supports_message_threads", False))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- 1. the Responses API through the router -------------------------------------------------------


def test_responses_create_and_stream_name_the_candidate(fake: FakeUpstreams, tmp_path: Path) -> None:
    """responses.create, plain and streamed: the upstream gets the client's body at /responses with its
    own model id and the router's key for it; the answer's ``model`` is the candidate's name (the
    upstream's id in evalprism.upstream_model) in the response and in every event that carries it."""
    with start(fake, tmp_path) as svc:
        client = openai_client(svc)
        response = client.responses.create(
            model="evalprism-router", input="Why is the sky blue?", instructions="Be brief.", temperature=0.3
        )
        annotation = response.model_extra["evalprism"]
        served = annotation["model"]
        assert response.model == served and annotation["upstream_model"] == f"up-{served}"
        assert response.output_text == FakeUpstreams.answer(served)
        sent = fake.received[-1]
        assert sent["api"] == "responses" and sent["path_model"] == served
        assert sent["body"] | {"model": f"up-{served}"} == sent["body"]
        assert sent["body"]["instructions"] == "Be brief." and sent["body"]["temperature"] == 0.3
        assert sent["authorization"] == "Bearer up-key" and "budget" not in sent["body"]
        events = list(
            client.responses.create(
                model="evalprism-router",
                input="And at sunset?",
                stream=True,
                extra_headers={"x-request-id": "streamed-sunset"},
            )
        )
        created, completed = events[0], events[-1]
        assert created.type == "response.created" and completed.type == "response.completed"
        streamed = created.model_extra["evalprism"]["model"]
        assert {created.response.model, completed.response.model} == {streamed}
        assert created.model_extra["evalprism"]["upstream_model"] == f"up-{streamed}"
        with client.responses.stream(
            model="gamma", input="Once more", extra_headers={"x-request-id": "streamed-response"}
        ) as stream:
            final = stream.get_final_response()
        assert final.model == "gamma" and final.output_text == FakeUpstreams.answer("gamma")
        # a stream's line is written as it ends, maybe after the last byte (and after the next request's line)
        sunset, once_more = svc.log_line("streamed-sunset"), svc.log_line("streamed-response")
        lines = svc.log_lines()
        assert [line["endpoint"] for line in lines] == ["/v1/responses"] * 3
        assert lines[0]["affinity"] == "routed"  # the first, answered whole: its line is written before its answer
        assert sunset["affinity"] == "routed" and once_more.get("affinity") is None
        assert sunset["outcome"] == "completed" and sunset["bytes_relayed"] > 0


def test_previous_response_id_pins_the_upstream_that_issued_it(fake: FakeUpstreams, tmp_path: Path) -> None:
    """Each answer continued by previous_response_id goes to the upstream that issued it, and only there
    (no failover: no other upstream holds that response); 20 fresh requests under the same mix do go
    to both candidates, so the pin is not the mix's doing."""
    with start(fake, tmp_path) as svc:
        client = openai_client(svc)
        fresh = {client.responses.create(model="evalprism-router", input=f"hi {i}").model for i in range(20)}
        assert fresh == {"beta", "delta"}
        previous = client.responses.create(model="evalprism-router", input="Add 2 and 3", tools=TOOLS["responses"])
        for _ in range(6):
            answer = client.responses.create(
                model="evalprism-router",
                previous_response_id=previous.id,
                input=[{"type": "function_call_output", "call_id": "call_1", "output": "5"}],
            )
            assert answer.model == previous.model
            assert answer.model_extra["evalprism"]["continued_by"] == "previous_response_id"
            previous = answer
        fake.behaviour[previous.model] = "fail"
        with pytest.raises(openai.APIStatusError) as failed:
            client.responses.create(
                model="evalprism-router",
                previous_response_id=previous.id,
                input="and now?",
                extra_headers={"x-request-id": "pinned"},
            )
        assert failed.value.status_code == 502
        assert [a["model"] for a in svc.log_line("pinned")["attempts"]] == [previous.model]


def test_responses_errors_have_openais_shape(fake: FakeUpstreams, tmp_path: Path) -> None:
    """A wrong key, an unknown model, a malformed item, input with nothing to route on and upstreams that
    all fail reach the openai SDK as its own error classes, each body OpenAI's {"error": {...}} naming
    the field at fault."""
    with start(fake, tmp_path) as svc:
        with pytest.raises(openai.AuthenticationError) as denied:
            openai.OpenAI(base_url=svc.url + "/v1", api_key="wrong", max_retries=0).responses.create(
                model="alpha", input="hi"
            )
        assert denied.value.body["code"] == "invalid_api_key"
        client = openai_client(svc)
        with pytest.raises(openai.NotFoundError) as missing:
            client.responses.create(model="gpt-9", input="hi")
        assert missing.value.body["code"] == "model_not_found" and "'gpt-9' is not served here" in missing.value.message
        with pytest.raises(openai.UnprocessableEntityError) as malformed:
            client.responses.create(model="alpha", input=[{"type": "function_call", "call_id": "c1", "name": "add"}])
        assert malformed.value.body == {
            "message": "input: item 0 (function_call): 'arguments' is missing, expected text",
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
        with pytest.raises(openai.UnprocessableEntityError) as nothing:
            client.responses.create(model="evalprism-router", input=[{"type": "reasoning", "summary": []}])
        assert nothing.value.body["message"] == "no user message with text to route on"
        assert nothing.value.body["param"] == "input"
        for name in MODELS:
            fake.behaviour[name] = "fail"
        with pytest.raises(openai.APIStatusError) as failed:
            client.responses.create(model="evalprism-router", input="hi")
        assert failed.value.status_code == 502 and failed.value.body["type"] == "upstream_error"
        assert "every upstream attempt failed" in failed.value.message
    assert all(r["api"] == "responses" for r in fake.received)


def test_the_openai_tool_runner_runs_through_the_router(fake: FakeUpstreams, tmp_path: Path) -> None:
    """The SDK's own Responses tool runner (openai/lib/responses_tool_runner.py) sends its whole input
    history with each request: its two tool rounds and the answer stay on the model of its first request."""
    runners = pytest.importorskip("openai.lib.responses_tool_runner", reason="this openai has no Responses tool runner")
    RegisteredFunction, ResponsesToolRunner = runners.RegisteredFunction, runners.ResponsesToolRunner

    fake.tool_rounds = 2
    calls: list[dict[str, object]] = []

    def add(arguments: dict[str, object]) -> str:
        calls.append(arguments)
        return "5"

    tool = {"type": "function", "name": "add", "parameters": {"type": "object", "properties": {}}, "strict": False}
    with start(fake, tmp_path) as svc:
        runner = ResponsesToolRunner(functions=[RegisteredFunction(tool, add)])
        final = runner.run(openai_client(svc), {"model": "evalprism-router", "input": "What is 2 + 3? Use the tool."})
        assert calls == [{"a": 2, "b": 3}] * 2
        served = [line["model"] for line in svc.log_lines()]
        assert len(served) == 3 and set(served) == {final.model}
        assert [line["affinity"] for line in svc.log_lines()] == ["routed", "sticky", "sticky"]


# --- 2. the Messages API through the router --------------------------------------------------------


def test_messages_create_and_stream_through_the_anthropic_sdk(fake: FakeUpstreams, tmp_path: Path) -> None:
    """The anthropic SDK (x-api-key, and bearer auth): messages.create and messages.stream, the candidate's
    name as the message's model; the upstream gets /messages with its own key as x-api-key and the
    client's anthropic-version and anthropic-beta."""
    with start(fake, tmp_path) as svc:
        client = anthropic_client(svc)
        message = client.messages.create(
            model="evalprism-router",
            max_tokens=64,
            system="Be brief.",
            messages=[{"role": "user", "content": "Why is the sky blue?"}],
            extra_headers={"anthropic-beta": "tools-2024-05-16"},
        )
        served = message.model_extra["evalprism"]["model"]
        assert message.model == served and message.content[0].text == FakeUpstreams.answer(served)
        assert message.model_extra["evalprism"]["upstream_model"] == f"up-{served}"
        sent = fake.received[-1]
        assert (
            sent["api"] == "messages" and sent["body"]["model"] == f"up-{served}" and sent["body"]["max_tokens"] == 64
        )
        assert sent["headers"]["x-api-key"] == "up-key" and "authorization" not in sent["headers"]
        # the version the SDK itself sends (2023-06-01 in anthropic 1.x, 2026-10-21 in 2.14) passes through
        assert sent["headers"]["anthropic-version"] == client.default_headers["anthropic-version"]
        assert sent["headers"]["anthropic-beta"] == "tools-2024-05-16"
        with client.messages.stream(
            model="beta", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert text == FakeUpstreams.answer("beta") and final.model == "beta"
        assert final.usage.output_tokens == FakeUpstreams.USAGE["completion_tokens"]
        events = list(
            anthropic_client(svc, auth_token=KEY).messages.create(
                model="evalprism-router",
                max_tokens=8,
                messages=[{"role": "user", "content": "Hi"}],
                stream=True,
                extra_headers={"x-request-id": "raw-stream"},
            )
        )
        assert events[0].type == "message_start" and events[-1].type == "message_stop"
        assert events[0].message.model == events[0].model_extra["evalprism"]["model"]
        line = svc.log_line("raw-stream")  # a stream's line is written as it ends, maybe after the last byte
        assert line["outcome"] == "completed" and line["endpoint"] == "/v1/messages"


def test_messages_errors_have_anthropics_shape(fake: FakeUpstreams, tmp_path: Path) -> None:
    """A wrong key, an unknown model, an invalid body and upstreams that all fail reach the anthropic SDK
    as its own error classes, each body Anthropic's {"type": "error", "error": {...}}."""
    with start(fake, tmp_path) as svc:
        hello = [{"role": "user", "content": "Hi"}]
        with pytest.raises(anthropic.AuthenticationError) as denied:
            anthropic_client(svc, api_key="wrong").messages.create(model="alpha", max_tokens=8, messages=hello)
        assert denied.value.body["type"] == "error" and denied.value.body["error"]["type"] == "authentication_error"
        client = anthropic_client(svc)
        with pytest.raises(anthropic.NotFoundError) as missing:
            client.messages.create(model="claude-9", max_tokens=8, messages=hello)
        assert missing.value.body["error"]["type"] == "not_found_error" and "claude-9" in missing.value.message
        with pytest.raises(anthropic.BadRequestError) as invalid:
            client.messages.create(
                model="alpha", max_tokens=8, messages=[{"role": "user", "content": [{"type": "tool_use"}]}]
            )
        assert invalid.value.body["error"]["message"] == (
            "messages.0.content: block 0 (tool_use): 'id' is missing, expected text"
        )
        for name in MODELS:
            fake.behaviour[name] = "overloaded"
        with pytest.raises(anthropic.APIStatusError) as failed:
            client.messages.create(model="evalprism-router", max_tokens=8, messages=hello)
        assert failed.value.status_code == 502 and failed.value.body["type"] == "error"
        assert failed.value.body["error"]["type"] == "api_error" and "upstream answered 529" in failed.value.message
        assert {a["status"] for a in failed.value.body["evalprism"]["attempts"]} == {529}


def test_the_anthropic_tool_runner_runs_through_the_router(fake: FakeUpstreams, tmp_path: Path) -> None:
    """The anthropic SDK's beta tool runner: two tool rounds and the answer on one model."""
    from anthropic import beta_tool

    fake.tool_rounds = 2

    @beta_tool
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    with start(fake, tmp_path) as svc:
        runner = anthropic_client(svc).beta.messages.tool_runner(
            model="evalprism-router", max_tokens=64, tools=[add], messages=[{"role": "user", "content": "2 + 3?"}]
        )
        final = runner.until_done()
        lines = svc.log_lines()
        assert len(lines) == 3 and {line["model"] for line in lines} == {final.model}
        assert [line["affinity"] for line in lines] == ["routed", "sticky", "sticky"]
        assert fake.received[-1]["body"]["messages"][-1]["content"][0]["content"] == "5"
        # anthropic 2.x runs the loop as a message thread (only the new tool result sent, continuing the
        # previous message); 1.x sends the whole history: either way the conversation stays on its model
        threaded = "thread" in fake.received[0]["body"]
        expected = "previous_message_id" if threaded else "history"
        assert [line.get("continued_by") for line in lines] == [None, expected, expected]


def test_a_thread_continues_on_the_upstream_holding_it(fake: FakeUpstreams, tmp_path: Path) -> None:
    """Messages threads over plain HTTP (whatever the SDK's version): a continuation goes to the upstream
    that issued its previous_message_id, alone, even when the router would draw another model; an id the
    router never saw is routed, and the upstream's thread_not_found passes back as it is (its
    error.details is what makes the SDK replay the history under a new thread)."""
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    result = [{"type": "tool_result", "tool_use_id": "call_1", "content": "5"}]
    fake.tool_rounds = 1
    with start(fake, tmp_path, budget=None) as svc, httpx.Client(base_url=svc.url, timeout=CLIENT_TIMEOUT_S) as http:

        def send(thread: dict[str, Any], content: Any) -> httpx.Response:
            body = {"model": "evalprism-router", "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
            return http.post("/v1/messages", json={**body, "thread": thread}, headers=headers)

        opened = send({"type": "create"}, "2 + 3?").json()
        assert opened["model"] == "alpha"  # best, with no budget
        fake.behaviour["alpha"] = "status:500"  # the router would now fail over (to beta) ...
        continued = send({"type": "continue", "previous_message_id": opened["id"]}, result)
        # ... but only alpha holds the thread: pinned, no failover
        assert continued.status_code == 502 and [r["path_model"] for r in fake.received[1:]] == ["alpha"]
        fake.behaviour.clear()
        answered = send({"type": "continue", "previous_message_id": opened["id"]}, result).json()
        assert answered["model"] == "alpha" and answered["content"][0]["text"] == FakeUpstreams.answer("alpha")
        lost = send({"type": "continue", "previous_message_id": "msg_from_elsewhere"}, result)
        assert lost.status_code == 404
        assert lost.json()["error"]["details"] == {"error_code": "thread_not_found"}
        lines = svc.log_lines()
        assert [line.get("continued_by") for line in lines] == [
            None,
            "previous_message_id",
            "previous_message_id",
            None,
        ]
        assert lines[-1]["outcome"] == "upstream_refused"


def test_the_tool_runner_recovers_a_thread_its_upstream_lost(fake: FakeUpstreams, tmp_path: Path) -> None:
    """anthropic 2.x: the upstream forgets its threads while each tool runs; the router passes its
    thread_not_found back (not a failover: no other upstream holds the thread either), the SDK replays
    the whole history, and the loop ends with the answer, every request on the model it began on."""
    from anthropic import beta_tool

    if not anthropic_client_threads():
        pytest.skip("this anthropic SDK sends no message threads (1.x)")
    fake.tool_rounds = 2

    @beta_tool
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        fake.threads.clear()  # the upstream loses every thread while the tool runs
        return str(a + b)

    with start(fake, tmp_path) as svc:
        runner = anthropic_client(svc).beta.messages.tool_runner(
            model="evalprism-router", max_tokens=64, tools=[add], messages=[{"role": "user", "content": "2 + 3?"}]
        )
        final = runner.until_done()
        assert final.content[0].text == FakeUpstreams.answer(final.model)
        sent = [(r["body"].get("thread", {}).get("type"), len(r["body"]["messages"])) for r in fake.received]
        # a thread, its lost continuation, the whole history replayed under a new thread; that one lost
        # as well, so the SDK stops threading and sends the whole history unthreaded
        assert sent == [("create", 1), ("continue", 1), ("create", 3), ("continue", 1), (None, 5)]
        assert [line["model"] for line in svc.log_lines()] == [final.model] * 5


# --- 3. each API goes to the candidates that serve it ------------------------------------------------


def test_a_request_goes_only_to_candidates_serving_its_api(fake: FakeUpstreams, tmp_path: Path) -> None:
    """alpha and delta serve chat only, beta chat and messages, gamma every API: messages requests are
    routed among beta and gamma (and fail over only between them), responses requests go to gamma; a
    candidate named on an API it does not serve is a 404 in that API's shape."""
    apis = {"alpha": ["chat"], "beta": ["chat", "messages"], "gamma": ALL_APIS, "delta": ["chat"]}
    with start(fake, tmp_path, apis=apis, budget=None) as svc:
        client = anthropic_client(svc)
        hello = [{"role": "user", "content": "Hi"}]
        assert client.messages.create(model="evalprism-router", max_tokens=8, messages=hello).model == "beta"
        fake.behaviour["beta"] = "fail"
        failed_over = client.messages.create(model="evalprism-router", max_tokens=8, messages=hello)
        assert failed_over.model == "gamma"
        assert [a["model"] for a in failed_over.model_extra["evalprism"]["attempts"]] == ["beta", "gamma"]
        assert openai_client(svc).responses.create(model="evalprism-router", input="Hi").model == "gamma"
        with pytest.raises(anthropic.NotFoundError) as refused:
            client.messages.create(model="alpha", max_tokens=8, messages=hello)
        assert "'alpha' does not serve the messages API" in refused.value.message
        assert "one of beta, gamma" in refused.value.message
        assert {r["path_model"] for r in fake.received} == {"beta", "gamma"}


# --- 4. a 30-turn agent session keeps its model and routes on what the human wrote --------------------


def _chat_session(svc: InProcessService, history: list[Any]) -> Callable[[], tuple[str, list[str], dict[str, Any]]]:
    client = openai_client(svc)

    def step() -> tuple[str, list[str], dict[str, Any]]:
        answer = client.chat.completions.create(model="evalprism-router", messages=history, tools=TOOLS["chat"])
        message = answer.choices[0].message
        history.append(message)  # the SDK's own object, as its documentation's tool loop does
        return answer.model, [call.id for call in message.tool_calls or []], answer.model_extra["evalprism"]

    return step


def _responses_session(
    svc: InProcessService, history: list[Any]
) -> Callable[[], tuple[str, list[str], dict[str, Any]]]:
    client = openai_client(svc)

    def step() -> tuple[str, list[str], dict[str, Any]]:
        answer = client.responses.create(
            model="evalprism-router",
            instructions="You are Codex.",
            input=history,
            tools=TOOLS["responses"],
            store=False,
        )
        history.extend(item.model_dump(exclude_none=True) for item in answer.output)
        calls = [item.call_id for item in answer.output if item.type == "function_call"]
        return answer.model, calls, answer.model_extra["evalprism"]

    return step


def _messages_session(svc: InProcessService, history: list[Any]) -> Callable[[], tuple[str, list[str], dict[str, Any]]]:
    client = anthropic_client(svc)

    def step() -> tuple[str, list[str], dict[str, Any]]:
        answer = client.messages.create(
            model="evalprism-router",
            max_tokens=512,
            system="You are Claude Code.",
            messages=history,
            tools=TOOLS["messages"],
        )
        history.append(
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in answer.content]}
        )
        return (
            answer.model,
            [block.id for block in answer.content if block.type == "tool_use"],
            answer.model_extra["evalprism"],
        )

    return step


SESSIONS = {"chat": _chat_session, "responses": _responses_session, "messages": _messages_session}


def run_session(svc: InProcessService, fake: FakeUpstreams, api: str) -> Iterator[tuple[str, bool, dict[str, Any]]]:
    """Drive the recorded session through the router with ``api``'s SDK, sending the whole history each
    time as the harnesses do: for each request, the candidate that answered, whether the request was
    inside a tool exchange (it sent tool results back), and the answer's evalprism field."""
    history: list[Any] = []
    step = SESSIONS[api](svc, history)
    for task in range(len(TASKS)):
        fake.tool_rounds = TASKS[task].rounds
        history.extend(human_message(api, task))
        for round_ in range(TASKS[task].rounds + 1):
            model, calls, annotation = step()
            yield model, round_ > 0, annotation
            if not calls:
                assert round_ == TASKS[task].rounds
                break
            for call in calls:
                history.extend(tool_result(api, call, task, round_))


@pytest.mark.parametrize("api", ALL_APIS)
def test_a_30_turn_agent_session_keeps_its_model(fake: FakeUpstreams, tmp_path: Path, api: str) -> None:
    """The recorded session (tests/agent_transcripts.py: a compaction summary, system reminders, five tasks
    with tool loops, 30 requests) in each API's shape: its first request is routed on the human's words
    alone (prompt_sha256 of the human's text: the summary, reminders, AGENTS.md and environment blocks
    are dropped), every later request keeps that model (sticky, recognised by its history), so there are
    0 switches, inside tool exchanges or out; every line's routing prompt is the human's turns so far.
    With affinity off, the same session under the same mix changes model inside its tool exchanges."""
    (tmp_path / "kept").mkdir()
    with start(fake, tmp_path / "kept") as svc:
        served = list(run_session(svc, fake, api))
        lines = svc.log_lines()
    assert len(served) == len(lines) == REQUESTS == 30
    first = lines[0]
    assert first["affinity"] == "routed" and first["distribution"] == {"beta": 0.75, "delta": 0.25}
    assert {model for model, _, _ in served} == {first["decided"]}
    assert [line["affinity"] for line in lines[1:]] == ["sticky"] * 29
    assert {line["continued_by"] for line in lines[1:]} == {"history"}
    tasks_so_far = [1 + sum(1 for done in _task_starts()[1:] if done <= i) for i in range(REQUESTS)]
    assert [line["prompt_sha256"] for line in lines] == [sha("\n\n".join(human_turns(n))) for n in tasks_so_far]
    (tmp_path / "free").mkdir()
    with start(fake, tmp_path / "free", affinity={"enabled": False}) as svc:
        free = list(run_session(svc, fake, api))
    switches = sum(
        inside and model != before for (model, inside, _), (before, _, _) in zip(free[1:], free, strict=False)
    )
    assert switches > 0


def _task_starts() -> list[int]:
    """The index of each task's first request in the session."""
    starts, at = [], 0
    for task in TASKS:
        starts.append(at)
        at += task.rounds + 1
    return starts


# --- 5. when a conversation moves ---------------------------------------------------------------------


def _chat_turn(client: Any, history: list[Any], **extra: Any) -> Any:
    answer = client.chat.completions.create(messages=history, **{"model": "evalprism-router", **extra})
    history.append(answer.choices[0].message)
    return answer


def test_a_conversation_moves_only_when_its_model_fails_or_is_over_budget(fake: FakeUpstreams, tmp_path: Path) -> None:
    """Unconstrained, a conversation is routed to alpha. alpha fails: beta answers and becomes the
    conversation's model; it stays there; a budget below beta's cost moves it (over_budget) to delta,
    the one candidate within it; when delta's circuit is open it moves again (unavailable)."""
    with start(fake, tmp_path, budget=None, breaker_failures=2) as svc:
        client = openai_client(svc)
        history: list[Any] = [{"role": "user", "content": "hello"}]
        assert _chat_turn(client, history).model == "alpha"
        fake.behaviour["alpha"] = "fail"
        history.append({"role": "user", "content": "and?"})
        failed_over = _chat_turn(client, history)
        assert failed_over.model == "beta" and failed_over.model_extra["evalprism"]["decided"] == "alpha"
        fake.behaviour.clear()
        history.append({"role": "user", "content": "go on"})
        kept = _chat_turn(client, history)
        assert kept.model == "beta" and kept.model_extra["evalprism"]["affinity"] == "sticky"
        history.append({"role": "user", "content": "cheaper now"})
        moved = _chat_turn(client, history, extra_body={"budget": 1.0}).model_extra["evalprism"]
        assert (moved["model"], moved["affinity"], moved["moved_from"], moved["move_reason"]) == (
            "delta",
            "routed",
            "beta",
            "over_budget",
        )
        history.append({"role": "user", "content": "still there?"})
        fake.behaviour["delta"] = "fail"
        for _ in range(2):  # delta fails twice (no fallback within the budget it was routed under): its circuit opens
            with pytest.raises(openai.APIStatusError):
                client.chat.completions.create(model="evalprism-router", messages=history)
        fake.behaviour.clear()
        away = _chat_turn(client, history).model_extra["evalprism"]
        assert (away["model"], away["moved_from"], away["move_reason"]) == ("alpha", "delta", "unavailable")


def test_with_a_switch_margin_a_conversation_moves_between_tool_loops_only(fake: FakeUpstreams, tmp_path: Path) -> None:
    """switch_margin: a conversation on delta moves to alpha (predicted far better) at the human's next
    turn, never while it sends tool results back; with a margin above the gain it stays."""
    fake.tool_rounds = 1
    for margin, moves in ((0.1, True), (0.9, False)):
        (tmp_path / str(margin)).mkdir()
        with start(fake, tmp_path / str(margin), budget=None, affinity={"switch_margin": margin}) as svc:
            client = openai_client(svc)
            history: list[Any] = [{"role": "user", "content": "list the files"}]
            call = _chat_turn(client, history, model="delta", tools=TOOLS["chat"])  # named: the conversation's model
            history.append(
                {"role": "tool", "tool_call_id": call.choices[0].message.tool_calls[0].id, "content": "a.py"}
            )
            inside = _chat_turn(client, history, tools=TOOLS["chat"])
            assert inside.model == "delta" and "distribution" not in inside.model_extra["evalprism"]  # no P2L run
            history.append({"role": "user", "content": "now explain them"})
            after = _chat_turn(client, history, tools=TOOLS["chat"])
            assert after.model == ("alpha" if moves else "delta")
            annotation = after.model_extra["evalprism"]
            assert annotation["affinity"] == ("routed" if moves else "sticky") and "distribution" in annotation
            assert annotation.get("move_reason") == ("gain" if moves else None)


def test_a_session_header_keeps_the_model_across_a_compaction(fake: FakeUpstreams, tmp_path: Path) -> None:
    """Claude Code's session header keeps a session on its model when compaction replaces its history
    (the history hash alone cannot see that it continues); without the header it is routed anew."""
    with start(fake, tmp_path) as svc:
        client = anthropic_client(svc)
        compacted = [{"role": "user", "content": "This session is being continued from a previous conversation."}]
        seen = set()
        for i in range(12):
            message = client.messages.create(
                model="evalprism-router",
                max_tokens=8,
                messages=[{"role": "user", "content": f"task {i}"}] if i == 0 else compacted,
                extra_headers={"x-claude-code-session-id": "session-1"},
            )
            seen.add(message.model)
        assert len(seen) == 1 and message.model_extra["evalprism"]["continued_by"] == "session"
        anew = {
            client.messages.create(model="evalprism-router", max_tokens=8, messages=compacted).model for _ in range(12)
        }
        assert anew == {"beta", "delta"}


def test_streams_name_the_candidate_and_are_remembered(fake: FakeUpstreams, tmp_path: Path) -> None:
    """Chat, Responses and Messages streams: every event that carries the model names the candidate; a
    streamed Responses answer's id pins its upstream; a streamed chat answer's conversation is kept;
    usage is priced (the realised cost in the event carrying it and in the log)."""
    cost = 12 * 0.001 + 4 * 0.002  # the fake's usage at these prices
    with start(fake, tmp_path, prices=dict.fromkeys(MODELS, (0.001, 0.002))) as svc:
        client = openai_client(svc)
        history: list[Any] = [{"role": "user", "content": "stream it"}]
        chunks = list(
            client.chat.completions.create(
                model="evalprism-router", messages=history, stream=True, stream_options={"include_usage": True}
            )
        )
        served = chunks[0].model_extra["evalprism"]["model"]
        assert {c.model for c in chunks} == {served} and chunks[-1].model_extra["evalprism"]["realised_cost"] == cost
        history += [{"role": "assistant", "content": FakeUpstreams.answer(served)}, {"role": "user", "content": "more"}]
        for _ in range(5):
            assert client.chat.completions.create(model="evalprism-router", messages=history).model == served
        events = list(client.responses.create(model="evalprism-router", input="stream a response", stream=True))
        done = events[-1]
        assert done.model_extra["evalprism"]["realised_cost"] == cost
        for _ in range(5):
            pinned = client.responses.create(
                model="evalprism-router", previous_response_id=done.response.id, input="go on"
            )
            assert pinned.model == done.response.model
        with anthropic_client(svc).messages.stream(
            model="evalprism-router",
            max_tokens=8,
            messages=[{"role": "user", "content": "stream a message"}],
            extra_headers={"x-request-id": "streamed-message"},
        ) as stream:
            final = stream.get_final_message()
        assert final.model in ("beta", "delta")
        line = svc.log_line("streamed-message")  # a stream's line is written as it ends, maybe after the last byte
        assert line["endpoint"] == "/v1/messages" and line["realised_cost"] == cost and line["outcome"] == "completed"


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_a_broken_stream_ends_with_the_apis_error_event(fake: FakeUpstreams, tmp_path: Path, api: str) -> None:
    """An upstream that breaks its stream off after the first event: the client gets an error event in
    its API's shape (the event the SDKs raise on), and the log says stream_broken."""
    fake.behaviour["beta"] = "break"
    with start(fake, tmp_path) as svc:
        with httpx.stream(
            "POST",
            f"{svc.url}/v1/{api}",
            headers={"authorization": f"Bearer {KEY}", "x-request-id": f"broken-{api}"},
            json={"model": "beta", "stream": True, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
            if api == "messages"
            else {"model": "beta", "stream": True, "input": "hi"},
            timeout=CLIENT_TIMEOUT_S,
        ) as response:
            text = response.read().decode()
        last = text.strip().split("\n\n")[-1]
        assert last.startswith("event: error\ndata: ")
        error = json.loads(last.split("data: ", 1)[1])
        if api == "messages":
            assert error["type"] == "error" and error["error"]["type"] == "api_error"
        else:
            assert error["type"] == "error" and error["code"] == "upstream_error"
        line = svc.log_line(f"broken-{api}")
        assert line["outcome"] == "stream_broken" and "broke off" in line["stream_error"]


def test_chat_answers_name_the_candidate(fake: FakeUpstreams, tmp_path: Path) -> None:
    """Item 6 for chat: model is the candidate's name (LiteLLM's cost map keys on it), the upstream's own
    id in evalprism.upstream_model."""
    with start(fake, tmp_path) as svc:
        answer = openai_client(svc).chat.completions.create(
            model="evalprism-router", messages=[{"role": "user", "content": "hi"}]
        )
        annotation = answer.model_extra["evalprism"]
        assert answer.model == annotation["model"] and annotation["upstream_model"] == f"up-{answer.model}"
