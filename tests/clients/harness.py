"""Drivers: run a real client against the scripted upstream, directly or through the proxy.

Each driver prepares a working directory (large data files for the agent to read), a private
HOME / config directory and the client's environment, runs the client at its pinned version
and returns a :class:`Run`: its exit status and output, every request the upstream received,
and (through the proxy) the proxy's JSON log lines and ``/stats``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .checks import count_breakpoints, problems
from .upstream import FINAL_MARK, SUMMARY_SYSTEM_MARK, Recorded, Upstream

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CLIENTS_DIR = Path(
    os.environ.get("CW_CLIENTS_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "contextwarden"
    / "clients"
)
NPM_BIN = CLIENTS_DIR / "npm" / "node_modules" / ".bin"
VENVS = CLIENTS_DIR / "venvs"
TASK = "cw-task: go through the data files one by one, note what each holds, then report."


def pinned() -> dict[str, str]:
    """The pinned versions (versions.env)."""
    out = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def installed_npm(package: str) -> str | None:
    pj = CLIENTS_DIR / "npm" / "node_modules" / package / "package.json"
    try:
        return str(json.loads(pj.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def installed_pip(venv: str, dist: str) -> str | None:
    py = VENVS / venv / "bin" / "python"
    if not py.exists():
        return None
    r = subprocess.run(
        [str(py), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
    )
    return r.stdout.strip() or None if r.returncode == 0 else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_workdir(big_files: int = 12, rows: int = 300) -> Path:
    """A fresh directory with ``data/big_NN.txt`` files of about 27 kB each."""
    work = Path(tempfile.mkdtemp(prefix="cw-client-"))
    (work / "data").mkdir()
    for i in range(big_files):
        lines = [
            f"row {k} of file {i}: " + " ".join(f"v{(k * 7 + j * i) % 997}" for j in range(12))
            for k in range(rows)
        ]
        (work / "data" / f"big_{i:02d}.txt").write_text("\n".join(lines) + "\n")
    return work


# -- the proxy -----------------------------------------------------------------------------------
@dataclass
class Proxy:
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def stats(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.base_url}/stats", timeout=10).json())


@contextlib.contextmanager
def proxy(upstream_url: str, window: int, *extra: str) -> Iterator[Proxy]:
    """``contextwarden proxy`` as a subprocess (this checkout's sources), ready to serve."""
    port = free_port()
    log_dir = Path(tempfile.mkdtemp(prefix="cw-proxy-"))
    log_path = log_dir / "proxy.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env["CONTEXTWARDEN_DATA_DIR"] = str(log_dir)
    cmd = [
        sys.executable,
        "-m",
        "contextwarden",
        "proxy",
        "--upstream",
        upstream_url,
        "--port",
        str(port),
        "--window",
        str(window),
        "--cache",
        "memory",
        *extra,
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=log_dir)
    p = Proxy(port, proc, log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the proxy exited: {log_path.read_text()[-2000:]}")
            try:
                httpx.get(f"{p.base_url}/stats", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the proxy did not start in 60 s") from None
                time.sleep(0.2)
        yield p
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(log_dir, ignore_errors=True)


# -- one run -------------------------------------------------------------------------------------
@dataclass
class Run:
    client: str
    mode: str  # "direct" | "proxy"
    returncode: int
    output: str
    seconds: float
    requests: list[Recorded]
    proxy_log: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    api: str = "anthropic"
    turns: int = 0  # a client driven turn by turn (aider): the turns it must get through
    #: the compaction blocks / items the upstream handed out (the provider's own compaction)
    compactions: list[dict[str, Any]] = field(default_factory=list)

    # figures --------------------------------------------------------------------------------
    @property
    def main(self) -> list[Recorded]:
        return [r for r in self.requests if r.kind == "main"]

    @property
    def summaries(self) -> list[Recorded]:
        return [r for r in self.requests if r.kind == "summary"]

    @property
    def chat(self) -> list[Recorded]:
        """The conversation requests (main and the client's side calls), not summary calls."""
        return [r for r in self.requests if r.kind != "summary" and r.api != "count_tokens"]

    def tokens(self, recs: list[Recorded]) -> int:
        return sum(
            r.usage.get("input_tokens", 0)
            + r.usage.get("cache_creation_input_tokens", 0)
            + r.usage.get("cache_read_input_tokens", 0)
            for r in recs
        )

    def billed(self, recs: list[Recorded]) -> float:
        """Input billed at cache prices: a cache read 0.1x, a cache write 1.25x (Anthropic);
        OpenAI's cached prefix at 0.1x (the gpt-5 family)."""
        total = 0.0
        for r in recs:
            u = r.usage
            if "cached_tokens" in u:
                total += u["input_tokens"] - u["cached_tokens"] + 0.1 * u["cached_tokens"]
            else:
                total += (
                    u.get("input_tokens", 0)
                    + 1.25 * u.get("cache_creation_input_tokens", 0)
                    + 0.1 * u.get("cache_read_input_tokens", 0)
                )
        return total

    @property
    def invalid(self) -> list[tuple[int, list[str]]]:
        out = []
        for i, r in enumerate(self.requests):
            if r.api in ("anthropic", "openai", "responses", "gemini"):
                p = problems(r.api, r.body)
                if p:
                    out.append((i, p))
        return out

    @property
    def skipped(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for rec in self.proxy_log:
            if rec.get("skipped") and rec.get("route") != "passthrough":
                reason = str(rec["skipped"]).split(":")[0]
                out[reason] = out.get(reason, 0) + 1
        return out

    @property
    def transformed_share(self) -> float:
        chat = [r for r in self.proxy_log if r.get("route") not in (None, "passthrough")]
        if not chat:
            return 0.0
        return sum(1 for r in chat if not r.get("skipped")) / len(chat)

    @property
    def proxy_compactions(self) -> int:
        """Compactions the proxy made."""
        return sum(1 for r in self.proxy_log if int(r.get("compacted") or 0) > 0)

    @property
    def finished(self) -> bool:
        """Exit 0 with the final answer; a client driven turn by turn must also have been
        answered for its last turn (the upstream answers the turn it reads in the request)."""
        reached = max((r.step for r in self.main), default=0)
        return self.returncode == 0 and FINAL_MARK in self.output and reached >= self.turns

    def missing_task(self) -> list[int]:
        """Main requests whose text does not hold the task."""
        return [
            i
            for i, r in enumerate(self.requests)
            if r.kind == "main" and TASK not in json.dumps(r.body, ensure_ascii=False)
        ]

    def summary_tasks(self) -> list[str]:
        """What each summary call was given as the task."""
        import re

        out = []
        for r in self.summaries:
            blob = json.dumps(r.body, ensure_ascii=False)
            m = re.search(r"<task>\\n(.*?)\\n</task>", blob)
            out.append(m.group(1)[:120] if m else "")
        return out

    def breakpoints(self) -> list[int]:
        return [count_breakpoints(r.body) for r in self.main if r.api == "anthropic"]

    def newest_marked(self) -> list[bool]:
        """Per Anthropic main request: does its newest message carry a breakpoint?"""
        out = []
        for r in self.main:
            if r.api != "anthropic":
                continue
            msgs = r.body.get("messages") or []
            out.append(bool(msgs) and count_breakpoints({"messages": msgs[-1:]}) > 0)
        return out

    def proxy_ms(self) -> dict[str, float]:
        """The proxy's own time: its first chat request's latency (upstream time included) and
        the median time it spent transforming a request."""
        chat = [r for r in self.proxy_log if r.get("route") not in (None, "passthrough")]
        if not chat:
            return {}
        ms = sorted(float(r.get("transform_ms") or 0) for r in chat)
        return {
            "first_latency": float(chat[0].get("latency_ms") or 0),
            "first_transform": float(chat[0].get("transform_ms") or 0),
            "transform_p50": ms[len(ms) // 2],
        }

    def figures(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "mode": self.mode,
            "rc": self.returncode,
            "finished": self.finished,
            "seconds": round(self.seconds, 1),
            "requests": len(self.chat),
            "steps": max((r.step for r in self.main), default=0),
            "tokens": self.tokens(self.chat),
            "summary_calls": len(self.summaries),
            "summary_tokens": self.tokens(self.summaries),
            "billed": round(self.billed(self.chat + self.summaries)),
            "invalid": len(self.invalid),
            "compactions": self.proxy_compactions,
            "provider_compactions": len(self.compactions),
            "skipped": self.skipped,
            "transformed": round(self.transformed_share, 3),
            "missing_task": len(self.missing_task()),
            "proxy_ms": self.proxy_ms(),
            "stats": {
                k: self.stats[k]
                for k in (
                    "requests",
                    "transformed",
                    "skipped",
                    "compactions",
                    "llm_summaries",
                    "recall_offered",
                    "recall_calls",
                )
                if k in self.stats
            },
        }


def _collect(
    client: str,
    api: str,
    up: Upstream,
    window: int | None,
    launch: Callable[[str], tuple[int, str]],
    proxy_args: tuple[str, ...] = (),
) -> Run:
    """Run ``launch(base_url)`` directly (``window`` None) or through a proxy."""
    up.reset()
    t0 = time.monotonic()
    if window is None:
        rc, output = launch(up.base_url)
        run = Run(client, "direct", rc, output, time.monotonic() - t0, list(up.requests), api=api)
    else:
        with proxy(up.base_url, window, *proxy_args) as p:
            rc, output = launch(p.base_url)
            stats = p.stats()
            log = p.log()
        run = Run(
            client, "proxy", rc, output, time.monotonic() - t0, list(up.requests), log, stats, api
        )
    run.compactions = list(up.compactions)
    return run


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> tuple[int, str]:
    env = dict(env, PWD=str(cwd))  # some clients (opencode) take their directory from $PWD
    try:
        p = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        return -1, f"timeout after {timeout}s: {exc.stdout!r} {exc.stderr!r}"
    return p.returncode, p.stdout + "\n--- stderr ---\n" + p.stderr


def _base_env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE"))
    }
    env["HOME"] = str(home)
    env["PATH"] = f"{NPM_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


# -- Claude Code ---------------------------------------------------------------------------------
def claude_code(steps: int, window: int | None, model: str | None = None) -> Run:
    work = make_workdir()
    home = Path(tempfile.mkdtemp(prefix="cw-claude-home-"))
    with Upstream(steps=steps, workdir=str(work), text_format="tools") as up:

        def launch(base_url: str) -> tuple[int, str]:
            env = _base_env(home)
            env.update(
                ANTHROPIC_BASE_URL=base_url,
                ANTHROPIC_API_KEY="sk-ant-cw-fake",
                DISABLE_TELEMETRY="1",
                DISABLE_AUTOUPDATER="1",
                DISABLE_ERROR_REPORTING="1",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                IS_SANDBOX="1",  # root may use --dangerously-skip-permissions in a sandbox
            )
            cmd = [str(NPM_BIN / "claude"), "-p", TASK, "--dangerously-skip-permissions"]
            if model:
                cmd += ["--model", model]
            return _run(cmd, work, env)

        name = f"claude-code{' ' + model if model else ''}"
        if window is not None and window != 128_000:  # the suite's other window, named
            name += f" {window // 1000}k"
        run = _collect(name, "anthropic", up, window, launch)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return run


# -- Codex CLI -----------------------------------------------------------------------------------
def codex(
    steps: int, window: int | None, model: str = "gpt-5-codex", remote_compact: int = 0
) -> Run:
    """Codex CLI ``exec`` on the Responses API. ``remote_compact`` > 0: Codex compacts its
    history through the provider (``compaction_trigger``) past that many tokens, as it does
    with OpenAI itself (its provider named ``OpenAI``)."""
    work = make_workdir()
    home = Path(tempfile.mkdtemp(prefix="cw-codex-home-"))
    with Upstream(steps=steps, workdir=str(work), text_format="tools") as up:

        def launch(base_url: str) -> tuple[int, str]:
            limit = f"model_auto_compact_token_limit = {remote_compact}\n" if remote_compact else ""
            features = "\n[features]\nremote_compaction_v2 = true\n" if remote_compact else ""
            name = "OpenAI" if remote_compact else "cw"
            (home / "config.toml").write_text(
                f'model = "{model}"\nmodel_provider = "cw"\napproval_policy = "never"\n'
                f'sandbox_mode = "danger-full-access"\n{limit}\n[model_providers.cw]\n'
                f'name = "{name}"\nbase_url = "{base_url}/v1"\nenv_key = "CW_FAKE_OPENAI_KEY"\n'
                f'wire_api = "responses"\n{features}'
            )
            env = _base_env(home)
            env.update(CODEX_HOME=str(home), CW_FAKE_OPENAI_KEY="sk-cw-fake")
            cmd = [str(NPM_BIN / "codex"), "exec", "--skip-git-repo-check", TASK]
            return _run(cmd, work, env)

        name = f"codex remote-compact {remote_compact}" if remote_compact else "codex"
        run = _collect(name, "responses", up, window, launch)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return run


# -- qwen-code -----------------------------------------------------------------------------------
def qwen_code(steps: int, window: int | None, model: str = "qwen3-coder-plus") -> Run:
    """qwen-code in headless mode (its positional prompt) on the OpenAI chat API."""
    work = make_workdir()
    home = Path(tempfile.mkdtemp(prefix="cw-qwen-home-"))
    with Upstream(steps=steps, workdir=str(work), text_format="tools") as up:

        def launch(base_url: str) -> tuple[int, str]:
            env = _base_env(home)
            env.update(QWEN_CODE_NO_RELAUNCH="1", NO_BROWSER="1", CI="1")
            cmd = [str(NPM_BIN / "qwen"), TASK, "--yolo", "--auth-type", "openai"]
            cmd += ["--openai-base-url", f"{base_url}/v1", "--openai-api-key", "sk-cw-fake"]
            cmd += ["--model", model, "--chat-recording", "false"]
            return _run(cmd, work, env)

        run = _collect("qwen-code", "openai", up, window, launch)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return run


# -- opencode ------------------------------------------------------------------------------------
def opencode(steps: int, window: int | None, provider: str = "anthropic") -> Run:
    """opencode's ``run`` (headless) with its built-in provider pointed at the upstream:
    ``anthropic`` (Messages) or ``openai`` (Responses)."""
    work = make_workdir()
    home = Path(tempfile.mkdtemp(prefix="cw-opencode-home-"))
    model = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5-codex"}[provider]
    api = {"anthropic": "anthropic", "openai": "responses"}[provider]
    with Upstream(steps=steps, workdir=str(work), text_format="tools") as up:

        def launch(base_url: str) -> tuple[int, str]:
            config = {
                "$schema": "https://opencode.ai/config.json",
                "autoupdate": False,
                "share": "disabled",
                "permission": {"bash": "allow", "edit": "allow", "read": "allow"},
                "model": f"{provider}/{model}",
                "provider": {
                    provider: {"options": {"baseURL": f"{base_url}/v1", "apiKey": "sk-cw-fake"}}
                },
            }
            env = _base_env(home)
            env.update(
                OPENCODE_CONFIG_CONTENT=json.dumps(config),
                OPENCODE_DISABLE_AUTOUPDATE="1",
                OPENCODE_DISABLE_LSP_DOWNLOAD="1",
                OPENCODE_DISABLE_MODELS_FETCH="1",
                XDG_CONFIG_HOME=str(home / ".config"),
                XDG_DATA_HOME=str(home / ".local" / "share"),
                XDG_CACHE_HOME=str(home / ".cache"),
            )
            return _run([str(NPM_BIN / "opencode"), "run", TASK], work, env)

        run = _collect(f"opencode {provider}", api, up, window, launch)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return run


# -- Gemini CLI ----------------------------------------------------------------------------------
def gemini_cli(steps: int, window: int | None, model: str = "gemini-3-pro-preview") -> Run:
    """Gemini CLI headless (``-p``) on the Gemini API (``GOOGLE_GEMINI_BASE_URL``)."""
    work = make_workdir()
    home = Path(tempfile.mkdtemp(prefix="cw-gemini-home-"))
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "telemetry": {"enabled": False},
                "privacy": {"usageStatisticsEnabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            }
        )
    )
    with Upstream(steps=steps, workdir=str(work), text_format="tools") as up:

        def launch(base_url: str) -> tuple[int, str]:
            env = _base_env(home)
            env = {k: v for k, v in env.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
            env.update(
                GEMINI_API_KEY="cw-fake-gemini-key",
                GOOGLE_GEMINI_BASE_URL=base_url,
                GEMINI_CLI_NO_RELAUNCH="true",
                GEMINI_CLI_TRUST_WORKSPACE="true",
                CI="1",
            )
            cmd = [str(NPM_BIN / "gemini"), "-p", TASK, "--yolo", "-m", model]
            return _run(cmd, work, env)

        name = "gemini-cli" if window is None else f"gemini-cli {window // 1000}k"
        run = _collect(name, "gemini", up, window, launch)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return run


# -- mini-swe-agent ------------------------------------------------------------------------------
MINI_SCRIPT = """
import os, sys, yaml
from pathlib import Path
from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

base, task, cwd, text = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "text"
# text: the text-based config (a fenced command, its output back as a user message)
name = "mini_textbased.yaml" if text else "mini.yaml"
config = yaml.safe_load(Path(package_dir / "config" / name).read_text())
model = (LitellmTextbasedModel if text else LitellmModel)(
    model_name="openai/gpt-5-mini",
    model_kwargs={"api_base": base + "/v1", "api_key": "sk-cw-fake", "drop_params": True},
    cost_tracking="ignore_errors",
)
agent_cfg = dict(config["agent"])
agent_cfg["step_limit"] = 0
agent_cfg["cost_limit"] = 0
agent_cfg.pop("mode", None)  # the interactive agent's
agent = DefaultAgent(model, LocalEnvironment(cwd=cwd), **agent_cfg)
result = agent.run(task)
print("MINI-RESULT", result)
"""


def mini_swe_agent(steps: int, window: int | None, *, text: bool = False) -> Run:
    """mini-swe-agent's tool-calling config, or (``text``) its text-based one."""
    work = make_workdir()
    home = Path(tempfile.mkdtemp(prefix="cw-mini-home-"))
    script = home / "drive_mini.py"
    script.write_text(MINI_SCRIPT)
    with Upstream(steps=steps, workdir=str(work), text_format="mini") as up:

        def launch(base_url: str) -> tuple[int, str]:
            env = _base_env(home)
            env.update(
                MSWEA_COST_TRACKING="ignore_errors",
                MSWEA_CONFIGURED="true",
                MSWEA_GLOBAL_CONFIG_DIR=str(home / "mini"),
                LITELLM_LOCAL_MODEL_COST_MAP="True",
            )
            py = str(VENVS / "mini" / "bin" / "python")
            protocol = "text" if text else "tools"
            return _run([py, str(script), base_url, TASK, str(work), protocol], work, env)

        name = "mini-swe-agent text" if text else "mini-swe-agent"
        run = _collect(name, "openai", up, window, launch)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return run


# -- aider ---------------------------------------------------------------------------------------
AIDER_SCRIPT = """
import sys
from aider.coders import Coder
from aider.io import InputOutput
from aider.models import Model

base, task, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
import os
os.environ["OPENAI_API_BASE"] = base + "/v1"
os.environ["OPENAI_API_KEY"] = "sk-cw-fake"
io = InputOutput(yes=True, pretty=False, fancy_input=False)
model = Model("openai/gpt-4o-mini")
files = ["notes_0.txt", "data/big_00.txt", "data/big_01.txt", "data/big_02.txt"]
coder = Coder.create(main_model=model, io=io, fnames=files, auto_commits=False,
                     stream=True, use_git=False, suggest_shell_commands=False, detect_urls=False)
for turn in range(turns):
    msg = task if turn == 0 else f"Turn {turn}: carry on with the next notes file."
    coder.run(with_message=msg)
print("AIDER-DONE", "CW-FINAL-ANSWER" if turns else "")
"""


def aider(turns: int, window: int | None) -> Run:
    work = make_workdir(big_files=3)
    (work / "notes_0.txt").write_text("# notes\n")
    home = Path(tempfile.mkdtemp(prefix="cw-aider-home-"))
    script = home / "drive_aider.py"
    script.write_text(AIDER_SCRIPT)
    with Upstream(steps=10_000, workdir=str(work), text_format="aider") as up:

        def launch(base_url: str) -> tuple[int, str]:
            env = _base_env(home)
            env.update(
                AIDER_ANALYTICS="false",
                AIDER_CHECK_UPDATE="false",
                AIDER_SHOW_RELEASE_NOTES="false",
            )
            py = str(VENVS / "aider" / "bin" / "python")
            return _run([py, str(script), base_url, TASK, str(turns)], work, env)

        run = _collect("aider", "openai", up, window, launch)
        run.turns = turns
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return run


# -- the SDK loops ---------------------------------------------------------------------------------
_SHELL_SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "string", "description": "A shell command to run."}},
    "required": ["command"],
}


def _shell(command: str, cwd: Path) -> str:
    p = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=60)
    return (p.stdout + p.stderr) or "(no output)"


