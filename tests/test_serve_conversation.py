"""The parts that decide where a conversation goes, without a server: each API's adapter reading the
recorded agent session (tests/agent_transcripts.py) into one normalized conversation, the extraction of
what the human wrote, the history hash that recognises a continuing conversation, the bounded affinity
store, the config's new keys and the APIs' error shapes."""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any

import pytest
from agent_transcripts import REQUESTS, TASKS, human_message, human_turns, tool_result
from fake_apis import SHAPES, ToolCall

from evalprism.errors import EvalprismError
from evalprism.serve.affinity import AffinityStore, Kept, keys_of
from evalprism.serve.apis import APIS
from evalprism.serve.config import AffinityConfig, load_config
from evalprism.serve.conversation import Conversation, Turn
from evalprism.serve.error_shapes import error_body
from evalprism.serve.extraction import DEFAULT_EXTRACTION, Extraction

SETTINGS = AffinityConfig.model_validate({})


def _assistant(api: str, call: ToolCall | None, text: str = "done") -> list[dict[str, Any]]:
    """The model's answer as the client appends it to its history (the fake upstreams' own answer)."""
    answer = SHAPES[api].answer("up-x", text, call, "resp_1")
    if api == "chat":
        return [answer["choices"][0]["message"]]
    if api == "responses":
        return answer["output"]
    return [{"role": "assistant", "content": answer["content"]}]


def session_requests(api: str) -> list[tuple[dict[str, Any], bool]]:
    """Every request body of the recorded session in ``api``'s shape, and whether it sends tool results."""
    history: list[dict[str, Any]] = []
    out = []
    calls = 0
    for task in range(len(TASKS)):
        history += human_message(api, task)
        for step in range(TASKS[task].rounds + 1):
            out.append((_body(api, history), step > 0))
            if step == TASKS[task].rounds:
                history += _assistant(api, None)
                break
            calls += 1
            call = ToolCall(f"call_{calls}", "shell")
            history += _assistant(api, call)
            history += tool_result(api, call.call_id, task, step)
    return out


