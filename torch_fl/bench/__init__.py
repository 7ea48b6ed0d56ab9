"""The node check that ships with the wheel: ``python -m torch_fl.bench --help`` (docs/bench.md).

run.py plans the seed's route A/B and confirms each arm's route; child.py is one measurement process; cases.py
says what is measured; stats.py turns the runs into ratios and the printed table.
"""
