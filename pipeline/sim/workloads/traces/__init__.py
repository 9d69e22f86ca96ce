"""Traces: a recorded workload replayed (:mod:`.replay`), the one reader of trace CSV
files (:mod:`.reader`), and a real run's recording for calibrating its twin (:mod:`.runtrace`)."""
