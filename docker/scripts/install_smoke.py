"""Install torch-fl the way a cluster node does, then check it (run by `nox -s install-<vendor>` in a container).

usage: python install_smoke.py --how http|file|find-links|extra-index --index DIR --expect LABEL

DIR is a variant's index; the node takes the page of its own torch line, DIR/torch-M.m/, over HTTP on this
container's loopback (http), as a file:// index (file), with --no-index --find-links (find-links), or with the
README's pip line beside a loopback torch index that offers the next minor (extra-index). pip sees only those
sources, so it must pick the wheel whose torch pin the installed torch satisfies and leave that torch as it is.
Then the installed version must carry LABEL, ``import torch_fl`` must route and compute ``add.Tensor``, the
README's first use (``FIRST_USE``) must train, and ``pip check`` and ``python -m torch_fl info`` must pass. Then
a wheel of another torch line that pip takes on this Python (where the variant holds one) is forced in: ``import
torch_fl`` must refuse it with the TorchLineError and ``info --check`` print that message and exit 1. The last line
is ``install-smoke: OK ...``.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading
import zipfile
from contextlib import ExitStack
from importlib import metadata
from pathlib import Path

HOWS = ("http", "file", "find-links", "extra-index")

SMOKE = r"""
import torch, torch_fl
torch_fl.set_dispatch_log(True)
a, b = torch.arange(12.0).reshape(3, 4), torch.ones(3, 4)
out = (a.to("flagos") + b.to("flagos")).cpu()
torch_fl.set_dispatch_log(False)
assert torch.equal(out, a + b), (out, a + b)
print("route of add.Tensor:", torch_fl.route("add.Tensor").route)
"""

# README.md's "First use" block, as a new user pastes it (tests/unit/distribution checks that they agree)
FIRST_USE = r"""
import torch, torch_fl                        # importing torch_fl registers the device
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to("flagos")
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
x, y = torch.randn(256, 32, device="flagos"), torch.randn(256, 1, device="flagos")
for step in range(20):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print(f"loss {loss.item():.4f} on {loss.device}")    # every op went through the router
"""


def pip_env() -> dict[str, str]:
    """The environment of a pip with only the sources on its command line: no pip.conf, no PIP_* variables, no
    cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def pip(*args: str) -> None:
    if args[0] == "install":
        print("install-smoke: pip " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "pip", *args], env=pip_env(), check=True)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # a line per request of pip's would bury the smoke's own
        pass


def serve(directory: Path, stack: ExitStack) -> str:
    """``directory`` over HTTP on a free loopback port, answered by a thread while pip runs in a child process and
    stopped when ``stack`` closes; returns its base URL."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stack.callback(server.server_close)
    stack.callback(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def stub_torch_index(root: Path, version: str) -> Path:
    """A PEP 503 index at ``root/simple/`` offering one pure-Python ``torch`` wheel of ``version``: a torch index
    with a newer torch than the node's, which pip would install if it ever wanted to change torch."""
    name = f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": b'raise ImportError("a stub torch from install_smoke.py replaced the node\'s torch")\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: install_smoke\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in files.items()) + f"{info}/RECORD,,\n"
    wheels = root / "wheels"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / name, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{info}/RECORD", record)
    digest = hashlib.sha256((wheels / name).read_bytes()).hexdigest()
    project = root / "simple" / "torch"
    project.mkdir(parents=True)
    (root / "simple" / "index.html").write_text('<!DOCTYPE html><html><body><a href="torch/">torch</a></body></html>\n')
    (project / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="../../wheels/{name}#sha256={digest}">{name}</a></body></html>\n'
    )
    return root


def torch_now() -> str:
    """The installed torch's version, read in a fresh process (this one imported torch before any install)."""
    code = "from importlib.metadata import version; print(version('torch'))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def check_torch_kept(before: str, step: str) -> None:
    after = torch_now()
    if after != before:
        raise SystemExit(f"install-smoke: {step} changed torch from {before} to {after}: pip took another torch line")


