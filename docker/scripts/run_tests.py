"""Run the suites inside a test container against the installed wheel (the `docker run` command of test-<toolchain>).

usage: python run_tests.py --tests DIR --reports DIR --markers EXPR --accelerator A --bench short|full|none
                           [--suites routing,correctness] [--workers N|auto] [-- PYTEST_ARGS...]

1. smoke: the core library loads without torch imported first (its RPATH), the package holds no module of one
   CPython's ABI, no compiler is on PATH, and ``import torch_fl`` imports the installed wheel, not a checkout;
2. pytest on the suites, JUnit XML to REPORTS/junit.xml;
3. the benchmark, ``python -m harness`` from build_tools/bench beside the tests, unless the bench suite's own short
   run wrote it.
Everything is written under REPORTS; the exit status is non-zero when any part failed.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "nvcc", "hipcc")
# the package's one compiled part, which torch loads (torch.ops.load_library); its RPATH finds torch's libraries
CORE_LIBRARY = "libtorch_fl_core.so"


def worker_count(text: str) -> int:
    """``--workers``: a positive count, or ``auto`` for the CPUs this process may run on (a container's cpuset)."""
    if text == "auto":
        return max(1, len(os.sched_getaffinity(0)))
    if (n := int(text) if text.isdigit() else 0) < 1:
        raise argparse.ArgumentTypeError(f"--workers {text!r}: give a positive count or 'auto'")
    return n


def smoke(reports: Path, tests: Path) -> list[str]:
    """Checks that need no test framework; returns the problems found (and writes smoke.json)."""
    problems: list[str] = []
    info: dict[str, object] = {}
    spec = importlib.util.find_spec("torch_fl")  # locates the package without executing it
    if spec is None or not spec.submodule_search_locations:
        problems.append("torch_fl is not installed in this interpreter")
    else:
        pkg = Path(list(spec.submodule_search_locations)[0])
        info["package_dir"] = str(pkg)
        if pkg.is_relative_to(tests):
            problems.append(f"torch_fl resolves to {pkg}, inside the test copy, not the installed wheel")
        core = pkg / CORE_LIBRARY
        info["core"] = str(core) if core.is_file() else None
        # the wheel serves every Python of its row: a module built for one CPython's ABI has no place in it
        bound = sorted(m.name for m in pkg.glob("_C*.so"))
        info["cpython_modules"] = bound
        if bound:
            problems.append(f"{', '.join(bound)} in {pkg}: the installed wheel holds a module of one CPython's ABI")
        if not core.is_file():
            problems.append(f"no {CORE_LIBRARY} in {pkg}")
        else:
            assert "torch" not in sys.modules
            try:
                ctypes.CDLL(str(core))
                info["loads_without_torch"] = True
            except OSError as exc:
                problems.append(f"{CORE_LIBRARY} does not load without torch imported first: {exc}")
    found = {c: shutil.which(c) for c in COMPILERS if shutil.which(c)}
    info["compilers_on_path"] = found
    if found:
        problems.append("compilers present in the test image: " + ", ".join(found))
    code = "import torch_fl, torch; print(torch_fl.__file__); print(torch.__version__)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tests, check=False)
    info["import"] = {"returncode": res.returncode, "stdout": res.stdout.strip(), "stderr": res.stderr[-2000:]}
    if res.returncode != 0:
        problems.append("`import torch_fl` failed: " + (res.stderr.strip().splitlines() or ["?"])[-1])
    info["problems"] = problems
    (reports / "smoke.json").write_text(json.dumps(info, indent=2) + "\n")
    return problems


def main(argv: list[str]) -> int:
    i = argv.index("--") if "--" in argv else len(argv)
    argv, extra = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=Path, required=True)
    ap.add_argument("--reports", type=Path, required=True)
    ap.add_argument("--markers", default="")
    ap.add_argument("--accelerator", required=True)
    ap.add_argument("--bench", choices=("short", "full", "none"), default="short")
    ap.add_argument("--suites", default="routing,correctness")
    ap.add_argument("--workers", type=worker_count, default="auto")
    args = ap.parse_args(argv)
    args.reports.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    timings: dict[str, float] = {}
    started = time.time()  # a bench.json older than this is an earlier run's

    t = time.monotonic()
    problems = smoke(args.reports, args.tests)
    timings["smoke"] = time.monotonic() - t
    for p in problems:
        print(f"run_tests: SMOKE FAILED: {p}", flush=True)
    failures += [f"smoke: {p}" for p in problems]
    if not problems:
        print("run_tests: smoke ok (extension loads without torch; no compilers; torch_fl imports)", flush=True)

    wanted = [s for s in args.suites.split(",") if s]
    suites = [s for s in wanted if (args.tests / s).is_dir()]
    if not suites:
        failures.append(f"no test suites ({', '.join(wanted)}) under {args.tests}")
    else:
        cmd = [sys.executable, "-m", "pytest", *suites, "-p", "no:cacheprovider"]
        cmd += [f"--junitxml={args.reports / 'junit.xml'}", "-o", "junit_family=xunit2"]
        if args.markers:
            cmd += ["-m", args.markers]
        if args.workers > 1:
            # The suites share no state between tests: each worker process is a device runtime of its own, and
            # the distributed scenarios take free ports. xdist is in every test lock, so its absence fails here.
            if importlib.util.find_spec("xdist") is None:
                failures.append("pytest-xdist is not installed in the test image (every test lock pins it)")
            # loadscope: a module's tests stay on one worker, so a module fixture (a model, a benchmark run) runs once
            cmd += ["-n", str(args.workers), "--dist", "loadscope"]
        cmd += extra
        env = dict(os.environ)
        if args.bench == "short" and "bench" in suites:
            env["TORCH_FL_BENCH_OUT"] = str(args.reports)
        print("run_tests: " + " ".join(cmd), flush=True)
        t = time.monotonic()
        rc = subprocess.call(cmd, cwd=args.tests, env=env)
        timings["pytest"] = time.monotonic() - t
        if rc == 5:
            failures.append("pytest collected no tests")
        elif rc != 0:
            failures.append(f"pytest failed (exit {rc})")

    written = args.reports / "bench.json"
    if args.bench == "none":
        print("run_tests: benchmark skipped (--bench none: --no-bench, or a row without the bench suite)", flush=True)
    elif args.bench == "short" and written.is_file() and written.stat().st_mtime >= started:
        print(f"run_tests: benchmark: the bench suite's short run wrote {written}", flush=True)
    else:
        # the harness from its folder, build_tools/bench beside the tests as in the checkout (python -m finds it
        # there; torch_fl is the wheel's, none is there)
        home = args.tests.parent / "build_tools" / "bench"
        cmd = [sys.executable, "-m", "harness", "--accelerator", args.accelerator, "--out", str(args.reports)]
        if args.bench == "short":
            cmd.append("--short")
        print("run_tests: " + " ".join(cmd), flush=True)
        t = time.monotonic()
        rc = subprocess.call(cmd, cwd=home)
        timings["bench"] = time.monotonic() - t
        if rc != 0:
            failures.append(f"benchmark (python -m harness in {home}) failed (exit {rc})")

    run = {"timings": timings, "failures": failures, "python": sys.version.split()[0], "user": os.getuid()}
    (args.reports / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    for f in failures:
        print(f"run_tests: FAILED: {f}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
