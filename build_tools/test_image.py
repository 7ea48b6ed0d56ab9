"""The test image step: the repaired wheel and the suites (with the tools they run) on the row's test base, no
compilers; then every image of the run is checked for leaked secrets."""

from __future__ import annotations

from functools import partial

from . import cache, context, dockercli, plan
from .flow import Flow
from .runner import Result
from .summary import ImageRef, Summary
from .wheel import Built


def make(flow: Flow, built: Built, summary: Summary) -> str:
    """Make the test image of ``built`` unless docker holds it from the same inputs; returns its tag."""
    name = built.toolchain.name
    with summary.stage("test image") as stage:
        tests_digest, dist_digest = "dry-run", "dry-run"  # a planned build has no wheel to stage yet
        if built.wheel.is_file():
            tests_digest, dist_digest = context.stage_tests(flow.repo, name, flow.matrix.build, built.wheel)
        staged = (built.staged.scripts_digest, built.staged.wheelhouse_digest, built.staged.dockerfile_digest)
        parts = (*staged, tests_digest, dist_digest, built.test_base.id, *built.torch_args)
        key = context.combine("test", built.toolchain.fingerprint(), *parts)
        tag = plan.image_tag(name, "test", key)
        stage.status = cache.image(flow, tag, key, partial(_build, flow, built, key))
        reused = stage.status == "reused"
        stage.note = "wheel, tests and toolchain unchanged" if reused else f"FROM {built.test_base.ref}"
        if stage.status == "planned":
            return tag
    summary.images["test"] = ImageRef(tag, dockercli.image_id(flow.images.client(), tag) or "?")
    flow.images.check_history([image.ref for image in summary.images.values()], built.host, summary)
    return tag


def _build(flow: Flow, built: Built, key: str) -> Result:
    """``docker build`` of the test image, with the pip.conf secret in place."""
    with built.inputs(flow, key) as inputs:
        return flow.runner.run(plan.plan_test_image(flow.images.client().exe, built.toolchain, inputs))