def check_label(expect: str) -> str:
    version = metadata.version("torch-fl")
    if version.partition("+")[2] != expect:
        raise SystemExit(f"install-smoke: pip installed torch-fl {version}, expected the +{expect} build")
    return version


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--how", choices=HOWS, required=True)
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--expect", required=True, help="the local version label pip must choose, e.g. pt213cpu")
    args = p.parse_args(argv)
    import torch

    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
    if not args.expect.startswith(f"pt{major}{minor:02d}"):
        raise SystemExit(f"install-smoke: --expect {args.expect} is not of this node's torch {torch.__version__}")
    line = f"torch-{major}.{minor}"
    page = args.index / line
    if not (page / "simple" / "torch-fl" / "index.html").is_file():
        raise SystemExit(f"install-smoke: {args.index} has no page {line}/simple/ for this torch: run `nox -s index`")
    if (args.index / "simple").exists():
        raise SystemExit(f"install-smoke: {args.index}/simple/ offers every torch line at once: run `nox -s index`")
    candidates = sorted(w.name for w in args.index.glob("torch_fl-*.whl"))
    on_page = sorted(w.name for w in args.index.glob(f"torch_fl-*+{args.expect[:5]}*.whl"))
    print(f"install-smoke: node torch {torch.__version__}; the variant holds {', '.join(candidates)}", flush=True)
    print(f"install-smoke: the {line} page offers {', '.join(on_page)}", flush=True)
    before = torch_now()
    with ExitStack() as stack:
        if args.how == "http":
            pip("install", "--index-url", f"{serve(args.index, stack)}/{line}/simple/", "torch-fl")
        elif args.how == "file":
            pip("install", "--index-url", (page / "simple").as_uri() + "/", "torch-fl")
        elif args.how == "find-links":
            pip("install", "--no-index", "--find-links", str(page / "index.html"), "torch-fl")
        else:
            torch_fl_page = f"{serve(args.index, stack)}/{line}/simple/"
            newer = f"{major}.{minor + 1}.0"
            stub = stub_torch_index(Path(stack.enter_context(tempfile.TemporaryDirectory())), newer)
            torch_index = f"{serve(stub, stack)}/simple/"
            print(f"install-smoke: the torch index at {torch_index} offers torch {newer}", flush=True)
            # the form without a pin: only the page keeps pip on this line
            pip("install", "--index-url", torch_fl_page, "--extra-index-url", torch_index, "torch-fl")
            check_torch_kept(before, "pip install torch-fl (unpinned)")
            check_label(args.expect)
            pip("uninstall", "-y", "torch-fl")
            # the README's line: torch pinned, the torch index first, the torch-fl page as the extra index
            readme_line = [f"torch=={major}.{minor}.*", "torch-fl", "--index-url", torch_index]
            pip("install", *readme_line, "--extra-index-url", torch_fl_page)
    check_torch_kept(before, f"install ({args.how})")
    version = check_label(args.expect)
    pip("check")
    env = {**os.environ, "FLAGOS_LOG": "dispatch"}
    res = subprocess.run([sys.executable, "-c", SMOKE], env=env, cwd="/tmp", capture_output=True, text=True)
    sys.stdout.write(res.stdout)
    if res.returncode != 0 or "add.Tensor -> " not in res.stderr:
        sys.stderr.write(res.stderr)
        raise SystemExit("install-smoke: the routing smoke test failed (or logged no route for add.Tensor)")
    routed = next(ln for ln in res.stderr.splitlines() if "add.Tensor -> " in ln)
    print(f"install-smoke: dispatch log: {routed.strip()}", flush=True)
    first = subprocess.run([sys.executable, "-c", FIRST_USE], cwd="/tmp", capture_output=True, text=True)
    if first.returncode != 0 or "on flagos:0" not in first.stdout:
        sys.stderr.write(first.stdout + first.stderr)
        raise SystemExit("install-smoke: the README's first use failed")
    print(f"install-smoke: the README's first use: {first.stdout.strip()}", flush=True)
    subprocess.run([sys.executable, "-m", "torch_fl", "info"], cwd="/tmp", check=True)
    refused = check_wrong_line(args.index, major, minor, before)
    print(
        f"install-smoke: OK {args.how}: torch-fl {version} for torch {before}, torch unchanged; {refused}", flush=True
    )
    return 0


NO_MATCH = "No matching distribution found for torch-fl"  # pip's words when no wheel's tags fit this Python


def wheel_of_another_line(index: Path, major: int, minor: int, into: Path) -> Path | None:
    """The newest wheel of another torch line that pip takes on this Python, downloaded from those lines' flat pages
    into ``into``; None when the variant has no other line or none of its wheels is for this Python (a cp311-abi3
    wheel is not for 3.10). pip decides, by the wheels' tags, as on a node."""
    own = f"torch-{major}.{minor}"
    pages = [p for p in sorted(index.glob("torch-*/index.html")) if p.parent.name != own]
    if not pages:
        return None
    links = [a for page in pages for a in ("--find-links", str(page))]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-index", "--only-binary=:all:", "-d", str(into)]
    res = subprocess.run([*cmd, *links, "torch-fl"], env=pip_env(), capture_output=True, text=True)
    if res.returncode != 0:
        if NO_MATCH in res.stderr:
            return None
        raise SystemExit(f"install-smoke: pip download from the other lines' pages failed: {res.stderr.strip()[-500:]}")
    (wheel,) = into.glob("torch_fl-*.whl")
    return wheel


def check_wrong_line(index: Path, major: int, minor: int, torch_version: str) -> str:
    """Force in this Python's wheel of another torch line: the import must refuse it with the line check's error
    (never the dynamic loader's), and ``info --check`` must print the same and exit 1. Returns what it checked."""
    with tempfile.TemporaryDirectory() as tmp:
        other = wheel_of_another_line(index, major, minor, Path(tmp))
        if other is None:
            here = f"{sys.version_info[0]}.{sys.version_info[1]}"
            return f"wrong line: not checked, the variant has no wheel of another torch line for Python {here}"
        pip("install", "--no-deps", "--force-reinstall", str(other))
    imp = subprocess.run([sys.executable, "-c", "import torch_fl"], cwd="/tmp", capture_output=True, text=True)
    info = subprocess.run(
        [sys.executable, "-m", "torch_fl", "info", "--check"], cwd="/tmp", capture_output=True, text=True
    )
    wheel_line = re.search(r"\+pt(\d)(\d\d)", other.name)
    built = f"torch {int(wheel_line.group(1))}.{int(wheel_line.group(2))}"
    problems = []
    if imp.returncode == 0 or "TorchLineError" not in imp.stderr or "undefined symbol" in imp.stderr:
        problems.append(f"import torch_fl: exit {imp.returncode}, {imp.stderr.strip()[-300:]!r}")
    for needed in (built, torch_version, "pip install"):
        if needed not in imp.stderr:
            problems.append(f"the import error does not name {needed!r}")
    if info.returncode == 0 or built not in info.stdout + info.stderr or "Traceback" in info.stdout + info.stderr:
        problems.append(f"info --check: exit {info.returncode}, {(info.stdout + info.stderr).strip()[-300:]!r}")
    if problems:
        raise SystemExit("install-smoke: a wheel of another line: " + "; ".join(problems))
    return f"wrong line: {other.name} refused under torch {major}.{minor}, info --check exit {info.returncode}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
