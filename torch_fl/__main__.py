"""``python -m torch_fl``: what this process's flagos device will do.

    python -m torch_fl info              accelerator, build, torch, conf, overrides, route counts, and whether the
                                         installed variant fits this node (--check: exit 1 when it does not); a
                                         bad configuration is listed as a finding (exit 1)
    python -m torch_fl route add.Tensor  the route an op takes and where that was decided
    python -m torch_fl routes            every explicit route
    python -m torch_fl qualify --provider flaggems
                                         every operator of a provider against native, crash-isolated: a report
                                         per (operator, dtype) and the routes it qualifies (torch_fl/qualify)
Each but qualify takes ``--json`` for machine-readable output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict
from typing import Any


def _fit() -> dict[str, Any]:
    """Does the installed variant fit this node (torch line, vendor runtime, accelerator present)? If not, which
    variant to install instead (torch_fl/_variant.py)."""
    import torch

    import torch_fl

    from . import _torch_line, _variant

    hip = getattr(torch.version, "hip", None)
    toolchain = _variant.toolchain_from_torch(torch.__version__, torch.version.cuda, hip)
    devices = torch.cuda.device_count() if toolchain != "cpu" else 0
    node = _variant.Node(torch.__version__, toolchain, devices)
    wanted = node.wanted
    try:
        installed = _variant.from_version(torch_fl.__version__)
        problems = _variant.fit(installed, node, tuple(torch_fl._core.built_runtimes()))
        label = installed.label
    except _variant.VariantError as exc:
        problems, label = [str(exc)], None
    return {
        "installed": label,
        "node": f"torch {torch.__version__} ({toolchain}), {devices} {toolchain} device(s)"
        if toolchain != "cpu"
        else f"torch {torch.__version__} (cpu)",
        "fits": not problems,
        "problems": problems,
        "wanted": wanted.label,
        # the node's own pip line: its torch pinned, the page of its line only ($TORCH_FL_INDEX: the README); the
        # same line as import torch_fl's TorchLineError gives
        "install": _variant.install_line(
            _torch_line.INDEX_BASE, toolchain, _torch_line.installed_torch(torch.__version__)
        ),
    }


def _unconfigured_info(problems: tuple[str, ...]) -> dict[str, Any]:
    """What info can say when the configuration stopped start-up: the build, torch, the variant, the problems."""
    import torch

    import torch_fl

    return {
        "torch_fl": torch_fl.__version__,
        "built_accelerators": list(torch_fl._core.built_runtimes()),
        "torch": torch.__version__,
        "configuration": list(problems),  # each names its variable or conf line and the way out
        "variant": _fit(),
    }


def _info() -> dict[str, Any]:
    import torch

    import torch_fl

    from . import _startup
    from .routing import routes as _routes
    from .routing import shipped as _shipped

    if _startup.deferred is not None:
        return _unconfigured_info(_startup.deferred.problems)
    state = _routes.state()
    counts = Counter(r.route for r in state.table.entries.values())
    return {
        "torch_fl": torch_fl.__version__,
        "accelerator": torch_fl.accelerator(),
        "built_accelerators": list(torch_fl._core.built_runtimes()),
        "device_count": torch_fl.flagos.device_count(),
        "torch": torch.__version__,
        "conf": state.conf_path,
        # what FLAGOS_CONF=<name> can choose here
        "shipped_confs": list(_shipped.confs(_shipped.CONF_DIR, torch_fl.accelerator())),
        "default_route": state.table.default.route,
        "overrides": {o.var: ", ".join(o.routes) for o in state.settings.overrides},
        "explicit_routes": dict(sorted(counts.items())),
        "log": sorted(state.settings.log),
        # the replay cache of provider routes; per-op statistics of a run: FLAGOS_LOG=replay (printed at exit)
        "replay": torch_fl.replay.settings(),
        "variant": _fit(),
    }


def _route(op: str) -> dict[str, Any]:
    import torch_fl

    from . import _parts
    from .routing import dispatcher as _dispatcher

    resolved = torch_fl.route(op)
    out = asdict(resolved)
    out["reaches_router"] = torch_fl.reaches_router(resolved.op)
    # the unboxed entry serves an op only while its route is native; other routes go through the boxed router
    out["fast_path"] = resolved.op in torch_fl.fast_path_ops() and resolved.route == "native"
    out["device_kernel"] = resolved.op in _dispatcher.DeviceKernels()
    # what the router receives instead, on OpInfo's samples: [(op, route)], or None without a sample
    out["becomes"] = None if out["reaches_router"] or out["device_kernel"] else _parts.parts(resolved.op)
    return out


def _fit_lines(fit: dict[str, Any]) -> list[str]:
    if fit["fits"]:
        return [f"{fit['installed']} fits this node: {fit['node']}", f"pip line for this node: {fit['install']}"]
    lines = [f"{fit['installed'] or 'unknown'} does NOT fit this node: {fit['node']}"]
    lines += [f"  - {p}" for p in fit["problems"]]
    lines.append(f"  install variant {fit['wanted']}: {fit['install']}")
    return lines


def _problem_lines(problems: list[str]) -> list[str]:
    head = f"{len(problems)} problem(s): `import torch_fl` fails until they are fixed"
    return [head, *(f"  - {p}" for p in problems)]


def _print_info(info: dict[str, Any]) -> None:
    width = max(len(k) for k in info)
    for key, value in info.items():
        if key in ("variant", "configuration"):
            lines = _fit_lines(value) if key == "variant" else _problem_lines(value)
            print(f"{key:<{width}}  {lines[0]}")
            for line in lines[1:]:
                print(f"{'':<{width}}  {line}")
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "none"
        elif isinstance(value, list):
            value = ", ".join(value) or "none"
        print(f"{key:<{width}}  {value}")


def _print_route(route: dict[str, Any]) -> None:
    print(f"{route['op']} -> {route['route']}   (from {route['origin']})")
    if route["dtypes"]:
        print(f"  serves {', '.join(route['dtypes'])} only; calls of other dtypes take {route['otherwise']}")
    if route["fast_path"]:
        print("  unboxed fast path: the native route skips boxing for this op")
    if len(route["chain"]) > 1:
        print(f"  chain: {', '.join(route['chain'])}")
    for name, reason in route["skipped"]:
        print(f"  skipped {name}: {reason}")
    if route["reaches_router"]:
        return
    if route["device_kernel"]:
        print("  note: a kernel of the flagos device itself (allocation, copy, view...): always native, not routed")
    elif route["becomes"]:
        print(f"  note: torch decomposes {route['op']} before the device; on OpInfo's samples the router gets")
        print("        " + ", ".join(f"{op} -> {taken}" for op, taken in route["becomes"]))
        print("        route those ops (FLAGOS_OP_<op>=...) to move it")
    else:
        print(
            f"  note: torch decomposes {route['op']} before the device, so its route is never used; run it with "
            "FLAGOS_LOG=dispatch to see the ops the router gets, and route those (this command lists them itself "
            "from PyTorch's OpInfo samples where the op has some and numpy and expecttest are installed)"
        )


def _qualify_parser(sub: Any) -> None:
    from .qualify.opinfo import DEFAULT_DTYPES

    p = sub.add_parser("qualify", help="qualify a provider's kernels against native, op by op")
    p.add_argument("--provider", required=True, help="the provider's route name (flaggems, or one --import registers)")
    p.add_argument("--out", default=None, help="run directory (default: ./qualify-<provider>); a rerun resumes it")
    p.add_argument(
        "--samples",
        default=None,
        help="samples directory (default: <out>/samples); workloads add to it with torch_fl.qualify.recording",
    )
    p.add_argument("--ops", default="", help="comma-separated operators (default: every one the provider claims)")
    p.add_argument(
        "--first",
        default="",
        help="comma-separated operators to run before the others (those real workloads call): a run that its "
        "budget cuts short has finished them",
    )
    p.add_argument(
        "--dtypes",
        default=",".join(DEFAULT_DTYPES),
        help="dtypes to qualify: OpInfo's samples in them, and samples made from the schema where none reaches one",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first in every process (a module that registers a provider)",
    )
    p.add_argument("--workers", type=int, default=1, help="worker processes (they share the device)")
    p.add_argument("--chunk", type=int, default=8, help="operators per worker process before a fresh one starts")
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds an operator may take, beyond its tuning, before it counts as hung",
    )
    p.add_argument(
        "--tuning",
        type=float,
        default=900.0,
        help="seconds the first provider calls of an operator's samples may take in all (autotuning; reported)",
    )
    p.add_argument(
        "--tune-for",
        type=float,
        default=None,
        metavar="SECONDS",
        help="after this much autotuning, an operator's further samples are left out (each dtype keeps one; reported)",
    )
    p.add_argument("--budget", type=float, default=None, help="seconds for this run; what is left stays pending")
    p.add_argument(
        "--extend",
        default=None,
        metavar="REPORT",
        help="an earlier report.json of this key: carry the operators it finished, run only the rest",
    )
    p.add_argument(
        "--retime",
        action="store_true",
        help="with --extend: also run the operators the report timed by an older method (beside other workers, or "
        "not at their smallest sample) again",
    )
    p.add_argument(
        "--again",
        default="",
        metavar="OPS",
        help="with --extend: run these operators again even where the report finished them (a,b)",
    )
    p.add_argument("--no-speed", action="store_true", help="verdicts only, no provider/native timing")
    p.add_argument(
        "--slow-bar",
        type=float,
        default=1.5,
        help="qualified.conf keeps native a correct kernel over this times native's time (default 1.5; 0: no bar)",
    )
    p.add_argument("--sample", type=int, default=None, help="run only this sample of --ops (a reproduction)")
    p.add_argument("--list", action="store_true", help="print the operators the provider claims and stop")


def _qualify(args: Any) -> int:
    from pathlib import Path

    from .qualify import opinfo, report, routes, runner

    out = Path(args.out or f"qualify-{args.provider}").resolve()
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = sorted(set(dtypes) - set(opinfo.ALL_DTYPES))
    if unknown:
        print(
            f"error: --dtypes: unknown dtype(s) {', '.join(unknown)}; choose from {', '.join(opinfo.ALL_DTYPES)}",
            file=sys.stderr,
        )
        return 2
    if args.retime and not args.extend:
        print("error: --retime renews the timings of a report: name it with --extend REPORT", file=sys.stderr)
        return 2
    again = [o.strip() for o in args.again.split(",") if o.strip()]
    if again and not args.extend:
        print("error: --again reopens entries of a report: name it with --extend REPORT", file=sys.stderr)
        return 2
    if args.sample is not None and len(ops) != 1:
        print("error: --sample reproduces one sample of one operator: name it with --ops OP", file=sys.stderr)
        return 2
    plan = runner.Plan(
        provider=args.provider,
        out=out,
        samples=Path(args.samples).resolve() if args.samples else out / "samples",
        ops=ops or None,
        first=[o.strip() for o in args.first.split(",") if o.strip()],
        dtypes=dtypes,
        imports=args.imports,
        workers=max(1, args.workers),
        chunk=max(1, args.chunk),
        timeout=args.timeout,
        tuning=args.tuning,
        tune_for=args.tune_for,
        budget=args.budget,
        speed=not args.no_speed,
        index=args.sample,
        extend=Path(args.extend).resolve() if args.extend else None,
        retime=args.retime,
        again=again,
    )
    try:
        if args.list:
            out.mkdir(parents=True, exist_ok=True)
            claimed = runner.claims(plan)
            print("\n".join(claimed["ops"]))
            return 0
        meta = runner.run(plan)
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rep = report.build(meta, runner.read_events(out / "events.jsonl"))
    json_path, md_path = report.write(rep, out)
    for tuned, name in ((False, "qualified.conf"), (True, "qualified-tuned.conf")):
        (out / name).write_text(routes.render(rep, tuned, slow_bar=args.slow_bar))
    print(", ".join(f"{v}: {n}" for v, n in rep["counts"].items()))
    if args.sample is not None:
        r = rep["ops"][ops[0]]
        f = r.get("failure")
        print(f"{ops[0]} sample {args.sample}: {r['verdict']}" + (f" ({f['sample']}: {f['detail']})" if f else ""))
    print(
        f"report: {json_path}\n        {md_path}\nconfs:  {out / 'qualified.conf'} (FlagGems-first where it passed)"
        f"\n        {out / 'qualified-tuned.conf'} (where it passed and is no slower than native)"
    )
    pending = rep["counts"].get("pending", 0)
    if pending:
        print(f"{pending} operator(s) pending: run the same command again to resume", file=sys.stderr)
        return 3
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_fl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="accelerator, build, torch, conf and route summary")
    p_info.add_argument("--json", action="store_true")
    p_info.add_argument("--check", action="store_true", help="exit 1 when the installed variant does not fit")
    p_route = sub.add_parser("route", help="the route one op takes, e.g. add.Tensor")
    p_route.add_argument("op")
    p_route.add_argument("--json", action="store_true")
    p_routes = sub.add_parser("routes", help="every explicit route and its origin")
    p_routes.add_argument("--json", action="store_true")
    _qualify_parser(sub)
    args = parser.parse_args(argv)
    from . import _startup

    if _startup.deferred is not None and args.command != "info":
        print(f"error: torch_fl cannot start: {_startup.deferred}", file=sys.stderr)
        return 2
    if args.command == "qualify":
        return _qualify(args)

    try:
        if args.command == "info":
            info = _info()
            print(json.dumps(info, indent=2)) if args.json else _print_info(info)
            if info.get("configuration") or (args.check and not info["variant"]["fits"]):
                return 1  # a bad configuration stops `import torch_fl`: a failed check with or without --check
        elif args.command == "route":
            route = _route(args.op)
            print(json.dumps(route, indent=2)) if args.json else _print_route(route)
        else:
            import torch_fl

            table = {op: asdict(r) for op, r in torch_fl.routes().items()}
            if args.json:
                print(json.dumps(table, indent=2))
            else:
                for op, r in table.items():
                    print(f"{op:<40} {r['route']:<10} {r['origin']}")
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
