"""Tiny random checkpoints of the ``qc`` image's models (Whisper, ECAPA-TDNN, AST, CLAP) and of
the MossFormer2 separator in the real weights layout, for adapter tests and ``make image-test``.

Each ``install_tiny_*`` builds a small randomly initialised model from the upstream
package's own classes, saves it the way the released checkpoint is laid out, and puts
it into a weights root as a cached Hugging Face snapshot at the revision the adapter
pins. The adapters then run their real, offline loading code against it. Nothing
here is a stand-in for a trained model: outputs of these models are noise.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from madbench_common.models.weights import install_local_snapshot, tiny_layout

__all__ = ["install_tiny_ast", "install_tiny_clap", "install_tiny_ecapa",
           "install_tiny_mossformer2", "install_tiny_qc", "install_tiny_whisper"]

_MOSSFORMER2_TINY = {"encoder_embedding_dim": 32, "mossformer_sequence_dim": 32,
                     "num_mossformer_layer": 1, "encoder_kernel_size": 16, "num_spks": 2}


@tiny_layout({"alibabasglab/MossFormer2_SS_16K": ("last_best_checkpoint",
                                                  "last_best_checkpoint.pt")})
def install_tiny_mossformer2(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """A 1-layer, 32-dim ClearVoice MossFormer2_SS_16K in ClearVoice's checkpoint layout."""
    import torch
    from clearvoice.models.mossformer2_ss.mossformer2 import MossFormer2_SS_16K

    from madbench_common.models.adapters.mossformer2 import REPO, REVISION

    torch.manual_seed(seed)
    model = MossFormer2_SS_16K(argparse.Namespace(**_MOSSFORMER2_TINY)).model
    with _staging(root, REPO, REVISION) as src:
        (src / "last_best_checkpoint").write_text("last_best_checkpoint.pt\n")
        torch.save({"model": model.state_dict(), "epoch": 0},
                   src / "last_best_checkpoint.pt")
    return _snapshot_dir(root, REPO, REVISION)


@contextmanager
def _staging(root: str | os.PathLike[str], repo: str, revision: str) -> Iterator[Path]:
    """A temporary folder that becomes ``repo``'s cached snapshot at ``revision`` on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)
        install_local_snapshot(root, repo, tmp, revision=revision)


def _snapshot_dir(root: str | os.PathLike[str], repo: str, revision: str) -> Path:
    return (Path(root) / "huggingface" / "hub" / f"models--{repo.replace('/', '--')}"
            / "snapshots" / revision)


def _byte_bpe(texts: list[str], specials: list[str],
              ) -> tuple[dict[str, int], list[tuple[str, ...]]]:
    """A byte-level BPE vocabulary (~300 pieces) trained on ``texts`` with ``tokenizers``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(texts, trainer)
    merges = json.loads(bpe.to_str())["model"]["merges"]
    return bpe.get_vocab(), [tuple(m) if isinstance(m, list) else tuple(m.split(" "))
                             for m in merges]


