"""The machine the app runs on, measured: the hardware lesson the app's hardware panel, its tree
advice and the Learn tab read (hardware.py: the recording's files, measure, predict, lesson, quoted),
the clock helpers and probes every measurement shares (timing.py), which machine it was (info.py),
and the default tree chosen for it at start-up (tree_choice.py: the page and the command line ask it).

The app imports this package, never eagle_core/bench (the benchmark command lines, which import
it and stay out of the Space). It imports nothing from bench, and the engine imports nothing from it.
"""
from .hardware import (RECORD_COMMAND, RECORD_PRESETS, RECORDED, TAU_TABLE, lesson, load_recorded, load_tau_table,
                       measure, predict, quoted)
from .info import hardware_name, machine_info
from .timing import ForwardTiming, measure_forward, measure_head_steps, median_s
from .tree_choice import TreeChoice, choose_tree

__all__ = [
    "ForwardTiming", "RECORDED", "RECORD_COMMAND", "RECORD_PRESETS", "TAU_TABLE", "hardware_name", "lesson",
    "load_recorded", "load_tau_table", "machine_info", "measure", "measure_forward", "measure_head_steps",
    "median_s", "predict", "quoted", "TreeChoice", "choose_tree",
]
