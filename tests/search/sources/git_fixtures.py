"""A git remote made by the test with the git binary: a working tree and the bare repository it pushes to."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

_ENV = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com", "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": "/usr/bin:/bin"}


class GitRemote:
    """commit(files) makes the working tree exactly `files`, commits and pushes to the bare repository (`url`)."""

    def __init__(self, root: Path) -> None:
        self.work, self.bare = root / "work", root / "remote.git"
        self.work.mkdir(parents=True)
        self._git("init", "-q", "-b", "main", cwd=self.work)
        self._git("init", "-q", "--bare", "-b", "main", str(self.bare), cwd=root)
        self._git("remote", "add", "origin", str(self.bare), cwd=self.work)

    @staticmethod
    def _git(*args: str, cwd: Path) -> str:
        return subprocess.run(["git", *args], cwd=cwd, env=_ENV, check=True, capture_output=True,
                              text=True).stdout.strip()

    def commit(self, files: dict[str, str], message: str = "change") -> str:
        for child in self.work.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        for rel, text in files.items():
            path = self.work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self._git("add", "-A", cwd=self.work)
        self._git("commit", "-q", "--allow-empty", "-m", message, cwd=self.work)
        self._git("push", "-q", "origin", "main", cwd=self.work)
        return self._git("rev-parse", "HEAD", cwd=self.work)

    @property
    def url(self) -> str:
        return self.bare.as_uri()


@pytest.fixture
def git_remote(tmp_path) -> GitRemote:
    return GitRemote(tmp_path / "remote")
