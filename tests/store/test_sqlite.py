from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from contextwarden import StoreError
from contextwarden._messages import ToolCallBlock, assistant, tool_result, user
from contextwarden.store.sqlite import MIGRATIONS, SessionStore, default_db_path


def test_default_path_follows_data_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path / "d"))
    assert default_db_path() == tmp_path / "d" / "sessions.sqlite3"
    store = SessionStore()
    assert store.path.exists()
    store.close()


def test_append_only_history_survives_reopen(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    history = [
        user("fix the bug", id="u1"),
        assistant("", tool_calls=[ToolCallBlock("c1", "bash", '{"command": "ls"}')]),
        tool_result("c1", "a.py\nb.py"),
    ]
    with SessionStore(db) as store:
        sid = store.create_session("s1")
        assert store.append(sid, history[:2]) == [0, 1]
        assert store.append(sid, history[2:]) == [2]
    with SessionStore(db) as again:
        assert again.messages("s1") == history
        assert again.count("s1") == 3
        assert again.migrations() == [name for name, _ in MIGRATIONS]
    mode = sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_elided_spans_are_kept_verbatim_and_first_write_wins(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.sqlite3") as store:
        sid = store.create_session()
        span = [user("héllo <Pin>keep</Pin>"), assistant("ok")]
        store.put_elided(sid, "cw:abc", span)
        store.put_elided(sid, "cw:abc", [user("other")])
        assert store.get_elided("cw:abc") == span
        assert store.get_elided("cw:missing") is None


def test_unopenable_path_raises_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot open session store"):
        SessionStore(blocker / "sub" / "s.sqlite3")
