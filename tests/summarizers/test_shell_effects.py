"""What shell commands do to files, read from their text (summarizers/_shell.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden.analysis.shell import (
    analyze_command,
    command_key,
    patch_targets,
    python_writes,
)


@pytest.mark.parametrize(
    ("command", "written"),
    [
        ("cd /testbed && sed -i 's/a/b/' src/x.py", ["src/x.py"]),
        ("sed -i.bak -e 's/a/b/' -e 's/c/d/' a.py b.py", ["a.py", "b.py"]),
        (
            "sed -i '' 's/new Editor()/x/g' packages/tui/test/editor.test.ts",
            ["packages/tui/test/editor.test.ts"],
        ),
        ("sed --in-place 's/a/b/' conf.ini", ["conf.ini"]),
        ("cat > fix.py << 'EOF'\nprint('hi')\nEOF", ["fix.py"]),
        ("echo hello >> notes.txt", ["notes.txt"]),
        ("printf 'x' | tee out/a.txt", ["out/a.txt"]),
        ("cp src/a.py src/a.py.bak", ["src/a.py.bak"]),
        ("perl -pi -e 's/a/b/' lib.pl", ["lib.pl"]),
        ("touch new_module.py", ["new_module.py"]),
        ("python -c \"open('/t/z.py', 'w').write('x')\"", ["/t/z.py"]),
        (
            "python3 << 'EOF'\nfrom pathlib import Path\nPath('gen.txt').write_text('x')\nEOF",
            ["gen.txt"],
        ),
    ],
)
def test_writes_are_found(command: str, written: list[str]) -> None:
    effects = analyze_command(command)
    assert list(effects.writes) == written
    assert not effects.read_only


@pytest.mark.parametrize(
    "command",
    [
        "cat src/a.py",
        "sed -n '10,20p' src/a.py",
        "grep -rn 'def foo' src | head -20",
        "ls -la && pwd",
        "git diff --stat",
        "find . -name '*.py' 2>/dev/null | wc -l",
        "echo done",
    ],
)
def test_read_only_commands(command: str) -> None:
    effects = analyze_command(command)
    assert effects.read_only
    assert not effects.writes


def test_reads_and_redirect_target_are_told_apart() -> None:
    effects = analyze_command("cat a.py b.py > combined.py")
    assert effects.reads == ("a.py", "b.py")
    assert list(effects.writes) == ["combined.py"]


def test_stderr_plumbing_is_not_a_file() -> None:
    effects = analyze_command("python t.py 2>&1 > /dev/null")
    assert effects.writes == {}


def test_heredoc_body_is_kept_and_not_parsed_as_commands() -> None:
    command = "cat > run.sh << 'EOF'\nrm -rf build\nsed -i 's/a/b/' x.py\nEOF\nbash run.sh"
    effects = analyze_command(command)
    assert list(effects.writes) == ["run.sh"]  # the body's commands did not run
    assert effects.deletes == ()
    assert "rm -rf build" in effects.heredocs["run.sh"]
    assert effects.scripts == ("run.sh",)


def test_deletes_reverts_and_moves() -> None:
    assert analyze_command("rm -f a.py b.py").deletes == ("a.py", "b.py")
    assert analyze_command("git checkout -- src/x.py").reverts == ("src/x.py",)
    assert analyze_command("git restore src/y.py").reverts == ("src/y.py",)
    assert analyze_command("git checkout main").reverts == ()
    moved = analyze_command("mv old.py new.py")
    assert list(moved.writes) == ["new.py"] and moved.deletes == ("old.py",)


def test_patch_inputs_and_inline_patches() -> None:
    assert analyze_command("patch -p1 < fix.patch").patch_inputs == ("fix.patch",)
    inline = "patch -p1 << 'EOF'\n--- a/src/m.py\n+++ b/src/m.py\n@@ -1 +1 @@\n-a\n+b\nEOF"
    assert list(analyze_command(inline).writes) == ["src/m.py"]
    envelope = "*** Begin Patch\n*** Update File: lib/a.py\n@@\n-x\n+y\n*** Add File: lib/b.py\n"
    assert patch_targets(envelope) == ["lib/a.py", "lib/b.py"]


def test_python_writes_resolves_simple_variables() -> None:
    code = "path = 'src/app.py'\nwith open(path, 'w') as f:\n    f.write(data)\n"
    assert python_writes(code) == ["src/app.py"]
    # an unresolvable target: the files the script reads are assumed written back
    code = "import sys\nsrc = open('lib/x.py').read()\nopen(sys.argv[1], 'w').write(src)\n"
    assert python_writes(code) == ["lib/x.py"]
    assert python_writes("open('a.txt', 'r').read()") == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("cd /testbed && python t.py 2>&1 | tail -20", "python t.py"),
        ("python   t.py", "python t.py 2>/dev/null"),
        ("timeout 60 pytest -x tests/", "pytest -x tests/ || true"),
    ],
)
def test_command_key_identifies_reruns(a: str, b: str) -> None:
    assert command_key(a) == command_key(b)


def test_command_key_keeps_different_commands_apart() -> None:
    assert command_key("python a.py") != command_key("python b.py")
    assert command_key("cat > a.py << 'EOF'\nx\nEOF\npython a.py") != command_key(
        "cat > b.py << 'EOF'\nx\nEOF\npython b.py"
    )


@given(st.text(max_size=200))
def test_never_raises_on_arbitrary_text(text: str) -> None:
    effects = analyze_command(text)
    assert isinstance(effects.read_only, bool)
    assert isinstance(command_key(text), str)
