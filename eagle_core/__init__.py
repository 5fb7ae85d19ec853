"""eagle_core: a real, lossless EAGLE speculative decoding engine (EAGLE-1, EAGLE-2 and EAGLE-3).

    from eagle_core import load_engine, DecodeSettings
    engine = load_engine()                       # embedded SmolLM2-135M-Instruct + the shipped heads
    run = engine.run("Hello!", DecodeSettings(method="eagle2"))
    print(run.summary.text, run.summary.tau)

`load_engine` loads the target and the heads; `Engine(target, head, draft_vocab, head_name,
head3, head3_name)` takes parts already loaded (load_target, load_default_head, load_default_head3).
"""
from .config import METHOD_LABELS, METHODS, PRESETS, DecodeSettings, TreeSetting, default_tree, parse_tree, preset
from .decode import Engine, Generation
from .drafting.shipped import load_default_head, load_default_head3, random_head, random_head3
from .engine_loading import load_engine
from .cpu.options import FastPath
from .drafting.head import EagleHead, HeadConfig, load_head, save_head
from .target import Target, from_model, load_target
from .trace import (ACCEPTED, NOT_REACHED, REJECTED, CycleRecord, DraftNode, Run, RunSummary, run_from_dict, run_from_json,
                    run_to_dict, run_to_json)

__all__ = [
    "ACCEPTED", "NOT_REACHED", "REJECTED", "CycleRecord", "DecodeSettings", "DraftNode", "EagleHead", "Engine", "FastPath",
    "Generation", "HeadConfig", "METHODS", "METHOD_LABELS", "PRESETS", "Run", "RunSummary", "Target", "TreeSetting",
    "default_tree", "from_model", "load_default_head", "load_default_head3", "load_engine", "load_head", "load_target",
    "parse_tree", "preset", "random_head", "random_head3", "run_from_dict", "run_from_json", "run_to_dict",
    "run_to_json", "save_head",
]
