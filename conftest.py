"""Every pytest run of this repository: its notebooks (nbval) and its tests alike.

The kernel channels of the process wait in slices (:mod:`pipeline.kernelpoll`), so a
kernel's reply whose socket wake-up was lost is read within a second, not after the
cell's whole timeout (jupyter/nbclient#312).
"""

from pipeline.kernelpoll import install

install()

# After each notebook's cells, nbval's kernel evaluates the prose's inline expressions
# once more and the values the notebook carries are held to them.
pytest_plugins = ["tests.notebooks.prose_values"]
