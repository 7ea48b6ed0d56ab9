"""torch_fl/qualify/routes.py: a report's per-dtype verdicts become conf lines whose provider route serves exactly
the dtypes that passed."""

from __future__ import annotations

from typing import Any

import torch_fl_conf as conf  # registered by conftest (loaded by path)

from build_tools.product import by_path

routes = by_path("torch_fl_qualified_routes", "torch_fl/qualify/routes.py")


def dtype(verdict: str) -> dict[str, Any]:
    return {"verdict": verdict, "samples": 1, "bitwise": verdict == "pass"}


def report(**ops: dict[str, Any]) -> dict[str, Any]:
    return {
        "provider": "demo",
        "provider_version": "1.0",
        "vendor": "cpu",
        "torch_line": "2.13",
        "key": "k",
        "ops": ops,
    }


FAILURE = {"verdict": "wrong values", "dtype": "float16", "sample": "exp(float16[4])", "detail": "off", "repro": "R"}


def test_each_route_serves_the_dtypes_its_operator_passed() -> None:
    text = routes.render(
        report(
            neg={"verdict": "pass", "dtypes": {"float32": dtype("pass"), "bool": dtype("pass")}},
            exp={
                "verdict": "wrong values",
                "dtypes": {"float32": dtype("pass"), "float16": dtype("wrong values")},
                "failure": FAILURE,
            },
            sqrt={
                "verdict": "crash",
                "dtypes": {"float32": dtype("crash")},
                "failure": {**FAILURE, "dtype": "float32"},
            },
            full={"verdict": "pass", "dtypes": {"none": dtype("pass")}},
            mul={
                "verdict": "crash",
                "dtypes": {"float16": dtype("crash"), "bfloat16": dtype("pass"), "float32": dtype("pass")},
                "failure": {**FAILURE, "verdict": "crash"},
            },
        )
    )
    parsed = conf.parse_conf_text(text, "q.conf")
    lines = {op: (e.routes, e.gates) for op, e in parsed.entries.items()}
    assert lines == {
        "neg": (("demo", "native"), (("demo", ("bool", "float32")),)),
        "exp": (("demo", "native"), (("demo", ("float32",)),)),
        "sqrt": (("native",), ()),  # a crash ends the operator's run: no dtype of it counts
        "full": (("native",), ()),  # samples without a dtype: no list can name them
        # the run went on past float16's crash (a rerun without its input classes): the others passed on their own
        "mul": (("demo", "native"), (("demo", ("bfloat16", "float32")),)),
    }
    exp_reason = text[: text.index("\nexp = ")].rsplit("\n\n", 1)[1]
    assert "in float32 only" in exp_reason and "float16: wrong values" in exp_reason and "Reproduce: R" in exp_reason


def test_a_correct_kernel_over_the_slow_bar_stays_native_unless_its_control_is_noisy() -> None:
    def timed(ratio: float, aa: float) -> dict[str, Any]:
        return {"verdict": "pass", "dtypes": {"float32": dtype("pass")}, "speed": {"ratio": ratio, "aa": aa}}

    def samples(*timings: tuple[float, float]) -> dict[str, Any]:
        timed = [{"ratio": ratio, "aa": aa, "sample": f"fmin(float32[{n}])"} for n, (ratio, aa) in enumerate(timings)]
        return {"verdict": "pass", "dtypes": {"float32": dtype("pass")}, "speed": {"ratio": 1.0, "aa": 1.0,
                                                                                    "samples": timed}}  # fmt: skip

    text = routes.render(
        report(
            add=timed(1.95, 1.01),
            mul=timed(1.4, 1.0),
            sub=timed(1.95, 1.4),
            fmin=samples((1.0, 1.0), (18.4, 0.85)),
            neg=samples((0.8, 1.0), (1.6, 1.2)),
        )
    )
    lines = dict(line.split(" = ") for line in text.splitlines() if " = " in line and not line.startswith("#"))
    assert lines["add"] == "native" and "1.95x native's time" in text
    assert lines["mul"] == "demo[float32], native"  # under the bar
    assert lines["sub"] == "demo[float32], native"  # 1.95x, but native against native was off by 40%: within it
    # one slow sample is enough, however fast the other: where the host's cost shows, a model pays it
    assert lines["fmin"] == "native" and "18.40x native's time at fmin(float32[1]) (A/A 0.85)" in text
    assert lines["neg"] == "demo[float32], native"  # 1.6x, within 1.5x by its A/A's 20%
    assert conf.parse_conf_text(text, "q.conf").entries["add"].routes == ("native",)  # the conf reads back


def test_the_routes_write_the_requirements_the_parser_reads_in_its_order() -> None:
    from torch_fl import _chain  # the generator loads routes.py by path, so it keeps its own copy of the words

    assert routes.REQUIREMENTS == tuple(_chain.REQUIREMENTS)


def excepting(*classes: str, served: int = 5, samples: int = 7) -> dict[str, Any]:
    words = {"strided": "contiguous", "0dim": "no_0dim", "broadcast": "same_shape", "mixed": "same_dtype"}
    failure = {"verdict": "wrong values", "sample": "abs(float32[4, 4] strides (1, 4) offset 0)", "detail": "off"}
    return {
        "verdict": "pass except",
        "samples": samples,
        "bitwise": False,
        "except": list(classes),
        "requires": [words[c] for c in classes],
        "served": served,
        "failure": {**failure, "classes": list(classes)},
    }


def test_a_dtype_that_passes_except_on_a_class_gives_its_route_the_requirement() -> None:
    text = routes.render(
        report(
            abs={"verdict": "pass except", "dtypes": {"float32": excepting("strided"), "float64": dtype("pass")}},
            sum={
                "verdict": "wrong values",
                "dtypes": {"float32": excepting("broadcast", "0dim"), "float16": dtype("wrong values")},
                "failure": FAILURE,
            },
        )
    )
    parsed = conf.parse_conf_text(text, "q.conf")
    lines = {op: (e.routes, e.gates) for op, e in parsed.entries.items()}
    assert lines == {
        # one list per route: float64 passed everywhere, and is held to float32's requirement too
        "abs": (("demo", "native"), (("demo", ("float32", "float64", "contiguous")),)),
        "sum": (("demo", "native"), (("demo", ("float32", "no_0dim", "same_shape")),)),
    }
    abs_reason = text[: text.index("\nabs = ")].rsplit("\n\n", 1)[1]
    assert "for contiguous inputs only" in abs_reason and "float32 passes 5 of 7 samples" in abs_reason
    assert "all but those strided" in abs_reason and "wrong values: abs(float32[4, 4] strides" in abs_reason
    sum_reason = text[: text.index("\nsum = ")].rsplit("\n\n", 1)[1]
    assert "float16: wrong values" in sum_reason  # the dtypes left out still say why


def test_the_report_shows_the_classes_a_dtype_passes_except() -> None:
    from torch_fl.qualify import report as qreport

    meta = {"provider": "demo", "accelerator": "cpu", "torch": "2.13.0+cpu", "qualified_ops": ["abs"]}
    events = [
        {"event": "start", "op": "abs"},
        {"event": "verdict", "op": "abs", "dtypes": {"float32": excepting("strided")}},
        {"event": "done", "op": "abs"},
    ]
    built = qreport.build(meta, events)
    assert built["ops"]["abs"]["verdict"] == "pass except" and built["counts"]["pass except"] == 1
    md = qreport.markdown(built)
    assert "| `abs` | pass except | float32: pass except strided |" in md
    assert "abs(float32[4, 4] strides (1, 4) offset 0) (strided): off" in md