def openai_sdk(steps: int, window: int | None) -> Run:
    """A chat-completions agent loop on the openai SDK: streaming, tool calls, usage."""
    import openai

    work = make_workdir()
    with Upstream(steps=steps, workdir=str(work), text_format="tools") as up:

        def launch(base_url: str) -> tuple[int, str]:
            client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-cw-fake", max_retries=0)
            tools = [{"type": "function", "function": {"name": "run", "parameters": _SHELL_SCHEMA}}]
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": "You are a careful shell agent."},
                {"role": "user", "content": TASK},
            ]
            for _ in range(steps + 5):
                stream = client.chat.completions.create(
                    model="gpt-4o",
                    messages=messages,  # type: ignore[arg-type]
                    tools=tools,  # type: ignore[arg-type]
                    stream=True,
                    stream_options={"include_usage": True},
                )
                text, calls = "", {}
                for chunk in stream:
                    if not chunk.choices:
                        continue
                    delta = chunk.choices[0].delta
                    text += delta.content or ""
                    for c in delta.tool_calls or []:
                        slot = calls.setdefault(c.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = c.id or slot["id"]
                        if c.function:
                            slot["name"] += c.function.name or ""
                            slot["arguments"] += c.function.arguments or ""
                msg: dict[str, Any] = {"role": "assistant", "content": text or None}
                if calls:
                    msg["tool_calls"] = [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in calls.values()
                    ]
                messages.append(msg)
                if not calls:
                    return 0, text
                for c in calls.values():
                    cmd = json.loads(c["arguments"])["command"]
                    messages.append(
                        {"role": "tool", "tool_call_id": c["id"], "content": _shell(cmd, work)}
                    )
            return 1, "no final answer"

        run = _collect("openai-sdk", "openai", up, window, launch)
    shutil.rmtree(work, ignore_errors=True)
    return run


def anthropic_sdk(steps: int, window: int | None, moving_breakpoint: bool = True) -> Run:
    """A Messages agent loop on the anthropic SDK: streaming, thinking, tool use, and a prompt
    cache breakpoint on the system prompt and (``moving_breakpoint``) on the newest message,
    moved every call as Anthropic recommends."""
    import anthropic

    work = make_workdir()
    with Upstream(steps=steps, workdir=str(work), text_format="tools") as up:

        def launch(base_url: str) -> tuple[int, str]:
            client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-cw-fake", max_retries=0)
            system = [
                {
                    "type": "text",
                    "text": "You are a careful shell agent.",
                    "cache_control": {"type": "ephemeral"},
                }
            ]
            tools = [
                {"name": "bash", "description": "Run a command", "input_schema": _SHELL_SCHEMA}
            ]
            history: list[dict[str, Any]] = [
                {"role": "user", "content": [{"type": "text", "text": TASK}]}
            ]
            for _ in range(steps + 5):
                sent = json.loads(json.dumps(history))
                if moving_breakpoint:
                    sent[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
                with client.messages.stream(
                    model="claude-opus-4-7",
                    max_tokens=4096,
                    system=system,  # type: ignore[arg-type]
                    tools=tools,  # type: ignore[arg-type]
                    messages=sent,  # type: ignore[arg-type]
                    thinking={"type": "enabled", "budget_tokens": 1024},
                ) as stream:
                    final = stream.get_final_message()
                content = [b.model_dump(exclude_none=True) for b in final.content]
                for b in content:
                    b.pop("citations", None)
                    b.pop("caller", None)
                history.append({"role": "assistant", "content": content})
                uses = [b for b in content if b["type"] == "tool_use"]
                if not uses:
                    return 0, "".join(b.get("text", "") for b in content)
                history.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": b["id"],
                                "content": _shell(b["input"]["command"], work),
                            }
                            for b in uses
                        ],
                    }
                )
            return 1, "no final answer"

        name = "anthropic-sdk" if moving_breakpoint else "anthropic-sdk (fixed breakpoint)"
        run = _collect(name, "anthropic", up, window, launch)
    shutil.rmtree(work, ignore_errors=True)
    return run


__all__ = [
    "SUMMARY_SYSTEM_MARK",
    "TASK",
    "Run",
    "aider",
    "claude_code",
    "codex",
    "installed_npm",
    "installed_pip",
    "mini_swe_agent",
    "pinned",
    "proxy",
]


def report_table(runs: list[Run]) -> str:
    """A markdown table of the runs' figures, direct and proxied side by side."""
    head = (
        "| client | mode | finished | requests | tokens in | billed in (cache prices) | "
        "summary calls (tokens) | compactions (provider's) | invalid | skipped | task missing | "
        "time s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in sorted(runs, key=lambda r: (r.client, r.mode)):
        f = r.figures()
        skipped = ", ".join(f"{k}: {v}" for k, v in f["skipped"].items()) or "0"
        rows.append(
            f"| {f['client']} | {f['mode']} | {'yes' if f['finished'] else 'NO'} | "
            f"{f['requests']} | {f['tokens']:,} | {f['billed']:,} | "
            f"{f['summary_calls']} ({f['summary_tokens']:,}) | {f['compactions']} "
            f"({f['provider_compactions']}) | "
            f"{f['invalid']} | {skipped} | {f['missing_task']} | {f['seconds']} |"
        )
    return head + "\n".join(rows) + "\n"
