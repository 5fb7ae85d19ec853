"""Readable labels for byte-level tokens. A Chinese character is 3 UTF-8 bytes, often split over
tokens, and decoding one such token alone gives "\ufffd". The app records the bytes of a split
character in the token's text as <0xE4> (after the timed run, from the tokenizer's vocabulary);
viz merges them back into characters. Nothing here imports gradio or torch.
"""
from __future__ import annotations

from dataclasses import replace

BYTE_TOKEN = "<0x{:02X}>"  # how a byte of an incomplete UTF-8 character is written in a token's text


def _byte_decoder() -> dict[str, int]:
    """The byte-level BPE alphabet (GPT-2 style): printable bytes stand for themselves, the rest
    were shifted to code points from 256 on so that every byte has a visible character."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTE_DECODER = _byte_decoder()


def token_bytes(tokenizer, token_id: int) -> bytes | None:
    """The raw bytes of one token of a byte-level BPE vocabulary (None if it is not one)."""
    piece = tokenizer.convert_ids_to_tokens(int(token_id))
    if not isinstance(piece, str):
        return None
    if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:  # SentencePiece byte fallback
        return bytes.fromhex(piece[3:5])
    if all(ch in BYTE_DECODER for ch in piece):
        return bytes(BYTE_DECODER[ch] for ch in piece)
    return None


def readable_text(tokenizer, token_id: int, text: str) -> str:
    """A token's text with the bytes of a split UTF-8 character kept, written as <0xE4>, instead
    of the "\ufffd" a single-token decode gives (viz merges them back into characters)."""
    if "\ufffd" not in text:
        return text
    raw = token_bytes(tokenizer, token_id)
    if raw is None:
        return text
    decoded = raw.decode("utf-8", errors="surrogateescape")
    return "".join(BYTE_TOKEN.format(ord(ch) - 0xDC00) if 0xDC80 <= ord(ch) <= 0xDCFF else ch for ch in decoded)


def readable_cycle(cycle, tokenizer):
    if "\ufffd" not in cycle.bonus_text and not any("\ufffd" in n.text for n in cycle.nodes):
        return cycle
    nodes = tuple(replace(n, text=readable_text(tokenizer, n.token_id, n.text)) for n in cycle.nodes)
    return replace(cycle, nodes=nodes, bonus_text=readable_text(tokenizer, cycle.bonus_token_id, cycle.bonus_text))


def readable_run(run, tokenizer):
    """The run with byte-level token texts made readable (see `readable_text`)."""
    if run is None or not hasattr(tokenizer, "convert_ids_to_tokens"):
        return run
    first = run.first_token_text
    if run.first_token_id is not None and first:
        first = readable_text(tokenizer, run.first_token_id, first)
    return replace(run, cycles=tuple(readable_cycle(c, tokenizer) for c in run.cycles), first_token_text=first)
