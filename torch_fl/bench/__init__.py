"""The benchmark that ships with the wheel: ``python -m torch_fl.bench --help`` (docs/bench.md).

run.py plans the measurements, collects them and writes the reports; child.py is one measurement process;
cases.py says what is measured; report.py and plot.py turn the numbers into bench.json, bench.md and bench.png.
"""
