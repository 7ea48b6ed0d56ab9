"""The benchmark harness, ``python -m harness`` (build_tools/bench/harness), produces complete reports (what is in
them, never how fast anything was).

One ``--short`` run into a temporary directory (about 30-45 s on two cores, and about 20 s of CPU time more for the
compiled LLM step's dry run), then checks of the files; one small paired run and one run stopped in its step part for
what ``--short`` leaves out; what only renders or parses runs in this process (``harness.cli.main``). The harness runs
against the installed package, from its folder, which holds no torch_fl, beside a copy of tests/ (the test image, a
node script), like every suite here.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import cli, report

CASES = ("residual_101x3x320_noncontig", "attention_60x101x16_noncontig", "ffn_101x3x1280_scalar", "bias_3x101x33")
Done = subprocess.CompletedProcess[str]
Run = Callable[..., Done]  # conftest.py's harness_cli
ENV_KEYS = ("device", "vendor", "torch", "triton", "flag_gems", "torch_fl", "commit", "conf", "host", "date")


@pytest.fixture(scope="module")
def short_run(harness_cli: Run, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Done]:
    # In a test container this run is the row's short benchmark: run_tests.py names its reports directory here
    # and runs no second one.
    named = os.environ.get("TORCH_FL_BENCH_OUT")
    out = Path(named) if named else tmp_path_factory.mktemp("bench")
    return out, harness_cli("--short", "--step-profile", "--llm", "1", "--out", out)


@pytest.fixture(scope="module")
def bench(short_run: tuple[Path, Done]) -> dict[str, Any]:
    return json.loads((short_run[0] / "bench.json").read_text())


def test_files_are_written(short_run: tuple[Path, Done]) -> None:
    out, proc = short_run
    for name in ("bench.json", "bench.md", "bench.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")], "temporary files left behind"
    assert proc.stdout.splitlines()[-1].startswith("goal native/plain")  # the short table comes last


def test_environment_block(bench: dict[str, Any]) -> None:
    env = bench["environment"]
    for key in ENV_KEYS:
        assert key in env, key
    assert env["vendor"] in ("cpu", "cuda", "dcu")
    assert env["commit"]
    assert bench["settings"]["short"] is True and bench["settings"]["runs"] == 1


def test_ab_cases_arms_and_routes(bench: dict[str, Any]) -> None:
    assert [c["case"] for c in bench["ab"]] == list(CASES)
    for case in bench["ab"]:
        assert list(case["arms"]) == ["plain", "native", "flaggems", "cpu"]
        for arm, entry in case["arms"].items():
            if not entry["available"]:
                assert entry["reason"], f"{case['case']} {arm}: unavailable without a reason"
                continue
            assert len(entry["us"]) == 1 and entry["us"][0] > 0
            assert entry["route"] == (None if arm == "plain" else arm), "route not confirmed from the log"
            for key in ("mean_us", "min_us", "max_us", "spread_pct", "vs_native", "vs_plain"):
                assert key in entry, (case["case"], arm, key)
    if bench["environment"]["vendor"] == "cpu":
        assert not bench["ab"][0]["arms"]["flaggems"]["available"]


def test_acceptance_and_overhead(bench: dict[str, Any]) -> None:
    acc = bench["acceptance"]
    goal = {"cpu": 1.5}.get(bench["environment"]["vendor"], 1.1)
    assert set(acc["per_case"]) == set(CASES) and acc["goal"] == goal and len(acc["per_run"]) == 1
    ops = {o["op"]: o for o in bench["overhead"]["ops"]}
    kinds = {o["kind"] for o in ops.values()}
    assert kinds == {"bookkeeping", "functional", "in-place", "out=", "backward", "list"}, kinds
    for item in ops.values():
        assert item["plain_us_median"] > 0 and item["flagos_us_median"] > 0, item["op"]
        assert item["pairs"] == len(item["runs"][0]["plain_us"]) == len(item["runs"][0]["flagos_us"]) > 1
        # the arm with alias reuse off ran in the same rounds: the overhead before and after that reuse
        assert len(item["runs"][0]["flagos_fresh_us"]) == item["pairs"], item["op"]
        assert isinstance(item["fresh_overhead_us"], float), item["op"]
    assert "add.Tensor -> native" in ops["add"]["routes"]
    assert "add_.Tensor -> native" in ops["add_"]["routes"]
    assert "_foreach_add_.List -> native" in ops["foreach_add_"]["routes"]
    assert ops["view"]["routes"] == []  # a bookkeeping kernel never reaches the router


def test_training_step(bench: dict[str, Any]) -> None:
    (size,) = bench["step"]["sizes"]
    assert size["d_model"] == 64 and set(size["arms"]) == {"plain", "shipped", "native", "plain-again"}
    # --short: 2 lockstep sets of 3 steps, one turn each
    assert size["sets"] == 2 and size["rounds"] == 2
    for arm, entry in size["arms"].items():
        assert len(entry["ms"]) == 2 and entry["ms_min"] <= entry["ms_max"], arm
        assert len(entry["vs_plain_sets"]) == 2 and all(r > 0 for r in entry["vs_plain_sets"]), arm
        # the ratio is taken round by round: with one round per set it is the median of the sets' ratios
        assert entry["vs_plain"] == pytest.approx(statistics.median(entry["vs_plain_sets"])), arm
    assert size["arms"]["plain"]["vs_plain"] == 1.0
    assert size["arms"]["native"]["routed_calls"].keys() == {"native"}  # the all-native conf, confirmed
    assert size["arms"]["plain"]["routed_calls"] == {}


def test_step_profile(bench: dict[str, Any]) -> None:
    (size,) = bench["step_profile"]["sizes"]
    assert size["d_model"] == 64
    ops = {o["op"]: o for o in size["ops"]}
    # both arms ran the same model: its matrix products show in each, as often
    assert ops["aten::mm"]["plain_calls"] == ops["aten::mm"]["flagos_calls"] > 0
    assert size["plain_us"] > 0 and size["flagos_us"] > 0
    deltas = [o["delta_us"] for o in size["ops"]]
    assert deltas == sorted(deltas, reverse=True)  # largest addition first
    for o in size["ops"]:
        assert o["delta_us"] == pytest.approx(o["flagos_us"] - o["plain_us"]), o["op"]


def test_compiled_llm_step(bench: dict[str, Any], short_run: tuple[Path, Done]) -> None:
    llm = bench["llm"]
    plain = bench["environment"]["plain_device"]
    assert llm["sets"] == 1 and llm["judged"] is False and llm["size"]["layers"] == 1  # --short: the dry run
    assert list(llm["arms"]) == ["flagos", plain, f"{plain}-again"]
    assert all(entry["ms_median"] > 0 for entry in llm["arms"].values())
    assert llm["time_ratio"] > 0 and llm["aa_ratio"] > 0
    # the dry run's timing is not judged (its ratio is the emulation's, on a loaded host); every other bar is
    assert [f for f in llm["failures"] if not f.startswith("time ratio")] == [], llm["lines"]
    text = "\n".join(llm["lines"])
    # the traced flagos graph keeps the fused attention op (the hook), as the plain one keeps its flash op
    assert "compiled graph on flagos: fused attention calls _scaled_dot_product_fused_attention_overrideable" in text
    assert f"compiled LLM step: {llm['verdict']}" in short_run[1].stdout


def test_markdown_tables(short_run: tuple[Path, Done]) -> None:
    md = (short_run[0] / "bench.md").read_text()
    for text in (
        "## Route A/B",
        "## Host overhead per op class",
        "## Training step",
        "| case |",
        *CASES,
        "## Training step, host time per op (profiler)",
        "Ratio against flagos native",
        "## Compiled decoder LLM training step",
        "llm compile check:",
    ):
        assert text in md, text


def test_a_partial_report_says_so(
    short_run: tuple[Path, Done], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # reports are written after every part: a run stopped from outside leaves its last one, marked partial
    bench = json.loads((short_run[0] / "bench.json").read_text())
    assert bench["complete"] is True and "Partial report" not in (short_run[0] / "bench.md").read_text()
    (tmp_path / "partial.json").write_text(json.dumps({**bench, "complete": False, "step": None, "step_profile": None}))
    assert cli.main(["--render", str(tmp_path / "partial.json"), "--out", str(tmp_path)]) == 0
    md = (tmp_path / "bench.md").read_text()
    assert "**Partial report**" in md and "## Host overhead per op class" in md and "## Training step" not in md


def test_a_run_stopped_in_a_later_part_keeps_the_earlier_ones(
    tmp_path: Path, harness_cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the step set cannot take 100000 steps (nor even start) within the second allowed; the A/B part before it
    # was written
    monkeypatch.setenv("TORCH_FL_COMMIT", "0123abc")  # the caller's HEAD: the report names it
    proc = harness_cli(
        "--short",
        "--routes",
        "native",
        "--cases",
        "bias_3x101x33",
        "--no-overhead",
        "--step",
        "64",
        "--step-steps",
        "100000",
        "--step-timeout",
        "1",
        "--out",
        tmp_path,
        check=False,
    )
    assert proc.returncode == 1 and "no result within 1 s for the set" in proc.stderr, proc.stderr
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["complete"] is False and [c["case"] for c in saved["ab"]] == ["bias_3x101x33"]
    assert saved["environment"]["commit"] == "0123abc"
    assert saved["step"] is None and "**Partial report**" in (tmp_path / "bench.md").read_text()


def test_render_compare_and_gate(
    short_run: tuple[Path, Done], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = str(short_run[0] / "bench.json")
    assert cli.main(["--render", old, "--out", str(tmp_path), "--compare", old, "--max-ratio", "1e9"]) == 0
    assert (tmp_path / "bench.md").is_file() and "+0.0%" in capsys.readouterr().out
    assert cli.main(["--render", old, "--out", str(tmp_path), "--max-ratio", "0.0001"]) == 3
    assert "gate failed" in capsys.readouterr().err


PAIRED_ARMS = ["native", "flaggems", "flaggems/replay"]


@pytest.fixture(scope="module")
def paired_run(harness_cli: Run, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Done]:
    """One small run for the paired tests: one case, the A/A control, three pairs of every paired arm, pinned;
    no overhead and no step part (the short run checks those)."""
    out = tmp_path_factory.mktemp("paired")
    proc = harness_cli(
        "--short",
        "--accelerator",
        "cpu",
        "--cases",
        "bias_3x101x33",
        "--routes",
        "native",
        "--control",
        "--paired",
        "3",
        "--paired-arms",
        ",".join(PAIRED_ARMS),
        "--no-overhead",
        "--step",
        "none",
        "--cpu",
        "auto",
        "--out",
        out,
    )
    return json.loads((out / "bench.json").read_text()), (out / "bench.md").read_text(), proc


def test_paired_control_and_pinning(paired_run: tuple[dict[str, Any], str, Done]) -> None:
    bench, md, proc = paired_run
    assert bench["settings"]["cpu"] == max(os.sched_getaffinity(0)) and bench["settings"]["paired"] == 3
    assert bench["settings"]["glibc_tunables"]
    arms = bench["ab"][0]["arms"]
    assert list(arms) == ["plain", "native", "plain-again"]
    assert arms["plain-again"]["route"] is None and len(arms["plain-again"]["vs_plain"]) == 1
    assert bench["acceptance"]["control_per_case"]["bias_3x101x33"] == arms["plain-again"]["vs_plain"]
    (case,) = bench["paired"]["cases"]
    assert case["case"] == "bias_3x101x33" and case["pairs"] == 3 and len(case["runs"][0]["ratios"]) == 3
    assert case["ratio_min"] <= case["ratio_median"] <= case["ratio_max"]
    assert bench["acceptance"]["paired"]["worst_case"] == "bias_3x101x33"
    for text in ("## Paired in-process A/B", "Noise floor, plain again / plain", "pinned to CPU"):
        assert text in md, text
    assert "paired in-process medians" in proc.stdout


def test_paired_arms_measure_native_and_report_flaggems_unavailable(
    paired_run: tuple[dict[str, Any], str, Done],
) -> None:
    """Several flagos arms in one paired process; under emulation both flaggems arms are reported, not measured."""
    bench, md, proc = paired_run
    assert bench["settings"]["paired_arms"] == PAIRED_ARMS and bench["paired"]["arms"] == PAIRED_ARMS
    (case,) = bench["paired"]["cases"]
    assert list(case["arms"]) == PAIRED_ARMS
    native = case["arms"]["native"]
    assert native["available"] and native["route"] == "native" and native["pairs"] == 3
    assert len(native["runs"][0]["us"]) == len(native["runs"][0]["ratios"]) == 3 and native["us_median"] > 0
    assert native["ratio_min"] <= native["ratio_median"] <= native["ratio_max"]
    # the native arm's figures stay where readers from before --paired-arms find them
    assert case["ratio_median"] == native["ratio_median"] and case["flagos_us_median"] == native["us_median"]
    assert case["runs"][0]["ratios"] == native["runs"][0]["ratios"] and len(case["runs"][0]["plain_us"]) == 3
    assert bench["acceptance"]["paired"]["worst_case"] == "bias_3x101x33"
    for name in ("flaggems", "flaggems/replay"):
        entry = case["arms"][name]
        assert not entry["available"] and entry["route"] is None and "ratio_median" not in entry, name
        assert "flaggems" in entry["reason"], entry["reason"]
    assert "| bias_3x101x33 | flagos flaggems/replay | unavailable |" in md and "Arms not measured here" in md
    assert "paired flagos flaggems/replay / plain medians: unavailable (" in proc.stdout


def test_paired_arms_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--paired", "3", "--paired-arms", "native,replay", "--short"])
    assert stopped.value.code == 2 and "paired arms are comma separated names among" in capsys.readouterr().err


def test_cpu_choice_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--cpu", "100000", "--short"])
    assert stopped.value.code == 2 and "is not a CPU this process may use" in capsys.readouterr().err


def test_paired_report_from_before_the_arms_renders() -> None:
    """A bench.json written before --paired-arms has its native figures at the case's level only."""
    old = {
        "case": "c",
        "ratio_median": 1.02,
        "ratio_min": 1.0,
        "ratio_max": 1.1,
        "run_medians": [1.02],
        "pairs": 3,
        "plain_us_median": 10.0,
        "flagos_us_median": 10.2,
        "runs": [],
    }
    (native,) = report.paired_arms_of(old).values()
    assert native["available"] and native["us_median"] == 10.2 and native["ratio_median"] == 1.02
    acc = report.paired_acceptance({"cases": [old]}, 1.1)
    assert acc["met"] and acc["worst_case"] == "c"
    assert report.paired_acceptance({"cases": [{"case": "c", "arms": {}}]}, 1.1) is None  # no native arm paired
