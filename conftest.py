"""Every pytest run of this repository: its notebooks (nbval) and its tests alike.

The kernel channels of the process wait in slices (:mod:`pipeline.kernelpoll`), so a
kernel's reply whose socket wake-up was lost is read within a second, not after the
cell's whole timeout (jupyter/nbclient#312).
"""

from pipeline.kernelpoll import install

install()

# After each notebook's cells, in nbval's kernel: its prose's saved values and the resources
# the workshop guide quotes for it are held to that run (tests/notebooks/after_the_run.py).
# Under `make test`'s --dist loadfile, the longest test files go first (tests/longest_first.py).
# No test leaves a file in the directory pytest runs from (tests/leaves_no_file.py). Every test
# of make test's later steps is in a file they collect (tests/marked_files.py).
pytest_plugins = [
    "tests.notebooks.after_the_run",
    "tests.longest_first",
    "tests.leaves_no_file",
    "tests.marked_files",
]
