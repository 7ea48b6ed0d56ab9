"""``python -m torch_fl``: what this process's flagos device will do.

    python -m torch_fl info              accelerator, build, torch, conf, overrides, route counts
    python -m torch_fl route add.Tensor  the route an op takes and where that was decided
    python -m torch_fl routes            every explicit route
Each takes ``--json`` for machine-readable output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict
from typing import Any


def _info() -> dict[str, Any]:
    import torch

    import torch_fl

    state = torch_fl._state
    assert state is not None
    counts = Counter(r.route for r in state.table.entries.values())
    return {
        "torch_fl": torch_fl.__version__,
        "accelerator": torch_fl.accelerator(),
        "built_accelerators": list(torch_fl._C.built_runtimes()),
        "device_count": torch_fl.flagos.device_count(),
        "torch": torch.__version__,
        "conf": state.conf_path,
        "default_route": state.table.default.route,
        "overrides": {o.var: ", ".join(o.routes) for o in state.settings.overrides},
        "explicit_routes": dict(sorted(counts.items())),
        "log": sorted(state.settings.log),
    }


def _route(op: str) -> dict[str, Any]:
    import torch_fl

    resolved = torch_fl.route(op)
    out = asdict(resolved)
    out["op"] = op
    out["reaches_router"] = torch_fl.reaches_router(op)
    out["fast_path"] = op in torch_fl.fast_path_ops()
    return out


def _print_info(info: dict[str, Any]) -> None:
    width = max(len(k) for k in info)
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "none"
        elif isinstance(value, list):
            value = ", ".join(value) or "none"
        print(f"{key:<{width}}  {value}")


def _print_route(route: dict[str, Any]) -> None:
    print(f"{route['op']} -> {route['route']}   (from {route['origin']})")
    if route["fast_path"]:
        print("  unboxed fast path: the native route skips boxing for this op")
    if len(route["chain"]) > 1:
        print(f"  chain: {', '.join(route['chain'])}")
    for name, reason in route["skipped"]:
        print(f"  skipped {name}: {reason}")
    if not route["reaches_router"]:
        print(
            "  note: calls of this op never reach the router (a flagos bookkeeping kernel, or torch "
            "decomposes it into other ops first); route those ops instead"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_fl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="accelerator, build, torch, conf and route summary")
    p_info.add_argument("--json", action="store_true")
    p_route = sub.add_parser("route", help="the route one op takes, e.g. add.Tensor")
    p_route.add_argument("op")
    p_route.add_argument("--json", action="store_true")
    p_routes = sub.add_parser("routes", help="every explicit route and its origin")
    p_routes.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    try:
        if args.command == "info":
            info = _info()
            print(json.dumps(info, indent=2)) if args.json else _print_info(info)
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