def _body(api: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    if api == "chat":
        return {"messages": list(history)}
    if api == "responses":
        return {"input": list(history), "instructions": "You are Codex."}
    return {"messages": list(history), "max_tokens": 512, "system": "You are Claude Code."}


def conversation_of(api: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Conversation:
    adapter = APIS[api]  # type: ignore[index]
    return adapter.conversation(adapter.request.model_validate(json.loads(json.dumps(body))), headers or {}, SETTINGS)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_extraction_reads_only_what_the_human_wrote_in_each_shape(api: str) -> None:
    """All 30 requests of the session: the routing prompt is exactly the human's messages so far (the
    compaction summary, the system reminders, AGENTS.md and the environment block are dropped; tool
    results never read), and a request is inside a tool exchange exactly when it sends tool results."""
    requests = session_requests(api)
    assert len(requests) == REQUESTS == 30
    starts = [sum(t.rounds + 1 for t in TASKS[:k]) for k in range(len(TASKS))]
    for i, (body, sends_results) in enumerate(requests):
        conversation = conversation_of(api, body)
        reading = DEFAULT_EXTRACTION.read(conversation)
        asked = sum(start <= i for start in starts)
        assert reading.prompt == "\n\n".join(human_turns(asked)), (api, i)
        assert getattr(reading.prompt, "turns", (reading.prompt,)) == tuple(human_turns(asked))
        assert conversation.in_tool_exchange(reading.last_human) is sends_results, (api, i)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_each_request_continues_the_one_before_by_its_history_hash(api: str) -> None:
    """The prefix hash of every request (its history before the model's last answer) is the whole hash of
    the request before it, so the session is recognised from its history alone; another session with
    another human message before the same answer is not."""
    identities = [conversation_of(api, body).identity() for body, _ in session_requests(api)]
    assert identities[0][0] is None  # nothing answered yet: a new conversation
    for (_, before), (prefix, _) in itertools.pairwise(identities):
        assert prefix == before
    assert len({whole for _, whole in identities}) == REQUESTS
    body, _ = session_requests(api)[1]
    other = json.loads(json.dumps(body).replace("off by a cent", "off by two cents"))
    assert conversation_of(api, other).identity()[0] != identities[0][1]


def test_the_history_hash_ignores_what_clients_change_between_requests() -> None:
    """Instructions the harness rewrites (a date in the system prompt), reasoning it drops and keys it
    moves (cache_control) leave a conversation's identity as it was; its text does not."""
    base = [
        Turn("system", "text", ("today is Monday",)),
        Turn("user", "text", ("fix the bug",)),
        Turn("assistant", "reasoning"),
        Turn("assistant", "tool_call", ("shell", '{"command": "ls"}'), "c1"),
        Turn("user", "tool_result", ("a.py",), "c1"),
    ]
    same = [Turn("system", "text", ("today is Tuesday",)), *base[1:2], *base[3:]]
    assert Conversation("chat", tuple(base)).identity() == Conversation("chat", tuple(same)).identity()
    other = [*base[:4], Turn("user", "tool_result", ("b.py",), "c1")]
    assert Conversation("chat", tuple(base)).identity()[1] != Conversation("chat", tuple(other)).identity()[1]
    assert Conversation("chat", tuple(base)).identity()[1] != Conversation("messages", tuple(base)).identity()[1]
    moved = {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    plain = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert (
        conversation_of("messages", {"messages": [moved], "max_tokens": 1}).identity()
        == conversation_of("messages", {"messages": [plain], "max_tokens": 1}).identity()
    )


def test_extraction_rules_at_the_edges() -> None:
    """drop_parts matches at a part's start only; drop_blocks anywhere; a part made empty is dropped, one
    empty as sent is kept (as routing read it before); configured patterns replace the defaults; a
    conversation without human text falls back to its last user-side text, cut to the limit."""
    reminder = "<system-reminder>x</system-reminder>"
    turn = Turn(
        "user", "text", (f"fix {reminder} this", "This session is being continued from a previous conversation.")
    )
    assert DEFAULT_EXTRACTION.human_text(turn.parts) == "fix  this"
    quoted = Turn("user", "text", ("Why does it say 'This session is being continued from a previous conversation'?",))
    assert DEFAULT_EXTRACTION.human_text(quoted.parts) == quoted.parts[0]
    assert DEFAULT_EXTRACTION.human_text((reminder,)) is None
    assert DEFAULT_EXTRACTION.human_text(("", reminder)) == ""
    mine = Extraction([r"\[ticket \d+\]"], ["BOT:"])
    assert mine.human_text(("[ticket 42] the login fails", "BOT: logged")) == "the login fails"
    assert mine.human_text((reminder,)) == reminder
    assert Extraction([], []).human_text((reminder,)) == reminder
    tools_only = Conversation(
        "chat",
        (
            Turn("user", "text", (reminder,)),
            Turn("assistant", "tool_call", ("shell", "{}"), "c"),
            Turn("user", "tool_result", ("x" * 50,), "c"),
        ),
    )
    reading = DEFAULT_EXTRACTION.read(tools_only)
    assert (reading.prompt, reading.last_human, reading.routed_on(10)) == ("", None, "x" * 10)


def test_conversation_keys_in_lookup_order() -> None:
    """previous_response_id first, then the session, then the history prefix; each namespaced by API."""
    turns = (Turn("user", "text", ("hi",)), Turn("assistant", "text", ("hello",)), Turn("user", "text", ("more",)))
    keys = keys_of(Conversation("responses", turns, ("previous_response_id", "resp_1"), session="s1"))
    assert [how for how, _ in keys.lookup] == ["previous_response_id", "session", "history"]
    assert keys.lookup[0][1] == "response:resp_1" and keys.lookup[1][1] == "session:responses:s1"
    assert keys.remember[1] == "session:responses:s1"
    assert keys_of(Conversation("chat", turns[:1])).lookup == ()
    session = conversation_of(
        "messages",
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
        {"x-claude-code-session-id": "abc"},
    )
    assert session.session == "abc"
    by_user = AffinityConfig.model_validate({"user_field": True})
    body = APIS["messages"].request.model_validate(
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "metadata": {"user_id": "u_1"}}
    )
    assert APIS["messages"].conversation(body, {}, by_user).session == "user:u_1"
    assert APIS["messages"].conversation(body, {}, SETTINGS).session is None


def test_stored_answers_are_continued_by_their_id() -> None:
    """A Messages thread's continuation names the message it continues (looked up first, as a
    previous_response_id is); a request opening or continuing a thread has its answer stored upstream,
    a plain one not; a Responses answer is stored unless the request says ``store: false``."""
    result = [{"type": "tool_result", "tool_use_id": "call_1", "content": "5"}]
    continued = {"type": "continue", "previous_message_id": "msg_7"}
    conversations = {
        name: APIS["messages"].conversation(
            APIS["messages"].request.model_validate(
                {"messages": [{"role": "user", "content": result}], "max_tokens": 8, **thread}
            ),
            {},
            SETTINGS,
        )
        for name, thread in {
            "plain": {},
            "create": {"thread": {"type": "create"}},
            "go on": {"thread": continued},
        }.items()
    }
    assert {name: (c.continues, c.answer_stored) for name, c in conversations.items()} == {
        "plain": (None, False),
        "create": (None, True),
        "go on": (("previous_message_id", "msg_7"), True),
    }
    keys = keys_of(conversations["go on"])
    assert keys.lookup[0] == ("previous_message_id", "response:msg_7") and keys.answer_stored
    responses = APIS["responses"].request
    stored = [
        APIS["responses"].conversation(responses.model_validate({"input": "hi", **extra}), {}, SETTINGS).answer_stored
        for extra in ({}, {"store": True}, {"store": False})
    ]
    assert stored == [True, True, False]


def test_the_affinity_store_is_bounded_by_entries_and_time() -> None:
    now = [0.0]
    store = AffinityStore(max_entries=3, ttl_s=10.0, clock=lambda: now[0])
    store.remember(["a", "b"], Kept("alpha"))
    store.remember(["c"], Kept("beta"))
    assert store.find([("history", "a")]) == ("history", Kept("alpha"))  # a is now the most recent
    store.remember(["d"], Kept("gamma"))
    assert len(store) == 3 and store.find([("history", "b")]) is None  # b was the least recently used
    now[0] = 9.0
    assert store.find([("session", "x"), ("history", "c")]) == ("history", Kept("beta"))  # refreshed to 19
    now[0] = 15.0
    assert store.find([("history", "a")]) is None and store.find([("history", "c")]) is not None
    now[0] = 100.0
    assert store.find([("history", "c"), ("history", "d")]) is None and len(store) == 0


@pytest.mark.parametrize(
    "extra,message",
    [
        (
            "routing_prompt: {drop_blocks: ['(unclosed']}\n",
            "routing_prompt.drop_blocks: pattern 0 ('(unclosed') is not a regular expression",
        ),
        ("affinity: {ttl_s: 0}\n", "affinity.ttl_s: Input should be greater than 0"),
        ("affinity: {max_entries: 0}\n", "affinity.max_entries: Input should be greater than or equal to 1"),
        ("affinity: {switch_margin: -0.1}\n", "affinity.switch_margin: Input should be greater than or equal to 0"),
    ],
)
def test_affinity_and_extraction_settings_are_checked(tmp_path, extra: str, message: str) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("models:\n  a: {base_url: 'http://127.0.0.1:9/v1', cost: 1}\n" + extra)
    with pytest.raises(EvalprismError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_config(path)


@pytest.mark.parametrize(
    "models,extra,message",
    [
        (
            "a: {base_url: 'http://h/v1', cost: 1, apis: []}",
            "",
            "models.a.apis: expected at least one of chat, responses, messages",
        ),
        ("a: {base_url: 'http://h/v1', cost: 1, apis: [chat, chat]}", "", "models.a.apis: expected each API once"),
        ("a: {base_url: 'http://h/v1', cost: 1, apis: [completions]}", "", "models.a.apis.0: Input should be 'chat'"),
        (
            "a: {base_url: 'http://h/v1', cost: 1}\n  b: {base_url: 'http://h/v1', cost: 2, apis: [messages]}",
            "opponent: {a: 1}\n",
            "opponent: no weight on the candidates serving the messages API (b)",
        ),
        (
            "a: {base_url: 'http://h/v1', cost: 1}\n  b: {base_url: 'http://h/v1', cost: 2, apis: [messages]}",
            "budget: 1.5\n",
            "budget 1.5 is below the cheapest model's cost 2 (b)",
        ),
    ],
)
def test_each_api_has_candidates_it_can_route_among(tmp_path, models: str, extra: str, message: str) -> None:
    """The APIs a model serves are checked, and each API's candidates must make the config's opponent
    and budget possible (routing among them restricts the opponent and checks the budget)."""
    path = tmp_path / "router.yaml"
    path.write_text(f"models:\n  {models}\n{extra}")
    with pytest.raises(EvalprismError) as raised:
        load_config(path)
    assert message in str(raised.value)


def test_errors_in_each_apis_shape() -> None:
    assert error_body("openai", 422, "bad", param="input") == (
        422,
        {"error": {"message": "bad", "type": "invalid_request_error", "param": "input", "code": None}},
    )
    assert error_body("anthropic", 422, "bad") == (
        400,
        {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}},
    )
    assert error_body("anthropic", 503, "busy", "server_error")[1]["error"]["type"] == "overloaded_error"
    assert error_body("anthropic", 502, "down", "upstream_error")[1]["error"]["type"] == "api_error"


def test_a_sticky_line_round_trips_and_older_lines_still_read(tmp_path) -> None:
    """Version 3 adds the affinity fields; a version 2 chat line (none of them) reads as it was."""
    from evalprism.serve.decisions import DecisionLine, line_json, read_line

    line = DecisionLine(
        endpoint="/v1/messages",
        prompt_sha256=hashlib.sha256(b"hi").hexdigest(),
        routed=True,
        affinity="sticky",
        continued_by="history",
        decided="beta",
        model="beta",
        status=200,
        outcome="completed",
    )
    written = json.loads(line_json(line))
    assert written["schema_version"] == 3 and written["affinity"] == "sticky" and "moved_from" not in written
    assert read_line(line_json(line)) == line
    v2 = '{"schema_version":2,"time":"t","endpoint":"/v1/chat/completions","prompt_sha256":"ab","routed":false,"decided":"a"}'
    old = read_line(v2)
    assert old.schema_version == 2 and old.affinity is None and old.continued_by is None
    with pytest.raises(ValueError, match="affinity"):
        read_line(v2[:-1] + ',"affinity":"kept"}')
