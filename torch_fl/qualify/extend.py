"""Extending an earlier report: a run that names one (``--extend REPORT``) takes its finished verdicts as they
stand and runs only what the report leaves open.

A qualification of a large provider takes longer than one lent machine's call. Events (runner.py) resume a run on
a machine that carries its run directory; a committed report is what outlives the machines. Extending it carries
each operator it finished into this run's events as one ``carried`` event holding the report's record, so the
resume logic, the workload recording and the report treat it as done, and the new report says which entries
came from where. An entry is carried when it is final and covers every dtype this run asks for (a verdict or a
reason no sample can exist); pending, untested, no-sample and timed-out operators run again, and so does one an
older run qualified in fewer dtypes (``complete`` has the rule). An entry a crash shaped runs again where this tree
sorts samples into input classes the report's run did not have: which samples were left uncalled as like the crash
depends on them (worker.py ``like_a_crash``), so a finer class can serve calls the older run could not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from .._chain import INPUT_CLASSES
from . import verdict

# Verdicts that a newer run may change without the provider changing: the generator learns to make samples,
# a warm tuning cache turns a timeout into a verdict, an interrupted run leaves operators pending.
OPEN = ("pending", verdict.UNTESTED, verdict.NO_SAMPLE, verdict.TIMEOUT)
# The input classes of the runs whose reports do not name theirs (``input_classes``, report.py).
FIRST_CLASSES = ("strided", "0dim", "broadcast")


def new_classes(base: dict) -> tuple[str, ...]:
    """The input classes this tree sorts samples into that the run of report ``base`` did not."""
    known = set(base.get("input_classes", FIRST_CLASSES))
    return tuple(c for c in INPUT_CLASSES if c not in known)


def crash_shaped(record: dict) -> bool:
    """Whether a crash decided some of an entry: its verdict, a dtype's, or a dtype's first failure."""
    dtypes = record.get("dtypes", {}).values()
    return record.get("verdict") == verdict.CRASH or any(
        verdict.CRASH in (v.get("verdict"), (v.get("failure") or {}).get("verdict")) for v in dtypes
    )


def read(path: Path, key: str) -> dict:
    """The report at ``path``, which must be of this run's key (vendor, torch line, provider and its version)."""
    try:
        base = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--extend {path}: cannot read the report ({exc})") from exc
    if not isinstance(base, dict) or not isinstance(base.get("ops"), dict):
        raise ValueError(f"--extend {path}: not a qualification report (no 'ops' table)")
    if base.get("key") != key:
        raise ValueError(
            f"--extend {path}: the report is of {base.get('key')!r}, this run is {key!r}; a report carries only into "
            "a run of the same vendor, torch line and provider version (qualify afresh without --extend)"
        )
    return base


def timed_now(record: dict) -> bool:
    """Whether an entry's timing is of this tree's method (speed.py): the device to itself, at the largest and
    the smallest sample. An entry without a timing (it failed, or ran without one) has none to renew."""
    samples = (record.get("speed") or {}).get("samples", [])
    return all(s.get("alone") and "at" in s for s in samples)


def complete(record: dict, dtypes: Sequence[str], retime: bool = False, classes_added: bool = False) -> bool:
    """Whether an entry is final for a run of ``dtypes``: a closed verdict with each dtype judged or unsampleable.
    A crash is final as it stands (the run that found it already reran the operator past it, and a crash ends the
    operator's run, so it names one dtype), and so is an operator the route resolver passes over (``unsupported``
    with no dtypes). An entry its report kept from an older run (``earlier_run``) is open, and with ``retime`` so is
    one whose timing is of an older method (``timed_now``): its operator runs again, verdict and timing. With
    ``classes_added`` (this run knows input classes the report's did not, ``new_classes``) so is one a crash
    shaped."""
    if record.get("verdict") in OPEN or "earlier_run" in record or (retime and not timed_now(record)):
        return False
    if classes_added and crash_shaped(record):
        return False
    if record["verdict"] == verdict.CRASH or (record["verdict"] == verdict.UNSUPPORTED and not record.get("dtypes")):
        return True
    judged = set(record.get("dtypes", {})) | set(record.get("no_sample", {}))
    return all(d in judged for d in dtypes)


def carried(
    base: dict,
    ops: Sequence[str],
    dtypes: Sequence[str],
    retime: bool = False,
    renew: bool = True,
    again: Sequence[str] = (),
) -> dict[str, dict]:
    """The records of ``ops`` that the base report finished for ``dtypes`` (``retime``: with a current timing).
    ``renew``: also open the entries a crash shaped where this tree has input classes the report's run had not, and
    those of ``again`` (operators named to run again, as after a change in how samples are made); without it, the
    records final as they stand (those a run cut short still writes)."""
    records, added = base["ops"], renew and bool(new_classes(base))
    reopened = set(again) if renew else set()
    return {
        op: records[op]
        for op in ops
        if op in records and op not in reopened and complete(records[op], dtypes, retime, added)
    }


def seed(events: Path, base: dict, records: dict[str, dict], done: set[str], event: str = "carried") -> int:
    """Append an ``event`` for each record whose operator is not in ``done``; returns how many. ``carried``
    finishes the operator; ``standing`` (a record --retime runs again) stands in the report only until this run
    finishes the operator, so that a run cut short still writes every route the base report allowed."""
    lines = [
        json.dumps({"event": event, "op": op, "from": base.get("torch_fl"), "record": record})
        for op, record in sorted(records.items())
        if op not in done
    ]
    if lines:
        events.parent.mkdir(parents=True, exist_ok=True)
        with open(events, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    return len(lines)
