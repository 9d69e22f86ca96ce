"""What drives a simulation: distributions, arrival processes, failure models and traces,
and the Scenario that binds them to a pipeline configuration.
"""
