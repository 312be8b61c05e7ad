"""The local Ray cluster deltamup starts is bound to 127.0.0.1 with token auth, whatever the environment says
(RAY_AUTH_MODE=disabled, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1, RAY_ADDRESS elsewhere), and prints no token-auth
warning. One real local cluster, in a subprocess with its own HOME (Ray keeps its token in ~/.ray/auth_token)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import os
from pathlib import Path

from deltamup.sweeps import runner


def descendants(root: int) -> set[int]:
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parent[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            pass
    found, todo = {root}, [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in found]
        found.update(kids)
        todo += kids
    return found


def listening(pids: set[int]) -> set[tuple[str, int]]:
    inodes = {}
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A":
                addr, port = parts[1].split(":")
                ip = ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)) if name == "tcp" else addr
                inodes[parts[9]] = (ip, int(port, 16))
    found = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    found.add(inodes[link[8:-1]])
        except OSError:
            pass
    return found



runner.configure_ray_env(local=True)
with runner.ray_session(None, 1):
    import ray
    from ray._raylet import AuthenticationMode, get_authentication_mode

    assert ray.get(ray.remote(lambda: 41).remote()) + 1 == 42  # a worker authenticates and runs
    print("token", get_authentication_mode() == AuthenticationMode.TOKEN)
    print("node", ray.util.get_node_ip_address())
    print("listen", " ".join(sorted(ip for ip, _ in listening(descendants(os.getpid())))))
"""
LOOPBACK = {"127.0.0.1", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}  # v4, v4-in-v6, ::1


def test_the_local_cluster_is_loopback_only_with_token_auth_whatever_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "RAY_AUTH_MODE": "disabled", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
           "RAY_ADDRESS": "10.255.255.1:6379", "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("RAY_AUTH_TOKEN", None), env.pop("RAY_AUTH_TOKEN_PATH", None)
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["token"] == "True" and lines["node"] == "127.0.0.1"
    assert lines["listen"] and set(lines["listen"].split()) <= LOOPBACK, lines["listen"]
    assert "Token authentication" not in done.stderr + done.stdout  # Ray's warning when the mode is left unset
    token = tmp_path / ".ray" / "auth_token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and len(token.read_text()) == 64
