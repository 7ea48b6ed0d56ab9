"""The modes that train the model suite's models against plain cuda: ``models`` (the suite and step times on the
shipped conf) and ``flaggems`` (FlagGems qualified on this node, then the workloads and the suite on its conf)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .executor import Executor
from .logged import Logged, needs
from .steps import TESTS, Node


def _reference(node: Node, ex: Executor, log: Logged) -> int:
    """The model suite's references: two plain-cuda processes, whose difference (the A/A control) widens the bar."""
    ref = node.python("reference", "models/reference.py", "--device", "cuda", "--out", "/tmp/models-cuda.pt", cwd=TESTS)
    again = node.python(
        "reference again", "models/reference.py", "--device", "cuda", "--out", "/tmp/models-cuda-again.pt", cwd=TESTS
    )
    return log.run(ref) or ex.run(again, show=False)


QUALIFY_PENDING = 3  # python -m torch_fl qualify's status when its budget ran out: a rerun resumes, its confs exist
REFERENCES = {
    "FLAGOS_MODELS_REFERENCE": "/tmp/models-cuda.pt",
    "FLAGOS_MODELS_REFERENCE_REPEAT": "/tmp/models-cuda-again.pt",
}


def models(node: Node, ex: Executor) -> int:
    """The model suite against two plain-cuda references, then alternating step times with an A/A arm."""
    log = Logged(ex, "models.txt", noise=False)
    if rc := _reference(node, ex, log):
        return rc
    log.say("A/A, plain cuda against plain cuda:")
    compare = ("models/reference.py", "--compare", "/tmp/models-cuda.pt", "/tmp/models-cuda-again.pt")
    if rc := log.run(node.python("A/A", *compare, cwd=TESTS)):
        return rc
    suite_rc = log.run(node.suite("models", "-rs", **REFERENCES))
    files = [Path(f"/tmp/steps-{arm}.jsonl") for arm in ("cuda", "flagos", "cuda-again")]
    ex.remove(*files)
    for _ in range(int(node.knobs.TIME_PAIRS)):
        for device, path in zip(("cuda", "flagos", "cuda"), files, strict=True):  # the third: the A/A arm
            ex.output(node.python("step time", "models/steptime.py", "--device", device, cwd=TESTS), append_to=path)
    return log.run(node.python("step times", "models/steptime.py", "--compare", *files, cwd=TESTS)) or suite_rc


def _workload_ops(stamp: Path) -> list[str]:
    """The operators record_workloads.py found the workloads calling (its stamp; an older stamp names none)."""
    try:
        return list(json.loads(stamp.read_text())["operators"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def flaggems(node: Node, ex: Executor) -> int:
    """Record the workloads, qualify flaggems within the budget, then workloads and models on its conf. qualify's
    own status (3: operators left pending, a rerun resumes) is reported, never fatal; any other failure of it ends
    the mode, as the confs the checks would run on are missing."""
    why = "flaggems records OpInfo samples, which need expecttest: carry its wheel in .whl/ (pure Python)"
    if not needs(node, ex, "expecttest", why):
        return 1
    k, log = node.knobs, Logged(ex, "flaggems.txt")
    q = Path(k.QUALIFY_DIR or node.repo / "build" / "qualify-flaggems")
    ex.write(q / ".node", "the qualify run directory of build_tools/node's flaggems mode\n")  # makes it
    # FlagGems' autotuning results live in the run directory, so a machine that resumes the run with it carried
    # finds the shapes an earlier machine tuned (bmm's tens of shapes took about 10 s each on an H100)
    node.env["FLAGGEMS_CACHE_DIR"] = str(q / "flaggems-cache")
    deadline = node.started + int(k.FLAGGEMS_SECONDS)
    # an earlier report to extend: its finished operators are carried, neither recorded nor run again
    extends = ("--extend", node.repo / k.QUALIFY_EXTEND) if k.QUALIFY_EXTEND else ()
    extends += ("--retime",) if extends and k.QUALIFY_RETIME == "1" else ()
    extends += ("--again", k.QUALIFY_AGAIN) if extends and k.QUALIFY_AGAIN else ()
    recorded = (*extends, "--dtypes", k.QUALIFY_DTYPES) if extends else ()
    log.run(
        node.program(
            "record_workloads.py",
            "--samples",
            q / "samples",
            "--provider",
            "flaggems",
            "--resume",
            q,
            "--skip-if-recorded",
            *recorded,
        )
    )
    called = _workload_ops(q / "samples" / ".workloads-recorded")
    first = ("--first", ",".join(called)) if called else ()  # a run cut short by its budget has finished these
    budget = int(deadline - time.time() - int(k.CHECK_SECONDS))
    log.say(f"qualify: budget {budget} s")
    tune_for = ("--tune-for", k.QUALIFY_TUNE_FOR) if k.QUALIFY_TUNE_FOR else ()
    args = ("--workers", k.QUALIFY_WORKERS, "--chunk", "10", "--dtypes", k.QUALIFY_DTYPES, "--timeout", "120",
            *extends, *tune_for, *first)  # fmt: skip
    rc = log.run(
        node.python(
            "qualify", "-m", "torch_fl", "qualify", "--provider", "flaggems", "--out", q, *args, "--budget", str(budget)
        )
    )
    log.say(f"qualify: exit {rc} after {round(time.time() - node.started)} s")
    for name in ("report.json", "report.md", "events.jsonl"):  # events.jsonl: a cold machine's rerun resumes from it
        ex.copy(q / name, node.out / f"qualify-{name}")
    if rc not in (0, QUALIFY_PENDING):
        log.say("qualify failed: no conf of this run to check the workloads and models on")
        return rc
    if k.CHECK_SECONDS == "0":  # a qualification spread over several calls checks its confs once, at the end
        return 0
    if first_rc := _flaggems_first(node, log, q / "qualified.conf", q / "qualified-tuned.conf"):
        log.say(f"flaggems_first: exit {first_rc}")
    log.say(f"real workloads done after {round(time.time() - node.started)} s")
    if _reference(node, ex, log) == 0:
        log.run(node.suite("models", "-rs", FLAGOS_BACKEND_CONFIG=str(q / "qualified.conf"), **REFERENCES))
    log.say(f"model suite on the qualified conf done after {round(time.time() - node.started)} s")
    return 0


def _flaggems_first(node: Node, log: Logged, conf: Path, tuned: Path) -> int:
    """flaggems_first.py: a FlagGems-first conf and its tuned one against all-native on the real workloads."""
    k = node.knobs
    workloads = ("--workloads", k.FLAGGEMS_WORKLOADS) if k.FLAGGEMS_WORKLOADS else ()
    args = (*workloads, "--conf", conf, "--tuned", tuned, "--rounds", k.FLAGGEMS_ROUNDS)
    return log.run(node.program("flaggems_first.py", *args, "--json", node.out / "flaggems-first.json"))


def flaggems_time(node: Node, ex: Executor) -> int:
    """The shipped FlagGems-first confs (those the committed report made) against all-native, with no qualification
    before: a short call's evidence for the confs as committed. They are copied into a run directory first, as
    flaggems_first.py writes its all-native conf beside the conf it is given."""
    log, run_dir = Logged(ex, "flaggems.txt"), node.repo / "build" / "flaggems-time"
    confs = [run_dir / f"backends_cuda_{name}.conf" for name in ("flaggems", "flaggems_tuned")]
    for conf in confs:
        ex.copy(node.repo / "configs" / conf.name, conf)
    return _flaggems_first(node, log, *confs)
