"""Start and stop a private JupyterLab server for the browser tests.

The server runs from this virtualenv on a free loopback port with a random
token, in a throw-away copy of a notebooks folder, with every Jupyter and
IPython directory made private so that nothing from the developer's own
configuration (or an earlier run) leaks in. The venv's ``share/jupyter`` stays
on the data path because ipywidgets' labextension lives there.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["JupyterLab", "free_port", "server_env", "start_lab"]

REPO = Path(__file__).resolve().parent.parent

# Settings that keep JupyterLab quiet and deterministic in a test browser:
# no news or update toasts over the notebook, and every cell kept in the DOM
# (the default windowing mode leaves off-screen cells unrendered).
_LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
    },
}


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class JupyterLab:
    """A running JupyterLab server; ``stop()`` ends it (idempotent)."""

    process: subprocess.Popen
    port: int
    token: str
    root_dir: Path
    log_path: Path
    _log_file: object = field(repr=False, default=None)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str, **query: str) -> str:
        """Return ``base_url + path`` with the token (and ``query``) appended."""
        params = "&".join([f"token={self.token}", *(f"{k}={v}" for k, v in query.items())])
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{sep}{params}"

    def api(self, method: str, path: str, timeout: float = 10) -> object:
        """Call the server's REST API; return the decoded JSON (or None)."""
        request = urllib.request.Request(
            self.base_url + path,
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Delete every session and kernel, so memory stays low between notebooks."""
        for session in self.api("GET", "/api/sessions") or []:
            with contextlib.suppress(urllib.error.HTTPError):
                self.api("DELETE", f"/api/sessions/{session['id']}")
        for kernel in self.api("GET", "/api/kernels") or []:
            with contextlib.suppress(urllib.error.HTTPError):
                self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def wait_until_ready(self, timeout_s: float = 90) -> None:
        """Wait until the server answers ``/api/status``; stop it and raise if it never does.

        Raises:
            RuntimeError: the server exited, or did not answer within ``timeout_s``.
        """
        proc = self.process
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"JupyterLab exited with code {proc.returncode} before answering; "
                        f"log:\n{self.log_tail()}"
                    )
                try:
                    status = self.api("GET", f"/api/status?token={self.token}", timeout=2)
                    if isinstance(status, dict) and "started" in status:
                        return
                except (OSError, ValueError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"JupyterLab did not answer /api/status within {timeout_s} s; "
                        f"log:\n{self.log_tail()}"
                    )
                time.sleep(0.25)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s), whatever state it is in."""
        proc = self.process
        if proc.poll() is None:
            # The server runs in its own process group: kernels go with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def server_env(home: Path) -> dict[str, str]:
    """The environment for a private server: every Jupyter and IPython directory under ``home``."""
    env = dict(os.environ)
    dirs = {
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_DATA_DIR": home / "data",
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": home / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / "lab-workspaces",
        "IPYTHONDIR": home / "ipython",
    }
    for name, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    for relative, settings in _LAB_SETTINGS.items():
        target = dirs["JUPYTERLAB_SETTINGS_DIR"] / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(settings))
    # Inline plots must show: a backend forced by the caller (Agg in CI) would hide them.
    env.pop("MPLBACKEND", None)
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_PREFER_ENV_PATH", None)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    # Kernels import the repo's `pipeline` even when it is not pip-installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_lab(notebooks: Path, workdir: Path, *, startup_timeout_s: float = 90) -> JupyterLab:
    """Copy ``notebooks`` into ``workdir`` and start JupyterLab on the copy.

    The copy keeps the repository's layout one level up (``data/`` and ``docs/``
    are linked beside it) so relative paths such as ``../data/x.csv`` and
    ``../docs/pipeline.svg`` still resolve.

    Raises:
        RuntimeError: the server exited or did not answer ``/api/status`` in time.
    """
    root_dir = workdir / "notebooks"
    shutil.copytree(
        notebooks, root_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    )
    for folder in ("data", "docs"):
        source = REPO / folder
        if source.is_dir() and not (workdir / folder).exists():
            (workdir / folder).symlink_to(source)

    port = free_port()
    token = secrets.token_hex(24)
    log_path = workdir / "jupyterlab.log"
    log_file = log_path.open("wb")
    cmd = [
        sys.executable, "-m", "jupyter", "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--port-retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.open_browser=False",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # window.jupyterapp lets the test read cell outputs from the notebook model.
        "--LabApp.expose_app_in_browser=True",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    proc = subprocess.Popen(
        cmd,
        cwd=root_dir,
        env=server_env(workdir / "home"),
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    lab = JupyterLab(proc, port, token, root_dir, log_path, log_file)
    lab.wait_until_ready(startup_timeout_s)
    return lab
