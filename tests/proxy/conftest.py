"""Fixtures for the proxy tests: a recording fake upstream and proxies in front of it, both served
by uvicorn on loopback in background threads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from fake_upstream import FakeUpstream, serve  # noqa: E402
from proxy_doubles import StartProxy  # noqa: E402
from recall_upstream import RecallUpstream  # noqa: E402

from contextwarden.proxy import ProxyConfig, create_app  # noqa: E402


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on loopback for the shared-cache tests, or skip."""
    from redis_server import redis_server

    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        if url is None:
            pytest.skip("redis-server not installed or not starting (apt-get install redis-server)")
        yield url


@pytest.fixture
def upstream() -> Iterator[tuple[FakeUpstream, str]]:
    """A fresh recording fake upstream and its base URL."""
    fake = FakeUpstream()
    with serve(fake.app, log_level="critical") as url:  # its on-purpose failures are not news
        yield fake, url


@pytest.fixture
def scripted() -> Iterator[tuple[RecallUpstream, str]]:
    """A scripted upstream for the recall tool's rounds (``recall_upstream.py``) and its URL."""
    fake = RecallUpstream()
    with serve(fake.app, log_level="critical") as url:
        yield fake, url


@pytest.fixture
def start_proxy() -> Iterator[StartProxy]:
    """``start_proxy(upstream_url, warden=None, **config)`` serves a proxy and returns its URL."""
    with ExitStack() as stack:

        def start(
            upstream_url: str,
            *,
            warden: Any = None,
            warden_config: dict[str, Any] | None = None,
            **config: Any,
        ) -> str:
            config.setdefault("cache", "memory")
            if warden_config is not None:
                config["warden"] = warden_config
            from contextwarden.proxy.server import protocol

            settings = ProxyConfig.model_validate({"upstream": upstream_url, **config})
            app = create_app(settings, warden=warden)
            return stack.enter_context(serve(app, http=protocol(settings.header_timeout)))

        yield start


def _cut_after_last(messages: list[dict[str, Any]], roles: tuple[str, ...]) -> list[dict[str, Any]]:
    """The history up to its last message with one of ``roles``: what an agent sends on a call."""
    end = max(i for i, m in enumerate(messages) if m["role"] in roles)
    return messages[: end + 1]


@pytest.fixture(scope="session")
def openai_recording(shared_data: Any) -> tuple[str, list[dict[str, Any]]]:
    """The longest real mini-swe-agent recording as OpenAI messages ending on a tool result (a
    request an agent really sent), and its model."""
    from contextwarden._transcripts import load_transcript
    from contextwarden.formats import to_openai

    files = sorted(
        (shared_data / "mini-swe-agent").glob("*.traj.json"), key=lambda p: p.stat().st_size
    )
    if not files:
        pytest.skip("no mini-swe-agent recordings in the shared data")
    transcript = load_transcript(files[-1])
    return str(transcript.model), _cut_after_last(to_openai(list(transcript.messages)), ("tool",))


@pytest.fixture(scope="session")
def anthropic_recording(shared_data: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The real Claude Code recording as Anthropic (system, messages) ending on a user turn."""
    from contextwarden._transcripts import load_transcript
    from contextwarden.formats import to_anthropic

    path = shared_data / "claude-code" / "python-to-rust-port.jsonl"
    if not path.is_file():
        pytest.skip("no claude-code recording in the shared data")
    system, messages = to_anthropic(list(load_transcript(path).messages))
    return system, _cut_after_last(messages, ("user",))
