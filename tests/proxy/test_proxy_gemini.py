"""The Gemini API through the proxy, with the real ``google-genai`` SDK as the client: the
history reduced within the window, valid by Gemini's rules, every thought signature the
upstream gets one the client sent (and every kept call keeping its own), the task kept as Gemini
CLI sends it, ``cachedContent`` left whole, the client's key (header or ``key=``) as its
identity, the proxy's own errors in Gemini's shape."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fake_upstream import Behaviour, FakeUpstream
from proxy_doubles import GEMINI_CLI_CONTEXT, StartProxy, gemini_history
from recall_upstream import (
    RECALL,
    USAGE_IN,
    USAGE_OUT,
    RecallUpstream,
    signature,
    tool_names,
    tool_output,
)

from contextwarden.formats.gemini import from_gemini
from contextwarden.formats.validate import validate_gemini
from contextwarden.proxy.wire.gemini import GEMINI

genai = pytest.importorskip("google.genai")
types = pytest.importorskip("google.genai.types")

Upstream = tuple[FakeUpstream, str]
MODEL = "gemini-2.5-pro"
WINDOW = 16_000
TASK = "Fix the failing test in parser.py"
SYSTEM = {"parts": [{"text": "You are Gemini CLI, an interactive CLI agent."}]}
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
        ]
    }
]


def _client(proxy: str, key: str = "test-key") -> Any:
    # Gemini CLI's API version (the SDK's default with a base URL of one's own is v1)
    options = types.HttpOptions(base_url=proxy, api_version="v1beta")
    return genai.Client(api_key=key, http_options=options)


def _config() -> Any:
    return types.GenerateContentConfig(
        system_instruction=types.Content.model_validate(SYSTEM),
        tools=[types.Tool.model_validate(t) for t in TOOLS],
        max_output_tokens=2048,
    )


def _contents(steps: int) -> list[Any]:
    return [types.Content.model_validate(c) for c in gemini_history(TASK, steps)]


def _signatures(contents: list[dict[str, Any]]) -> dict[str, Any]:
    """Each signed part's signature, by what the part holds (its call's path, or its place)."""
    out: dict[str, Any] = {}
    for c in contents:
        for p in c["parts"]:
            if "thoughtSignature" in p:
                fn = p.get("functionCall")
                out[json.dumps(fn["args"]) if fn else p["thoughtSignature"]] = p["thoughtSignature"]
    return out


@pytest.mark.parametrize("stream", [False, True])
def test_a_long_gemini_cli_session_is_reduced_valid_and_signed(
    upstream: Upstream, start_proxy: StartProxy, stream: bool
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW)
    client = _client(proxy)
    contents = _contents(60)
    if stream:
        chunks = list(
            client.models.generate_content_stream(model=MODEL, contents=contents, config=_config())
        )
        text = "".join(c.text or "" for c in chunks)
    else:
        text = client.models.generate_content(model=MODEL, contents=contents, config=_config()).text
    sent = fake.last.json
    assert fake.last.path == f"/v1beta/models/{MODEL}:" + (
        "streamGenerateContent" if stream else "generateContent"
    )
    assert (fake.last.query == "alt=sse") is stream
    assert fake.last.headers["x-goog-api-key"] == "test-key"
    assert text.startswith(f"received {len(sent['contents'])} contents")
    assert len(sent["contents"]) < 2 * 60
    assert validate_gemini(sent["contents"]) == []
    # the system instruction, tools and generation config go on as the client sent them
    assert sent["systemInstruction"]["parts"] == SYSTEM["parts"]
    assert sent["tools"][0]["functionDeclarations"][0]["name"] == "read_file"
    assert sent["generationConfig"]["maxOutputTokens"] == 2048
    # the task as Gemini CLI sends it: its context turn, then the user's words
    words = [p.get("text") for c in sent["contents"] for p in c["parts"]]
    assert GEMINI_CLI_CONTEXT in words and TASK in words
    # every signature sent is the client's, on the part it came on; every call kept is signed
    client_sigs = _signatures(gemini_history(TASK, 60))
    sent_sigs = _signatures(sent["contents"])
    assert sent_sigs and all(client_sigs[k] == v for k, v in sent_sigs.items())
    calls = [p for c in sent["contents"] for p in c["parts"] if "functionCall" in p]
    assert calls and all("thoughtSignature" in p for p in calls)
    stats = httpx.get(proxy + "/stats").json()
    assert stats["by_route"] == {"gemini": 1} and stats["transformed"] == 1


def test_an_unchanged_request_goes_byte_for_byte(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW, recall_tool=False)
    body = json.dumps(
        {"contents": gemini_history(TASK, 2), "systemInstruction": SYSTEM, "tools": TOOLS}
    ).encode()
    r = httpx.post(
        f"{proxy}/v1beta/models/{MODEL}:generateContent",
        content=body,
        headers={"x-goog-api-key": "k", "content-type": "application/json"},
    )
    assert r.status_code == 200 and fake.last.body == body
    assert int(r.headers["x-contextwarden-tokens-before"]) > 0


def test_cached_content_gets_no_system_instruction_or_tools(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    """The cache holds the system instruction and tools (the API refuses them beside it): a
    compaction's summary goes as a user turn, no recall tool is offered."""
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW, recall_tool=True)
    body = {"contents": gemini_history(TASK, 60), "cachedContent": "cachedContents/abc123"}
    r = httpx.post(f"{proxy}/v1beta/models/{MODEL}:generateContent?key=k", json=body)
    assert r.status_code == 200
    sent = fake.last.json
    assert sent["cachedContent"] == "cachedContents/abc123"
    assert "systemInstruction" not in sent and "tools" not in sent
    assert validate_gemini(sent["contents"]) == []
    assert len(sent["contents"]) < len(body["contents"])


