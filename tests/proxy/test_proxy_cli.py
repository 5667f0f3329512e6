"""``contextwarden proxy``: options become a ProxyConfig; bad ones exit 2 with a message; the real
command serves on loopback (a subprocess); importing the package or the CLI stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from proxy_doubles import proxy_process
from typer.testing import CliRunner

from contextwarden.cli import app as main_app
from contextwarden.proxy import ProxyConfig, cli

Upstream = tuple[FakeUpstream, str]


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[ProxyConfig]:
    """Replace the server run with a recorder of the config it would have served."""
    seen: list[ProxyConfig] = []
    monkeypatch.setattr(cli, "serve", lambda settings, **_: seen.append(settings))
    monkeypatch.delenv("CONTEXTWARDEN_PROXY_TOKEN", raising=False)
    return seen


def _run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main_app, ["proxy", *args], env=env)


def test_options_become_the_config(served: list[ProxyConfig], tmp_path: Path) -> None:
    config = tmp_path / "cw.yaml"
    config.write_text("reserve_tokens: 4096\nmask:\n  keep_recent: 3\n")
    result = _run(
        "--upstream",
        "https://api.example.com/v1/",
        "--port",
        "9001",
        "--window",
        "32000",
        "--config",
        str(config),
        "--cache",
        "redis",
        "--redis-url",
        "redis://127.0.0.1:6379/2",
        "--timeout",
        "30",
    )
    assert result.exit_code == 0, result.output
    (settings,) = served
    assert settings.upstream == "https://api.example.com/v1"
    assert (settings.host, settings.port, settings.window) == ("127.0.0.1", 9001, 32000)
    assert settings.warden.reserve_tokens == 4096 and settings.warden.mask.keep_recent == 3
    assert (settings.cache, settings.redis_url, settings.timeout) == (
        "redis",
        "redis://127.0.0.1:6379/2",
        30,
    )
    assert settings.token is None


def test_token_from_the_environment(served: list[ProxyConfig]) -> None:
    result = _run("--upstream", "http://localhost:1", env={"CONTEXTWARDEN_PROXY_TOKEN": "from-env"})
    assert result.exit_code == 0, result.output
    assert served[0].token == "from-env"
    assert "from-env" not in result.output  # never echoed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--upstream", "api.openai.com"], "http(s) URL"),
        (["--upstream", "http://x", "--cache", "redis"], "redis_url"),
        (["--upstream", "http://x", "--port", "70000"], "port"),
        (["--upstream", "http://x", "--cache", "postgres"], "postgres"),
        (["--port", "1"], "upstream"),
    ],
)
def test_bad_options_exit_2_naming_the_problem(
    served: list[ProxyConfig], args: list[str], message: str
) -> None:
    result = _run(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert served == []


def test_bad_config_file_exits_2(served: list[ProxyConfig], tmp_path: Path) -> None:
    config = tmp_path / "cw.yaml"
    config.write_text("mask:\n  keep_recnt: 3\n")
    result = _run("--upstream", "http://x", "--config", str(config))
    assert result.exit_code == 2 and "keep_recnt" in result.output
    assert served == []


@pytest.mark.parametrize("workers", [1, 2])
def test_the_real_command_serves_and_logs_json(
    upstream: Upstream, tmp_path: Path, workers: int
) -> None:
    fake, url = upstream
    args = ["--window", "8000", "--workers", str(workers)]
    token = {"CONTEXTWARDEN_PROXY_TOKEN": "t0k"}
    with proxy_process(url, *args, data_dir=tmp_path, env=token) as running:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
        r = httpx.post(
            f"{running.base}/v1/chat/completions",
            json=body,
            headers={"X-Contextwarden-Token": "t0k", "Authorization": "Bearer sk-cli"},
        )
        assert r.status_code == 200 and r.headers["x-contextwarden-tokens-before"]
        assert fake.last.json == body and fake.last.headers["authorization"] == "Bearer sk-cli"
        assert httpx.get(f"{running.base}/stats").status_code == 401
    err = running.stderr
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    # one line per proxied request (/stats is the proxy's own page, not logged)
    assert [(x["path"], x["status"], x["model"]) for x in lines] == [
        ("/v1/chat/completions", 200, "gpt-4o")
    ]
    assert "sk-cli" not in err and "t0k" not in err
    assert (tmp_path / "summary-cache.sqlite3").is_file()  # the default cache, in the data dir


def test_importing_stays_light() -> None:
    code = (
        "import sys, contextwarden, contextwarden.proxy, contextwarden.proxy.cli, contextwarden.cli\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'starlette', 'uvicorn', 'redis', 'openai', 'anthropic'})\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_summarizer_options(served: list[ProxyConfig], tmp_path: Path) -> None:
    up = ["--upstream", "http://127.0.0.1:9"]
    assert _run(*up).exit_code == 0
    assert served[-1].summary_source == "upstream"  # the default: the upstream, caller's key
    assert _run(*up, "--summarizer", "extractive").exit_code == 0
    assert served[-1].summary_source == "extractive"
    assert _run(*up, "--summary-model", "gpt-4o-mini").exit_code == 0
    assert (served[-1].summary_source, served[-1].summary_model) == ("upstream", "gpt-4o-mini")
    assert _run(*up, "--summarizer", "anthropic:claude-haiku-4-5").exit_code == 0
    assert served[-1].summary_source == "anthropic:claude-haiku-4-5"
    config = tmp_path / "cw.yaml"
    config.write_text("summarizer: {provider: openai, model: small, api_key_env: MY_KEY}\n")
    assert _run(*up, "--config", str(config)).exit_code == 0
    assert served[-1].summary_source == "config"  # the file names a provider: it is used
    config.write_text("summarizer: {timeout_s: 5}\n")
    assert _run(*up, "--config", str(config)).exit_code == 0
    assert served[-1].summary_source == "upstream"  # its deadline alone does not
    bad = _run(*up, "--summarizer", "cohere:command")
    assert bad.exit_code == 2 and "unknown provider 'cohere'" in bad.output
    assert len(served) == 6
