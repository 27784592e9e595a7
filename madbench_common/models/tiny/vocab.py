"""Offline tokenizer material for tiny models: byte-level BPE vocabularies and SentencePiece.

Real tokenizers are files on the hub; these build small, valid equivalents in code so a
tiny model's ``from_pretrained`` finds a tokenizer in the real layout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = [
    "T5_TOKENIZER_FILES",
    "bpe_vocab",
    "byte_unicode",
    "sentencepiece_model",
    "unigram_pieces",
    "write_bpe_files",
    "write_sentencepiece",
    "write_t5_tokenizer",
]

T5_TOKENIZER_FILES = ("spiece.model", "tokenizer.json")
"""The tokenizer files of the released T5 checkpoints (``google-t5/t5-base``, ``t5-large``):
no ``tokenizer_config.json`` or ``special_tokens_map.json`` (defaults apply)."""

CORPUS = (
    "ambient sound of a busy street with traffic and footsteps",
    "rain on a window, wind and distant thunder in a quiet room",
    "birds singing in a forest, leaves rustling, a stream of water",
    "machine hum in a factory, metal clanks and a ventilation fan",
    "no speech, no music, environmental sounds only",
)


def byte_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable-unicode table (the base of byte-level BPE)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def bpe_vocab(specials: Sequence[str], end_of_word: str = "") -> tuple[dict[str, int], list[str]]:
    """A merge-free byte-level BPE vocabulary: specials, 256 byte symbols (and their
    ``end_of_word`` forms for CLIP-style tokenizers). Every byte string tokenizes."""
    symbols = list(dict.fromkeys([*specials, *byte_unicode().values()]))
    if end_of_word:
        symbols += [s + end_of_word for s in byte_unicode().values()]
    return {s: i for i, s in enumerate(symbols)}, []


def write_bpe_files(folder: Path, vocab: dict[str, int], merges: Sequence[str]) -> None:
    """``vocab.json`` and ``merges.txt`` as slow GPT-2/Roberta/CLIP tokenizers read them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "".join(m + "\n" for m in merges))


def unigram_pieces(specials: Sequence[str] = ("<pad>", "</s>", "<unk>")) -> list[tuple[str, float]]:
    """A small Unigram vocabulary (specials, then words and letters of :data:`CORPUS`)."""
    words = sorted({w for line in CORPUS for w in line.replace(",", " ").split()})
    letters = sorted({c for line in CORPUS for c in line if c.strip()})
    pieces = [(s, 0.0) for s in specials]
    pieces += [("▁" + w, -float(i + 1)) for i, w in enumerate(words)]
    pieces += [(c, -100.0) for c in letters]
    return pieces


def write_sentencepiece(path: Path, pieces: Sequence[tuple[str, float]],
                        specials: Mapping[str, str], ids: Mapping[str, int]) -> Path:
    """Write a SentencePiece unigram model of ``pieces`` directly as a ModelProto: no
    trainer run (sentencepiece 0.1.99's trainer segfaults under pytest here), deterministic
    bytes. ``specials``: piece → ``control`` or ``unknown``; ``ids``: the trainer spec's
    ``unk_id``, ``bos_id``, ``eos_id`` and ``pad_id`` (-1: none)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    kinds = {"control": pb.ModelProto.SentencePiece.CONTROL,
             "unknown": pb.ModelProto.SentencePiece.UNKNOWN}
    model = pb.ModelProto()
    for piece, score in pieces:
        sp = model.pieces.add()
        sp.piece, sp.score = piece, score
        sp.type = kinds[specials[piece]] if piece in specials else \
            pb.ModelProto.SentencePiece.NORMAL
    spec = model.trainer_spec
    spec.model_type = pb.TrainerSpec.UNIGRAM
    spec.vocab_size = len(model.pieces)
    for name, value in ids.items():
        setattr(spec, name, value)
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = True
    model.normalizer_spec.escape_whitespaces = True
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def sentencepiece_model(path: Path) -> Path:
    """T5's ``spiece.model`` layout for :func:`unigram_pieces` (ids: pad 0, eos 1, unk 2)."""
    return write_sentencepiece(
        path, unigram_pieces(), {"<pad>": "control", "</s>": "control", "<unk>": "unknown"},
        {"pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1})


def write_t5_tokenizer(folder: Path) -> int:
    """``spiece.model`` and ``tokenizer.json`` in ``folder``, as the released T5 repos hold
    them (see :data:`T5_TOKENIZER_FILES`); returns the vocabulary size (no extra ids)."""
    from transformers import T5TokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    tok = T5TokenizerFast(vocab_file=str(sentencepiece_model(folder / "spiece.model")),
                          extra_ids=0)
    tok.save_pretrained(str(folder))
    for name in ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
        (folder / name).unlink(missing_ok=True)  # not in the release: defaults apply
    return len(tok)
