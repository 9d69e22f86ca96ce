"""Every pytest run of this repository: its notebooks (nbval) and its tests alike.

The kernel channels of the process wait in slices (:mod:`pipeline.kernelpoll`), so a
kernel's reply whose socket wake-up was lost is read within a second, not after the
cell's whole timeout (jupyter/nbclient#312).
"""

from pipeline.kernelpoll import install

install()

# The solutions notebooks run whole, each in a kernel of its own, in
# tests/lessons/test_wrong_answers.py, which fails on a cell that raises as nbval does
# (the worked answers' test cells among them) before it tries wrong answers: nbval
# leaves them to it rather than run each twice. `pytest notebooks/solutions/X.ipynb`
# still runs one under nbval.
collect_ignore = ["notebooks/solutions"]
