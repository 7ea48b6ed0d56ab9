"""Install torch-fl the way a cluster node does, then check it (run by `nox -s install-<vendor>` in a container).

usage: python install_smoke.py --how http|file|find-links --index DIR --expect LABEL

  http        serve DIR with `python -m http.server` on this container's loopback and
              `pip install torch-fl --index-url http://127.0.0.1:<port>/simple/`
  file        `pip install torch-fl --index-url file://DIR/simple/` (a shared file system)
  find-links  `pip install --no-index --find-links DIR torch-fl` (air-gapped nodes)

pip sees only that source (no pip.conf, no cache), so torch must already be installed: the index holds torch-fl
alone, and pip has to pick the wheel whose torch pin the installed torch satisfies. Then, from /tmp: the installed
version must carry ``LABEL`` (pt<line><toolchain> of this torch), ``import torch_fl`` must route ``add.Tensor``
(the dispatch log names the route) and compute the right result, ``pip check`` must pass and
``python -m torch_fl info`` must run. Exit 0 and a last line ``install-smoke: OK ...`` when all holds.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

SMOKE = r"""
import torch, torch_fl
torch_fl.set_dispatch_log(True)
a, b = torch.arange(12.0).reshape(3, 4), torch.ones(3, 4)
out = (a.to("flagos") + b.to("flagos")).cpu()
torch_fl.set_dispatch_log(False)
assert torch.equal(out, a + b), (out, a + b)
print("route of add.Tensor:", torch_fl.route("add.Tensor").route)
"""


def pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(directory: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):  # up to 10 s for the server to listen
        try:
            urllib.request.urlopen(url + "/simple/", timeout=1).close()
            return proc, url
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"install-smoke: http.server on {url} did not come up")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--how", choices=["http", "file", "find-links"], required=True)
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--expect", required=True, help="the local version label pip must choose, e.g. pt213cpu")
    args = p.parse_args(argv)
    import torch

    candidates = sorted(w.name for w in args.index.glob("torch_fl-*.whl"))
    print(f"install-smoke: node torch {torch.__version__}; the index offers {', '.join(candidates)}", flush=True)
    server = None
    if args.how == "http":
        server, url = serve(args.index)
        source = ["--index-url", f"{url}/simple/"]
    elif args.how == "file":
        source = ["--index-url", (args.index / "simple").as_uri() + "/"]
    else:
        source = ["--no-index", "--find-links", str(args.index)]
    cmd = [sys.executable, "-m", "pip", "install", *source, "torch-fl"]
    print("install-smoke: " + " ".join(cmd[2:]), flush=True)
    try:
        subprocess.run(cmd, env=pip_env(), check=True)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    version = metadata.version("torch-fl")
    label = version.split("+", 1)[1] if "+" in version else ""
    if label != args.expect:
        raise SystemExit(f"install-smoke: pip installed torch-fl {version}, expected the +{args.expect} build")
    subprocess.run([sys.executable, "-m", "pip", "check"], env=pip_env(), check=True)
    env = {**os.environ, "FLAGOS_LOG": "dispatch"}
    res = subprocess.run([sys.executable, "-c", SMOKE], env=env, cwd="/tmp", capture_output=True, text=True)
    sys.stdout.write(res.stdout)
    if res.returncode != 0 or "add.Tensor -> " not in res.stderr:
        sys.stderr.write(res.stderr)
        raise SystemExit("install-smoke: the routing smoke test failed (or logged no route for add.Tensor)")
    routed = next(line for line in res.stderr.splitlines() if "add.Tensor -> " in line)
    print(f"install-smoke: dispatch log: {routed.strip()}", flush=True)
    subprocess.run([sys.executable, "-m", "torch_fl", "info"], cwd="/tmp", check=True)
    print(f"install-smoke: OK {args.how}: torch-fl {version} for torch {torch.__version__}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
