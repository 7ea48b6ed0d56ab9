"""The harness's lockstep sets (build_tools/bench/harness/lockstep.py): arms that cannot share a process, timed turn by
turn, with stand-in arms that need no torch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from harness import lockstep

HARNESS = Path(lockstep.__file__).resolve().parent


def _arm_script(tmp_path: Path, body: str) -> Path:
    """A stand-in arm: a script that loads lockstep.py by its folder, as a plain arm does, then runs ``body``."""
    script = tmp_path / "arm.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(HARNESS)!r})\nimport lockstep\n{body}")
    return script


def test_lockstep_turns_rotate_and_pair(tmp_path: Path) -> None:
    # two stand-in arms that sleep for a known time per step: the parent gets every turn's times and the order
    # of the arms rotates from round to round
    script = _arm_script(
        tmp_path,
        (
            "import time\n"
            "delay = float(sys.argv[1])\n"
            "log = open(sys.argv[2], 'a')\n"
            "def step():\n"
            "    log.write(sys.argv[3] + '\\n'); log.flush(); time.sleep(delay)\n"
            "lockstep.serve(step, lambda: None, {'arm': sys.argv[3]})\n"
        ),
    )
    order = tmp_path / "order.txt"
    arms = {
        name: ([sys.executable, str(script), delay, str(order), name], dict(os.environ))
        for name, delay in (("fast", "0.002"), ("slow", "0.05"))
    }
    with lockstep.Group(arms, timeout=60) as group:
        assert group.info == {"fast": {"arm": "fast"}, "slow": {"arm": "slow"}}
        rounds = group.rounds(3, 2)
    assert [sorted(r) for r in rounds] == [["fast", "slow"]] * 3
    assert all(len(t) == 2 for r in rounds for t in r.values())
    # a sleep never ends early, so every slow step takes its 50 ms; a loaded host may stretch any fast step, but not
    # all six of them past that
    assert all(min(r["slow"]) >= 50.0 for r in rounds)
    assert min(t for r in rounds for t in r["fast"]) < 50.0
    assert order.read_text().split() == ["fast"] * 2 + ["slow"] * 4 + ["fast"] * 4 + ["slow"] * 2


def test_lockstep_requests_beside_the_turns(tmp_path: Path) -> None:
    # serve() answers the requests it was given (the bench's profile) between turns; an unknown one ends the
    # child with an error that names what it accepts, and the parent names the arm
    echo = "requests={'echo': lambda n: {'n': n}}"
    script = _arm_script(tmp_path, f"lockstep.serve(lambda: None, lambda: None, {{}}, {echo})\n")
    with lockstep.Group({"a": ([sys.executable, str(script)], dict(os.environ))}, timeout=60) as group:
        assert group.ask("a", "echo", 3) == {"n": 3}
        assert len(group.turn("a", 2)) == 2
        with pytest.raises(
            lockstep.LockstepError, match=r"a: the process ended[\s\S]*'run <n> \[<untimed>\]', 'echo <n>'"
        ):
            group.ask("a", "nonsense", 1)


def test_lockstep_untimed_steps_run_first_and_are_not_timed(tmp_path: Path) -> None:
    # a turn's untimed steps run before its timed ones (the log sees them all) and only the timed ones answer; the
    # stand-in's first step of each turn is slow, as a step after another process had the device can be
    script = _arm_script(
        tmp_path,
        (
            "import time\n"
            "log = open(sys.argv[1], 'a')\n"
            "state = {'n': 0}\n"
            "def step():\n"
            "    state['n'] += 1; log.write('step\\n'); log.flush()\n"
            "    time.sleep(0.08 if state['n'] % 3 == 1 else 0.001)\n"
            "lockstep.serve(step, lambda: None, {})\n"
        ),
    )
    log = tmp_path / "log.txt"
    with lockstep.Group({"a": ([sys.executable, str(script), str(log)], dict(os.environ))}, timeout=60) as group:
        rounds = group.rounds(2, 2, untimed=1)
    assert [len(r["a"]) for r in rounds] == [2, 2]
    assert log.read_text().split() == ["step"] * 6
    assert max(t for r in rounds for t in r["a"]) < 80.0  # the slow first step of each turn was not timed


def test_lockstep_turn_cpu_pins_the_turns_only(tmp_path: Path) -> None:
    # with turn_cpu every thread of the arm, one started before the turn included, runs on that CPU while it steps;
    # between turns (a request, a compilation) the arm has its CPUs back
    script = _arm_script(
        tmp_path,
        (
            "import os, threading, time\n"
            "done = threading.Event()\n"
            "other = threading.Thread(target=done.wait, daemon=True); other.start()\n"
            "def seen():\n"
            "    return sorted(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(other.native_id))\n"
            "during = []\n"
            "def step():\n"
            "    during.append(seen())\n"
            "lockstep.serve(step, lambda: None, {}, requests={'seen': lambda n: [seen(), during]}, "
            "turn_cpu=int(sys.argv[1]))\n"
        ),
    )
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1]
    with lockstep.Group({"a": ([sys.executable, str(script), str(cpu)], dict(os.environ))}, timeout=60) as group:
        assert len(group.turn("a", 2, untimed=1)) == 2
        between, during = group.ask("a", "seen", 0)
    assert during == [[[cpu], [cpu]]] * 3
    assert between == [allowed, allowed]


def test_lockstep_names_an_arm_that_dies(tmp_path: Path) -> None:
    arms = {"broken": ([sys.executable, "-c", "import sys; sys.exit('cannot set the step up')"], dict(os.environ))}
    with pytest.raises(lockstep.LockstepError, match=r"broken: the process ended \(exit 1\)[\s\S]*cannot set"):
        lockstep.Group(arms, timeout=60)
