""".ci/install-browser.sh, which installs the browser tests' Chromium, honours QKV_SKIP_BROWSER=1."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "install-browser.sh"


def _run(tmp_path, **env):
    """The script with apt-get, sudo and fc-list replaced by stubs that log their calls."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls"
    for name in ("apt-get", "sudo", "fc-list"):
        (bin_ / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n')
        (bin_ / name).chmod(0o755)
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                       env={"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path), **env})
    return r, (log.read_text() if log.exists() else "")


def test_skip_browser_installs_nothing(tmp_path):
    r, calls = _run(tmp_path, QKV_SKIP_BROWSER="1")
    assert r.returncode == 0, r.stderr
    assert "QKV_SKIP_BROWSER=1" in r.stdout
    assert "apt-get" not in calls and "fc-list" not in calls


def test_without_the_setting_a_missing_font_is_installed(tmp_path):
    r, calls = _run(tmp_path)  # the stub fc-list lists no CJK font
    if os.geteuid() != 0:
        assert "sudo" in calls
    assert "apt-get update" in calls and "fonts-wqy-zenhei" in calls
