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


def test_elided_spans_are_kept_per_session(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.db") as store:
        store.put_elided("a", "cw:same", [user("a's original")])
        store.put_elided("b", "cw:same", [user("b's original")])
        assert store.get_elided("cw:same", "a") == [user("a's original")]
        assert store.get_elided("cw:same", "b") == [user("b's original")]
        assert store.get_elided("cw:same", "c") is None


def test_a_store_on_a_read_only_mount_can_be_read(tmp_path: Path) -> None:
    """The store's folder bind-mounted read-only (a private mount namespace: needs unshare)."""
    import shutil
    import subprocess
    import sys

    folder = tmp_path / "ro"
    folder.mkdir()
    with SessionStore(folder / "s.db") as store:
        sid = store.create_session("run")
        store.append(sid, [user("kept")])
        store.put_elided(sid, "cw:x", [user("elided")])
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("unshare/mount not available to make a read-only mount")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.strip()}")
    script = (
        "import sys\n"
        "from contextwarden.store.sqlite import SessionStore\n"
        "from contextwarden import StoreError\n"
        "from contextwarden._messages import user\n"
        f"s = SessionStore({str(folder / 's.db')!r})\n"
        "assert s.read_only\n"
        "print([m.text for m in s.messages('run')], [m.text for m in s.get_elided('cw:x', 'run')])\n"
        "try:\n"
        "    s.append('run', [user('more')])\n"
        "except StoreError as exc:\n"
        "    print('refused:', 'read-only' in str(exc))\n"
    )
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    run = subprocess.run(
        ["unshare", "-m", "sh", "-c", f'{mount} && exec "$0" -c "$1"', sys.executable, script],
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["['kept'] ['elided']", "refused: True"]