def _release_tokenizer_files(src: Path, tok: Any, vocab: dict[str, int],
                             merges: list[tuple[str, ...]]) -> None:
    """The slow-tokenizer files the released Whisper/CLAP repos also hold, where
    ``save_pretrained`` (fast-only tokenizers) leaves them out: ``vocab.json``,
    ``merges.txt``, ``special_tokens_map.json``, ``added_tokens.json``."""
    files = {
        "vocab.json": json.dumps(vocab, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "".join(" ".join(m) + "\n" for m in merges),
        "special_tokens_map.json": json.dumps(
            {k: v for k, v in tok.special_tokens_map.items() if v}, ensure_ascii=False),
        "added_tokens.json": json.dumps(
            {t: i for t, i in tok.get_added_vocab().items() if t not in vocab},
            ensure_ascii=False),
    }
    for name, text in files.items():
        if not (src / name).exists():
            (src / name).write_text(text)


def _release_processor_files(src: Path, feature_extractor: Any) -> None:
    """The releases keep the feature extractor's settings in ``preprocessor_config.json``;
    newer transformers save a processor as ``processor_config.json`` instead."""
    (src / "processor_config.json").unlink(missing_ok=True)
    feature_extractor.save_pretrained(src)


_TEXTS = ["Is in use. I'm sorry, that number is not valid.", "Please try again later.",
          "birds singing in a forest", "rain falling on a tin roof", "busy city traffic"]


_WHISPER_FILES = ("config.json", "generation_config.json", "model.safetensors",
                  "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json",
                  "vocab.json", "merges.txt", "added_tokens.json", "special_tokens_map.json",
                  "normalizer.json")


@tiny_layout({"openai/whisper-large-v3": _WHISPER_FILES})
def install_tiny_whisper(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """A 1+1-layer, 16-dim Whisper with a byte-BPE tokenizer carrying Whisper's special,
    language and timestamp tokens, and a generation config with alignment heads (and
    ``max_length`` 48 instead of 448: a random decoder never emits end-of-text)."""
    import torch
    from transformers import (
        AddedToken,
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    from madbench_common.models.adapters.whisper import REPO, REVISION

    vocab, merges = _byte_bpe(_TEXTS, [])
    tok = WhisperTokenizer(vocab=vocab, merges=merges)
    langs = [f"<|{code}|>" for code in LANGUAGES]
    specials = ["<|startoftranscript|>", *langs, "<|translate|>", "<|transcribe|>",
                "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
    tok.add_special_tokens({"additional_special_tokens": [
        AddedToken(s, special=True, normalized=False) for s in specials]})
    tok.add_tokens([AddedToken(f"<|{i * 0.02:.2f}|>", normalized=False) for i in range(1501)])
    ids: Callable[[str], int] = tok.convert_tokens_to_ids
    eot, sot = ids("<|endoftext|>"), ids("<|startoftranscript|>")
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(WhisperConfig(
        vocab_size=len(tok), num_mel_bins=80, d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, pad_token_id=eot, bos_token_id=eot, eos_token_id=eot,
        decoder_start_token_id=sot))
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot, eos_token_id=eot, pad_token_id=eot, bos_token_id=eot,
        max_length=48, is_multilingual=True, lang_to_id={t: ids(t) for t in langs},
        task_to_id={"transcribe": ids("<|transcribe|>"), "translate": ids("<|translate|>")},
        no_timestamps_token_id=ids("<|notimestamps|>"), prev_sot_token_id=ids("<|startofprev|>"),
        max_initial_timestamp_index=50, alignment_heads=[[0, 0], [0, 1]],
        begin_suppress_tokens=[eot], suppress_tokens=[])
    with _staging(root, REPO, REVISION) as src:
        model.save_pretrained(src)
        features = WhisperFeatureExtractor(feature_size=80)
        WhisperProcessor(feature_extractor=features, tokenizer=tok).save_pretrained(src)
        _release_processor_files(src, features)
        _release_tokenizer_files(src, tok, vocab, merges)
        if not (src / "normalizer.json").exists():  # the English spelling map, a few entries
            (src / "normalizer.json").write_text(json.dumps(
                {"colour": "color", "favourite": "favorite", "centre": "center"}))
    return _snapshot_dir(root, REPO, REVISION)


_AUDIOSET_SOME = ["Speech", "Music", "Television", "Radio", "Bird", "Rain", "Traffic noise"]


@tiny_layout({"MIT/ast-finetuned-audioset-10-10-0.4593": (
    "config.json", "preprocessor_config.json", "model.safetensors")})
def install_tiny_ast(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """A 2-layer, 32-dim AST classifier over a few AudioSet label names."""
    import torch
    from transformers import ASTConfig, ASTFeatureExtractor, ASTForAudioClassification

    from madbench_common.models.adapters.ast_tagger import REPO, REVISION

    torch.manual_seed(seed)
    labels = dict(enumerate(_AUDIOSET_SOME))
    model = ASTForAudioClassification(ASTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        num_labels=len(labels), id2label=labels, label2id={v: k for k, v in labels.items()}))
    with _staging(root, REPO, REVISION) as src:
        model.save_pretrained(src)
        ASTFeatureExtractor().save_pretrained(src)
    return _snapshot_dir(root, REPO, REVISION)


_CLAP_FILES = ("config.json", "pytorch_model.bin", "preprocessor_config.json", "tokenizer.json",
               "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json")


@tiny_layout({"laion/clap-htsat-unfused": _CLAP_FILES})
def install_tiny_clap(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """An unfused CLAP (1-layer text tower, 2-stage tiny HTSAT) with a byte-BPE Roberta
    tokenizer; the audio front end keeps CLAP's 48 kHz, 64-mel, 10 s defaults."""
    import torch
    from transformers import (
        ClapConfig,
        ClapFeatureExtractor,
        ClapModel,
        ClapProcessor,
        RobertaTokenizer,
    )

    from madbench_common.models.adapters.clap import REPO, REVISION

    vocab, merges = _byte_bpe(_TEXTS, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tok = RobertaTokenizer(vocab=vocab, merges=merges)
    torch.manual_seed(seed)
    model = ClapModel(ClapConfig(
        text_config={"vocab_size": len(tok), "hidden_size": 16, "num_hidden_layers": 1,
                     "num_attention_heads": 2, "intermediate_size": 32,
                     "max_position_embeddings": 80, "projection_dim": 16},
        audio_config={"depths": [1, 1], "num_attention_heads": [2, 2], "window_size": 8,
                      "patch_embeds_hidden_size": 8, "hidden_size": 16, "projection_dim": 16,
                      "enable_fusion": False},
        projection_dim=16))
    with _staging(root, REPO, REVISION) as src:
        # the pinned revision holds pytorch_model.bin only (no safetensors)
        model.config.save_pretrained(src)
        torch.save(model.state_dict(), src / "pytorch_model.bin")
        features = ClapFeatureExtractor(truncation="rand_trunc")
        ClapProcessor(feature_extractor=features, tokenizer=tok).save_pretrained(src)
        _release_processor_files(src, features)
        _release_tokenizer_files(src, tok, vocab, merges)
        (src / "added_tokens.json").unlink(missing_ok=True)  # this repo has none
    return _snapshot_dir(root, REPO, REVISION)


_ECAPA_HPARAMS = """\
# ECAPA-TDNN speaker embeddings in the layout of speechbrain/spkrec-ecapa-voxceleb
# (tiny channels, random weights: madbench_common.models.tiny.qc)
n_mels: 80
pretrained_path: speechbrain/spkrec-ecapa-voxceleb
out_n_neurons: 4
compute_features: !new:speechbrain.lobes.features.Fbank
    n_mels: !ref <n_mels>
mean_var_norm: !new:speechbrain.processing.features.InputNormalization
    norm_type: sentence
    std_norm: False
embedding_model: !new:speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN
    input_size: !ref <n_mels>
    channels: [32, 32, 32, 32, 96]
    kernel_sizes: [5, 3, 3, 3, 1]
    dilations: [1, 2, 3, 4, 1]
    attention_channels: 16
    lin_neurons: 16
classifier: !new:speechbrain.lobes.models.ECAPA_TDNN.Classifier
    input_size: 16
    out_neurons: !ref <out_n_neurons>
mean_var_norm_emb: !new:speechbrain.processing.features.InputNormalization
    norm_type: global
    std_norm: False
modules:
    compute_features: !ref <compute_features>
    mean_var_norm: !ref <mean_var_norm>
    embedding_model: !ref <embedding_model>
    mean_var_norm_emb: !ref <mean_var_norm_emb>
    classifier: !ref <classifier>
label_encoder: !new:speechbrain.dataio.encoder.CategoricalEncoder
pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        embedding_model: !ref <embedding_model>
        mean_var_norm_emb: !ref <mean_var_norm_emb>
        classifier: !ref <classifier>
        label_encoder: !ref <label_encoder>
    paths:
        embedding_model: !ref <pretrained_path>/embedding_model.ckpt
        mean_var_norm_emb: !ref <pretrained_path>/mean_var_norm_emb.ckpt
        classifier: !ref <pretrained_path>/classifier.ckpt
        label_encoder: !ref <pretrained_path>/label_encoder.txt
"""


@tiny_layout({"speechbrain/spkrec-ecapa-voxceleb": (
    "hyperparams.yaml", "embedding_model.ckpt", "mean_var_norm_emb.ckpt", "classifier.ckpt",
    "label_encoder.txt")})
def install_tiny_ecapa(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """A 32-channel ECAPA-TDNN (16-d embeddings) saved with speechbrain's own savers."""
    import torch
    from hyperpyyaml import load_hyperpyyaml

    from madbench_common.models.adapters.ecapa import REPO, REVISION

    torch.manual_seed(seed)
    hp: dict[str, Any] = load_hyperpyyaml(_ECAPA_HPARAMS)
    with _staging(root, REPO, REVISION) as src:
        (src / "hyperparams.yaml").write_text(_ECAPA_HPARAMS)
        torch.save(hp["embedding_model"].state_dict(), src / "embedding_model.ckpt")
        torch.save(hp["classifier"].state_dict(), src / "classifier.ckpt")
        norm = hp["mean_var_norm_emb"]
        norm(torch.randn(8, 1, 16), torch.ones(8))  # global statistics from a few vectors
        norm._save(src / "mean_var_norm_emb.ckpt")
        hp["label_encoder"].update_from_iterable([f"id{i}" for i in range(4)])
        hp["label_encoder"].save(src / "label_encoder.txt")
    return _snapshot_dir(root, REPO, REVISION)


@tiny_layout({}, (), install_tiny_whisper, install_tiny_ecapa, install_tiny_ast, install_tiny_clap)
def install_tiny_qc(root: str | os.PathLike[str], seed: int = 0) -> list[Path]:
    """Every model of the ``qc`` image (Silero VAD ships in its wheel)."""
    return [install(root, seed) for install in (install_tiny_whisper, install_tiny_ecapa,
                                                install_tiny_ast, install_tiny_clap)]
