"""Running a scenario: the asyncio engine on the virtual clock and its exact kernel,
the recorder, and the results they both produce.
"""
