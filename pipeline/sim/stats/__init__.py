"""Estimation helpers for simulation output: confidence intervals (:mod:`.intervals`,
Student's t in :mod:`.tdist`), run-length advice (:mod:`.runlength`) and statistics of
step functions (:mod:`.stepstats`)."""