def test_the_key_in_the_query_is_the_client(upstream: Upstream, start_proxy: StartProxy) -> None:
    """Two keys, one history: two clients (their own conversations), and the key goes on."""
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW)
    body = {"contents": gemini_history(TASK, 30), "systemInstruction": SYSTEM}
    for key in ("alpha", "beta"):
        r = httpx.post(f"{proxy}/v1beta/models/{MODEL}:generateContent?key={key}", json=body)
        assert r.status_code == 200 and fake.last.query == f"key={key}"
    assert httpx.get(proxy + "/stats").json()["clients"] == 2


def test_a_system_instruction_over_the_window_is_the_gemini_error(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    """Never dropped, never cut: over the window, the proxy answers with Gemini's own error."""
    fake, url = upstream
    proxy = start_proxy(url, window=4000)
    config = types.GenerateContentConfig(system_instruction="rule " * 8000)
    client = _client(proxy)  # held: the SDK closes its connections when it is collected
    with pytest.raises(genai.errors.ClientError) as caught:
        client.models.generate_content(model=MODEL, contents="hello", config=config)
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"
    assert "exceeds the maximum number of tokens" in str(caught.value.message)
    assert fake.requests == []


def test_what_the_proxy_cannot_read_goes_upstream_unchanged(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW)
    bad = {"contents": [{"role": "robot", "parts": [{"text": "hi"}]}]}
    fake.then(Behaviour(status=400, body={"error": {"code": 400, "message": "bad role"}}))
    r = httpx.post(f"{proxy}/v1beta/models/{MODEL}:generateContent?key=k", json=bad)
    assert r.status_code == 400 and r.json()["error"]["message"] == "bad role"
    assert json.loads(fake.last.body) == bad
    assert r.headers["x-contextwarden-skipped"].startswith("invalid_request")


def test_other_gemini_calls_pass_through_counted_as_skipped(
    upstream: Upstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW)
    r = httpx.post(f"{proxy}/v1beta/models/{MODEL}:countTokens?key=k", json={"contents": []})
    assert r.status_code == 200 and fake.last.path == f"/v1beta/models/{MODEL}:countTokens"
    stats = httpx.get(proxy + "/stats").json()
    assert stats["skipped"] == 1 and stats["by_route"] == {"passthrough": 1}
    assert any(":countTokens is not an API the proxy serves" in m for m in caplog.messages)


def test_a_real_agent_session_as_gemini_contents(
    upstream: Upstream, start_proxy: StartProxy, anthropic_recording: tuple[Any, Any]
) -> None:
    """The real Claude Code recording, written as Gemini contents, through the proxy at 32k:
    within the window, valid, its task kept."""
    from contextwarden.formats import from_anthropic
    from contextwarden.formats.gemini import to_gemini

    system, messages = anthropic_recording
    instruction, contents = to_gemini(from_anthropic(messages, system=system))
    assert validate_gemini(contents) == []
    fake, url = upstream
    proxy = start_proxy(url, window=32_000)
    body = {"contents": contents, "systemInstruction": instruction}
    r = httpx.post(f"{proxy}/v1beta/models/{MODEL}:generateContent?key=k", json=body, timeout=120)
    assert r.status_code == 200, r.text
    sent = fake.last.json
    assert validate_gemini(sent["contents"]) == []
    assert int(r.headers["x-contextwarden-tokens-after"]) <= 32_000
    task = from_gemini(contents)[0].text
    assert task[:200] in json.dumps(sent["contents"], ensure_ascii=False) or any(
        task[:100] in (p.get("text") or "") for c in sent["contents"] for p in c["parts"]
    )


# -- the recall tool on the Gemini API -------------------------------------------------------------

#: Old tool output masked (behind references), no compaction: every upstream call is a round.
RECALL_WINDOW = 32_000


def _recall_history(steps: int = 12) -> list[Any]:
    contents = gemini_history(TASK, steps)
    for i, c in enumerate(contents):
        for p in c["parts"]:
            if "functionResponse" in p:
                p["functionResponse"]["response"] = {"output": tool_output((i - 3) // 2)}
    return [types.Content.model_validate(c) for c in contents]


@pytest.mark.parametrize("stream", [False, True])
def test_recall_is_answered_at_the_proxy_signatures_and_all(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy, stream: bool
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=RECALL_WINDOW)
    client = _client(proxy)
    config = types.GenerateContentConfig(tools=[types.Tool.model_validate(t) for t in TOOLS])
    contents = _recall_history()
    if stream:
        chunks = list(
            client.models.generate_content_stream(model=MODEL, contents=contents, config=config)
        )
        text = "".join(c.text or "" for c in chunks)
        usage = chunks[-1].usage_metadata
        calls = [c.function_calls for c in chunks if c.function_calls]
    else:
        reply = client.models.generate_content(model=MODEL, contents=contents, config=config)
        text, usage, calls = reply.text or "", reply.usage_metadata, reply.function_calls
    first, second = fake.bodies
    assert tool_names(first) == ["read_file", RECALL]
    assert "quoted: SECRET-" in text and not calls
    # the rounds' usage summed, cached tokens included
    assert (usage.prompt_token_count, usage.candidates_token_count) == (2 * USAGE_IN, 2 * USAGE_OUT)
    assert usage.cached_content_token_count == 20
    # the second round: the first's contents, the model's turn as it came (its signatures
    # with it), then the answer
    assert second["contents"][:-2] == first["contents"]
    turn, answer = second["contents"][-2:]
    assert turn["role"] == "model" and turn["parts"][0]["thoughtSignature"] == signature("text-1")
    (call,) = [p for p in turn["parts"] if "functionCall" in p]
    assert call["functionCall"]["name"] == RECALL
    assert call["thoughtSignature"] == signature("call_recall_1")
    (response,) = answer["parts"]
    assert response["functionResponse"]["name"] == RECALL
    assert "SECRET-" in response["functionResponse"]["response"]["output"]
    assert validate_gemini(second["contents"]) == []
    stats = httpx.get(proxy + "/stats").json()
    assert (stats["recall_offered"], stats["recall_calls"], stats["recall_rounds"]) == (1, 1, 1)


def test_recall_with_a_call_of_the_clients_own_in_a_stream(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    """The client's own call beside a recall call is never shown: asked again after."""
    fake, url = scripted
    fake.mode = "mixed"
    proxy = start_proxy(url, window=RECALL_WINDOW)
    client = _client(proxy)
    config = types.GenerateContentConfig(tools=[types.Tool.model_validate(t) for t in TOOLS])
    chunks = list(
        client.models.generate_content_stream(
            model=MODEL, contents=_recall_history(), config=config
        )
    )
    assert len(fake.bodies) == 2
    assert not [c for c in chunks if c.function_calls]
    turn = fake.bodies[1]["contents"][-2]
    assert [p["functionCall"]["name"] for p in turn["parts"] if "functionCall" in p] == [RECALL]


def test_no_recall_tool_on_a_call_for_structured_output() -> None:
    """Gemini CLI's loop check asks for JSON by a schema: a function call in reply would make it
    retry, so the recall tool is not offered there (it is on the agent's own calls)."""
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}
    assert GEMINI.may_offer(body)
    for config in (
        {"responseMimeType": "application/json"},
        {"responseJsonSchema": {"type": "object"}},
        {"responseSchema": {"type": "OBJECT"}},
    ):
        assert not GEMINI.may_offer({**body, "generationConfig": config}), config
