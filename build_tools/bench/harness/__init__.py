"""The benchmark harness: ``python -m harness`` from build_tools/bench, a folder without torch_fl, so that the
installed wheel is what it measures (docs/bench.md).

It imports nothing here: worker.py's plain arms start as ``-m harness.worker`` and must not load torch_fl.
cli.py is the command line; measure.py plans the parts and collects them, on top of the installed node check
(torch_fl/bench); worker.py is one measurement process; workloads.py says what is measured beyond the seed's A/B;
lockstep.py times arms that cannot share a process; report.py, markdown.py and plot.py turn the numbers into
bench.json, bench.md and bench.png. The model cases run on their own too: llm.py, decode.py, zoo.py (the model zoo:
zoo_models.py its models, zoo_arm.py one arm's process, zoo_report.py its reports) and profdiff.py (the profile
diff, profile_ops.py one arm's side of it).
"""
