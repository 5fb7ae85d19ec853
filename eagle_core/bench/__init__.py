"""Measurement tooling, kept apart from the engine it measures.

    python -m eagle_core.bench             the benchmark harness (harness.py; report.py aggregates)
    python -m eagle_core.bench.costmodel   what a cycle costs on this machine (cost_report.py presents)
    python -m eagle_core.bench.kernels     the target's matrix products, timed alone

`prompts` is the one reader of the prompt JSONL files (the benchmark and the training code
both read them through it), `journal` the resumable record of a run, `cycle_profile` a cProfile
breakdown of one cycle, `hardware` the command line that records the hardware panel's measurement.
The clock helpers every measurement shares, the forward and drafting-step probes and the hardware
lesson itself are eagle_core/machine/, which the app imports instead of this package (it stays out
of the Space). Nothing in the engine imports this package. This file imports nothing, so
`bench.prompts` stays a light leaf module.
"""
