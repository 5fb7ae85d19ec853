"""eagle_core: a real, lossless EAGLE-1/EAGLE-2 speculative decoding engine.

    from eagle_core import load_target, load_default_head, Engine, DecodeSettings
    target = load_target()                       # embedded SmolLM2-135M-Instruct
    head, vocab, name = load_default_head(target)
    run = Engine(target, head, vocab, name).run("Hello!", DecodeSettings(method="eagle2"))
    print(run.summary.text, run.summary.tau)
"""
from .config import METHOD_LABELS, METHODS, PRESETS, DecodeSettings, preset
from .decode import Engine, Generation
from .head import EagleHead, HeadConfig, load_head, save_head
from .default_head import load_default_head, random_head
from .target import Target, from_model, load_target
from .trace import (ACCEPTED, NOT_REACHED, REJECTED, CycleRecord, DraftNode, Run, RunSummary, run_from_dict, run_from_json,
                    run_to_dict, run_to_json)

__all__ = [
    "ACCEPTED", "NOT_REACHED", "REJECTED", "CycleRecord", "DecodeSettings", "DraftNode", "EagleHead", "Engine",
    "Generation", "HeadConfig", "METHODS", "METHOD_LABELS", "PRESETS", "Run", "RunSummary", "Target", "from_model",
    "load_default_head", "load_head", "load_target", "preset", "random_head", "run_from_dict", "run_from_json", "run_to_dict", "run_to_json", "save_head",
]
