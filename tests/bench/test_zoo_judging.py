"""Which zoo ratios are judged (build_tools/bench/harness/zoo_judge.py): only a pair whose A/A lies inside [0.98, 1.02],
its quartiles no further apart than that band is wide; the others are reported as not judged, their raw ratio
named as such, never as a verdict."""

from __future__ import annotations

from harness import zoo_judge

NAMES = ["flagos", "cuda", "cuda-again"]


def _entry(aa_per_round: list[float]) -> dict:
    rounds = [{"flagos": [1.1], "cuda": [1.0], "cuda-again": [aa]} for aa in aa_per_round]
    replies = {a: {"setup_s": 1.0, "peak_gib": None} for a in NAMES}
    entry = zoo_judge.timed_entry("train-eager", NAMES, replies, rounds, decode_tokens=None)
    entry["check"] = {"ok": True, "detail": "ok"}
    return entry


def test_a_narrow_aa_is_judged_with_its_quartiles():
    entry = _entry([0.99, 1.0, 1.01, 1.0, 1.005])
    assert entry["judged"] and "not_judged" not in entry
    assert entry["aa_quartiles"][0] <= entry["aa"] == 1.0 <= entry["aa_quartiles"][1]
    # every timed step is kept beside the medians, by arm and round
    assert entry["turns_ms"]["cuda-again"] == [[0.99], [1.0], [1.01], [1.0], [1.005]]
    line = zoo_judge.pair_line("llama train-eager", entry, NAMES, 1.0)
    assert "flagos/cuda 1.100 (A/A 1.000" in line


def test_a_wide_aa_is_not_judged():
    entry = _entry([1.15, 1.1, 1.2, 0.9])
    assert not entry["judged"] and entry["not_judged"] == "A/A too wide"
    line = zoo_judge.pair_line("llama train-eager", entry, NAMES, 1.0)
    assert "not judged: A/A too wide" in line and "raw flagos/cuda 1.100" in line
    assert "flagos/cuda 1.100 (" not in line


def test_a_lucky_median_from_scattered_rounds_is_not_judged():
    # the median A/A is 1.0, but the rounds disagree by +-20%: the noise floor is far above the bars
    entry = _entry([0.8, 0.9, 1.0, 1.1, 1.2])
    assert entry["aa"] == 1.0 and not entry["judged"] and entry["not_judged"] == "A/A too wide"


def test_no_control_is_not_judged():
    rounds = [{"flagos": [1.1], "cuda": [1.0]}]
    replies = {a: {"setup_s": 1.0, "peak_gib": None} for a in NAMES[:2]}
    entry = zoo_judge.timed_entry("train-eager", NAMES[:2], replies, rounds, decode_tokens=None)
    assert not entry["judged"] and entry["not_judged"] == "no A/A arm" and "aa" not in entry
