"""Reading results: queueing theory, diagnostics, sweeps and capacity planning."""
