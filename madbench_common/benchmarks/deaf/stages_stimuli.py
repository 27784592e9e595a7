"""DEAF stimulus stages: sentences, the background library, and the ESC, BSC and SIC clips.

Every clip row says whether a CPU reference made it (``reference``) or the paper's own
material did (EMIS audio, DEMAND backgrounds, the ElevenLabs voices), so reports can
label them. A clip that cannot be made (a background missing from the library, a TTS
failure) is quarantined with a reason; a missing tool or key stops the run (exit 3).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import logging
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from madbench_common.benchmarks.deaf.clip_plan import ClipSpec, plan_bsc, plan_esc, plan_sic
from madbench_common.benchmarks.deaf.datasets import is_remote
from madbench_common.benchmarks.deaf.design import SNRS_DB, VOICE_PROFILES, environment
from madbench_common.benchmarks.deaf.envlib import (
    DEFAULT_LIBRARY,
    LibraryEntry,
    library_entries,
    load_background,
    mix_at_snr,
)
from madbench_common.benchmarks.deaf.rows import EnvRow, SentenceRow, StimulusRow
from madbench_common.benchmarks.deaf.sentences import EmisClip, load_sentences, read_emis_clips
from madbench_common.core.errors import ConfigError, EnvironmentMissing, InputRejected
from madbench_common.core.types import Audio
from madbench_common.media.audio import read_wav_bytes, resample
from madbench_common.models.deaf_roles import NARRATOR
from madbench_common.models.registry import REGISTRY, model_args
from madbench_common.pipeline.failures import model_rejection
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import MapStage

__all__ = ["STAND_INS", "BscMixStage", "BscSpeechStage", "EnvLibStage", "EscStage",
           "ModelClipParams", "SentencesStage", "SicStage", "instantiate", "model_args",
           "model_class", "parse_voices", "repo_library"]

log = logging.getLogger("madbench")
_SR = 16000
_MODEL_ARGS = ("the model's constructor arguments (a mapping or its JSON; the workflow "
               "parameter of the stage's model_args)")


def model_class(slug: str) -> Any:
    """The class registered as ``slug`` (imported)."""
    try:
        spec = REGISTRY[slug]
    except KeyError:
        raise ConfigError(f"unknown model slug {slug!r}") from None
    module, _, name = spec.target.partition(":")
    return getattr(importlib.import_module(module), name)


def instantiate(slug: str, kwargs: dict[str, Any] | str | None = None) -> Any:
    """A fresh instance of the registered model ``slug`` with constructor ``kwargs`` (a
    mapping, or its JSON text as a workflow parameter passes it)."""
    return model_class(slug)(**model_args(kwargs))


def repo_library() -> str:
    """The committed offline library (package data, so images carry it), else ``""``."""
    return DEFAULT_LIBRARY if Path(DEFAULT_LIBRARY).is_dir() else ""


def _stand_ins_param() -> Any:
    """The data stages' ``stand_ins`` field (its values: :data:`STAND_INS`)."""
    return param("allow", optional=True, doc="allow: the CPU references stand in where no "
                 "paper data is named (labelled so); refuse: the preflight fails instead "
                 "(the full profile)")


class SentencesStage(MapStage[SentenceRow]):
    """The run's sentence set: committed, EMIS (``emis``) or a user CSV (``sentences``)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        sentences: str = param("", doc="a user sentence CSV replacing the committed ones")
        emis: str = param("", paper="§2.1, Appendix A.2.1", doc="the EMIS copy (a folder or "
                          "an s3:// prefix) whose sentences ESC uses; empty: the committed "
                          "stand-ins")
        per_stratum: int = param(0, unit="sentences", doc="sentences kept per stratum "
                                 "(0: all)")
        stand_ins: str = _stand_ins_param()

    p: Params

    @staticmethod
    def preflight(params: Mapping[str, Any]) -> list[str]:
        """The sentence CSV and the EMIS copy named exist (a local one; s3:// is read later);
        with ``stand_ins=refuse`` (the cluster profile) an EMIS copy is named: the committed
        ESC sentences are a stand-in for EMIS's (DEAF §2.1, Appendix A.2.1)."""
        out = []
        if params.get("sentences") and not Path(str(params["sentences"])).is_file():
            out.append(f"sentences CSV {params['sentences']}: no such file")
        out += _stand_in_problem(params)
        if _refuses_stand_ins(params) and not params.get("emis"):
            out.append("no EMIS copy (emis=''): the ESC sentences would fall back to the "
                       "committed stand-ins; " + _DATA_HINT)
        return out + _emis_problem(params)

    def plan(self) -> list[str]:
        _refuse_in_pods(self.preflight, self.ctx.params)
        return sorted(self.sentences)

    @cached_property
    def sentences(self) -> dict[str, SentenceRow]:
        p = self.p
        loaded = load_sentences(p.sentences, p.emis, p.per_stratum)
        source = {"esc": "emis" if p.emis else "committed"}
        user = {s.conflict for s in load_sentences(p.sentences)} if p.sentences else set()
        return {s.sentence_id: SentenceRow(
            **dataclasses.asdict(s),
            source="user" if s.conflict in user else source.get(s.conflict, "committed"))
            for s in loaded}

    def run_item(self, item: str) -> SentenceRow:
        return self.sentences[item].with_provenance(self.ctx.provenance())

    def rejected_row(self, item: str, exc: InputRejected) -> SentenceRow:
        raise AssertionError("sentences are validated when loaded")


class EnvLibStage(MapStage[EnvRow]):
    """The run's BSC backgrounds: DEMAND (``demand``) or the offline library (``library``)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        library: str = param("", doc="an offline background library (a folder with "
                             "envlib.csv); empty: the committed one")
        demand: str = param("", paper="§2.1, Appendix A.2.2", doc="the DEMAND copy (a folder "
                            "or an s3:// prefix) BSC mixes")
        seconds: float = param(20.0, unit="s", doc="longest stretch of each background "
                               "kept (clips are mixed over it)")
        stand_ins: str = _stand_ins_param()

    p: Params

    @staticmethod
    def preflight(params: Mapping[str, Any]) -> list[str]:
        """A background library exists: the DEMAND folder named, or the offline library —
        which, with ``stand_ins=refuse`` (the cluster profile), is refused: DEAF mixes
        DEMAND (§2.1 BSC, Appendix A.2.2 Table 6); the Debian library is a stand-in."""
        demand, library = str(params.get("demand") or ""), params.get("library") or \
            repo_library()
        if problems := _stand_in_problem(params):
            return problems
        if demand and not is_remote(demand) and not Path(demand).is_dir():
            return [f"DEMAND folder {demand}: not found" +
                    (f"; {_DATA_HINT}" if _refuses_stand_ins(params) else "")]
        if not demand and _refuses_stand_ins(params):
            return ["no DEMAND copy (demand=''): the backgrounds would fall back to the "
                    "embedded stand-in library (madbench_common/data/deaf_envlib); "
                    + _DATA_HINT]
        if not demand and not library:
            return ["no background library: pass library=<folder with envlib.csv> or "
                    "demand=<DEMAND folder or s3:// prefix>"]
        return []

    @cached_property
    def entries(self) -> dict[str, LibraryEntry]:
        p = self.p
        library = p.library or repo_library()
        if not library and not p.demand:
            raise ConfigError("no background library: pass library=<folder with envlib.csv> "
                              "(madbench_common/data/deaf_envlib is missing from this install) or "
                              "demand=<DEMAND folder>")
        return {e.env.code: e for e in library_entries(library, p.demand)}

    def plan(self) -> list[str]:
        _refuse_in_pods(self.preflight, self.ctx.params)
        return sorted(self.entries)

    def _row(self, e: LibraryEntry, **kw: Any) -> EnvRow:
        return EnvRow(code=e.env.code, category=e.env.category, name=e.env.name,
                      source=e.source, quality=e.quality, files=e.files, licence=e.licence,
                      attribution=e.attribution, **kw)

    def run_item(self, item: str) -> EnvRow:
        e = self.entries[item]
        if not e.path:
            raise InputRejected(item, "environment_missing",
                                f"no {e.env.name} recording in the {e.source} library")
        audio = load_background(e, _SR, float(self.p.seconds))
        info = self.ctx.save_audio(f"envlib/{item}.wav", audio, _SR)
        return self._row(e, audio_uri=info.uri, audio_sha256=info.sha256,
                         duration=len(audio) / _SR, sample_rate=_SR).with_provenance(
            self.ctx.provenance())

    def rejected_row(self, item: str, exc: InputRejected) -> EnvRow:
        return self._row(self.entries[item], status="rejected", reason=exc.reason,
                         detail=exc.detail).with_provenance(self.ctx.provenance())


@dataclass(frozen=True)
class ModelClipParams(StageParams):
    """The parameters of a stage whose clips a model makes."""

    model_args: dict[str, Any] | str = param({}, doc=_MODEL_ARGS)


class _ClipStage(MapStage[StimulusRow]):
    """Shared plumbing: planned clips of this stage, a model, audio saving, quarantine."""

    reference = True


    @cached_property
    def sentence_rows(self) -> list[SentenceRow]:
        return [r for r in self.ctx.read_input("deaf_sentences", SentenceRow) if r.ok]

    @cached_property
    def specs(self) -> dict[str, ClipSpec]:
        return {c.stimulus_id: c for c in self.plan_specs(self.sentence_rows)}

    @cached_property
    def model(self) -> Any:
        p = self.p
        args = p.model_args if isinstance(p, ModelClipParams) else {}
        return instantiate(p.model or self.ctx.stage.model, args or {})

    def plan_specs(self, sentences: Sequence[Any]) -> list[ClipSpec]:
        raise NotImplementedError

    def render(self, spec: ClipSpec) -> Audio:
        raise NotImplementedError

    def plan(self) -> list[str]:
        return sorted(self.specs)

    def _base(self, spec: ClipSpec) -> dict[str, Any]:
        return {k: getattr(spec, k) for k in (
            "stimulus_id", "conflict", "sentence_id", "subdim", "condition", "text", "semantic",
            "acoustic", "matched", "setting", "pairing", "snr_db")}

    def run_item(self, item: str) -> StimulusRow:
        spec = self.specs[item]
        try:
            audio = self.render(spec)
        except (ValueError, RuntimeError, subprocess.SubprocessError) as exc:
            # a TTS tool refusing a text is a data error; a device or code fault is not
            raise model_rejection(exc, item, "generation_failed",
                                  data_errors=(subprocess.SubprocessError,)) from None
        info = self.ctx.save_audio(f"{spec.conflict}/{item}.wav", audio, _SR)
        slug, version = self.provenance_model()
        return StimulusRow(**self._base(spec), reference=self.reference, audio_uri=info.uri,
                           audio_sha256=info.sha256, duration=len(audio) / _SR,
                           sample_rate=_SR).with_provenance(self.ctx.provenance(slug, version))

    def provenance_model(self) -> tuple[str, str]:
        return str(self.model.slug), str(self.model.version)

    def rejected_row(self, item: str, exc: InputRejected) -> StimulusRow:
        return StimulusRow(**self._base(self.specs[item]), status="rejected", reason=exc.reason,
                           detail=exc.detail).with_provenance(self.ctx.provenance())


class EscStage(_ClipStage):
    """ESC clips of one TTS setting: EMIS's own clips when ``emis`` is set (a folder or an
    ``s3://`` prefix), else synthesised by the stage's ``emotional_tts`` model — the CPU
    reference by default, or any registered model put in the slot (``model``,
    ``model_args``; workflow parameters ``esc_tts_<s>_model``, ``_image``,
    ``_model_args``)."""

    @dataclass(frozen=True)
    class Params(ModelClipParams):
        setting: str = param("a", paper="§2.1", doc="the ESC TTS setting (a, b, c: EMIS's "
                             "three TTS systems in sorted order)")
        emis: str = param("", paper="§2.1, Appendix A.2.1", doc="the EMIS copy whose clips "
                          "this setting takes; empty: the slot's model synthesises")
        model: str = param("", doc="registry slug of the emotional_tts model in the slot")
        stand_ins: str = _stand_ins_param()

    p: Params

    @staticmethod
    def preflight(params: Mapping[str, Any]) -> list[str]:
        """The EMIS copy named exists; with ``stand_ins=refuse`` (the cluster profile), the
        clips come from EMIS (DEAF §2.1 ESC, Appendix A.2.1) or from a slotted model that is
        not a CPU reference: the WORLD-prosody reference is a stand-in."""
        out = _stand_in_problem(params)
        slug = str(params.get("model") or "")
        spec = REGISTRY.get(slug)
        if _refuses_stand_ins(params) and not params.get("emis") and (
                spec is None or spec.reference):
            what = "is a CPU reference" if spec is not None else "is no registered model"
            out.append(f"no EMIS copy (emis='') and {slug or 'the model'} in the emotional-TTS "
                       f"slot {what}: the clips would be stand-ins; " + _DATA_HINT +
                       ", or put a registered emotional_tts model in the slot")
        return out + _emis_problem(params)

    def plan(self) -> list[str]:
        _refuse_in_pods(self.preflight, self.ctx.params)
        return super().plan()

    @staticmethod
    def preflight_models(params: Mapping[str, Any]) -> list[str]:
        """EMIS clips need no model; otherwise the stage's model synthesises."""
        return [] if params.get("emis") else [str(params["model"])]

    @property
    def setting(self) -> str:
        return self.p.setting

    @cached_property
    def emis(self) -> dict[tuple[str, str], EmisClip]:
        """EMIS clips of this setting: TTS systems in sorted order are settings a, b, c."""
        clips = read_emis_clips(self.p.emis)
        systems = sorted({c.tts for c in clips})
        index = "abc".index(self.setting)
        if index >= len(systems):
            raise ConfigError(f"EMIS copy has TTS systems {systems}; none for setting "
                              f"{self.setting!r}")
        return {(c.sentence_id, c.audio_emotion): c for c in clips if c.tts == systems[index]}

    @property
    def reference(self) -> bool:  # type: ignore[override]
        """EMIS clips are the paper's; a model in the slot says whether it is a reference."""
        return not self.p.emis and bool(getattr(self.model, "reference", True))

    def plan_specs(self, sentences: Sequence[Any]) -> list[ClipSpec]:
        return plan_esc(sentences, self.setting)

    def provenance_model(self) -> tuple[str, str]:
        return ("emis", "zenodo-19207001") if self.p.emis \
            else super().provenance_model()

    def render(self, spec: ClipSpec) -> Audio:
        if self.p.emis:
            clip = self.emis.get((spec.sentence_id, spec.acoustic))
            if clip is None:
                raise InputRejected(spec.stimulus_id, "emis_clip_missing",
                                    f"{spec.sentence_id} {spec.acoustic}")
            audio, sr = read_wav_bytes(clip.read())
            return resample(audio, sr, _SR)
        return self.model.synthesise(spec.text, spec.acoustic, _SR,
                                     seed=int(self.ctx.rng(spec.stimulus_id).integers(2**31)))


class BscSpeechStage(_ClipStage):
    """BSC speech before mixing: every BSC sentence in the one narrator voice."""

    @dataclass(frozen=True)
    class Params(ModelClipParams):
        model_args: dict[str, Any] | str = param({}, paper="§2.1", doc=_MODEL_ARGS + " (Azure: "
                                                 "region, the narrator's voice)")

    p: Params

    def plan_specs(self, sentences: Sequence[Any]) -> list[ClipSpec]:
        return [ClipSpec(f"bscsp-{s.sentence_id}", "bsc", s.sentence_id, "", s.condition, s.text,
                         s.label, NARRATOR, False) for s in sentences if s.conflict == "bsc"]

    @property
    def reference(self) -> bool:  # type: ignore[override]
        return bool(self.model.reference)

    def render(self, spec: ClipSpec) -> Audio:
        return self.model.synthesise(spec.text, NARRATOR, _SR)


def _emis_problem(params: Mapping[str, Any]) -> list[str]:
    emis = str(params.get("emis") or "")
    if emis and not is_remote(emis) and not Path(emis).is_dir():
        return [f"EMIS copy {emis}: no such folder" +
                (f"; {_DATA_HINT}" if _refuses_stand_ins(params) else "")]
    return []


STAND_INS = ("allow", "refuse")
"""Values of the data stages' ``stand_ins`` parameter: ``allow`` (the embedded default: the
CPU references stand in where no EMIS/DEMAND copy is named) or ``refuse`` (the ``full``
profile, i.e. ``workflows/deaf.yaml``: such a stage fails its preflight instead)."""
_DATA_HINT = ("fill the data volume with `argo submit workflows/data.yaml` (DEMAND and "
              "EMIS at /data/demand, /data/emis), name another copy (a folder or an s3:// "
              "prefix), or pass stand_ins=allow to run on the stand-ins (labelled so)")


def _stand_in_problem(params: Mapping[str, Any]) -> list[str]:
    value = str(params.get("stand_ins") or "allow")
    return [] if value in STAND_INS else [
        f"stand_ins={value!r}: expected one of {', '.join(STAND_INS)}"]


def _refuses_stand_ins(params: Mapping[str, Any]) -> bool:
    return str(params.get("stand_ins") or "allow") == "refuse"


def _refuse_in_pods(preflight: Any, params: Mapping[str, Any]) -> None:
    """A pod runs no run-wide preflight: the data stages check their own before planning,
    so a cluster stage that would fall back to a stand-in fails (exit 3) instead."""
    if problems := preflight(params):
        raise EnvironmentMissing("; ".join(problems))


def parse_voices(value: Any) -> dict[str, str]:
    """``voices`` (profile → voice id) from a mapping or its JSON text (``""``: none)."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"voices: not JSON ({exc}); expected "
                              '{"young_male": "<voice id>", ...}') from None
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()):
        raise ConfigError(f"voices: expected a JSON object of profile → voice id, got {value!r}")
    unknown = set(value) - {p.name for p in VOICE_PROFILES}
    if unknown:
        raise ConfigError(f"voices: unknown profiles {sorted(unknown)}; profiles: "
                          f"{', '.join(p.name for p in VOICE_PROFILES)}")
    return dict(value)


class SicStage(_ClipStage):
    """SIC clips: each sentence in the voice profiles its sub-dimension calls for.

    ``voices`` (a JSON object, profile → voice id: the workflow parameter
    ``sic_tts_voices``) reaches a model that takes ``voices`` (ElevenLabs); a model that
    picks its own voices (the CPU reference) ignores it, with a log line.
    """

    @dataclass(frozen=True)
    class Params(ModelClipParams):
        voices: dict[str, str] | str = param("", paper="§2.1", doc="profile → voice id (a "
                                             "mapping or its JSON) for a model that takes "
                                             "voices (ElevenLabs); empty: none")

    p: Params

    @cached_property
    def model(self) -> Any:
        slug = self.p.model or self.ctx.stage.model
        kwargs = model_args(self.p.model_args)
        voices = parse_voices(self.p.voices)
        if voices and "voices" not in kwargs:
            if "voices" in inspect.signature(model_class(slug)).parameters:
                kwargs["voices"] = voices
            else:
                log.info("sic_tts: %s chooses its own voices; voices= is not used", slug)
        return instantiate(slug, kwargs)

    def plan_specs(self, sentences: Sequence[Any]) -> list[ClipSpec]:
        return plan_sic(sentences)

    @property
    def reference(self) -> bool:  # type: ignore[override]
        return bool(self.model.reference)

    def render(self, spec: ClipSpec) -> Audio:
        return self.model.synthesise(spec.text, spec.acoustic, _SR,
                                     seed=int(self.ctx.rng(spec.stimulus_id).integers(2**31)))


class BscMixStage(_ClipStage):
    """BSC clips: narrator speech over its Matched / Within / Cross backgrounds at each SNR."""

    @dataclass(frozen=True)
    class Params(StageParams):
        snrs: list[int] = param(list(SNRS_DB), unit="dB", paper="§2.1, Appendix A.2.2",
                                doc="the five SNR levels speech is mixed at")
        pairing_seed: int = param(0, doc="seed of the background pairing")

    p: Params

    @cached_property
    def speech(self) -> dict[str, StimulusRow]:
        return {r.sentence_id: r for r in self.ctx.read_input("bsc_speech", StimulusRow) if r.ok}

    @cached_property
    def backgrounds(self) -> dict[str, EnvRow]:
        return {r.code: r for r in self.ctx.read_input("deaf_envlib", EnvRow)}

    @cached_property
    def bg_audio(self) -> dict[str, Audio]:
        return {}

    def plan_specs(self, sentences: Sequence[Any]) -> list[ClipSpec]:
        return plan_bsc(sentences, [int(s) for s in self.p.snrs], self.p.pairing_seed)

    def provenance_model(self) -> tuple[str, str]:
        return "mix", "1"

    @property
    def reference(self) -> bool:  # type: ignore[override]
        demand = all(r.source == "demand" for r in self.backgrounds.values() if r.ok)
        speech = all(not r.reference for r in self.speech.values())
        return not (demand and speech)

    def _background(self, code: str) -> Audio:
        row = self.backgrounds.get(code)
        if row is None or not row.ok:
            raise InputRejected(code, "environment_missing",
                                f"{environment(code).name}: not in the background library")
        if code not in self.bg_audio:
            self.bg_audio[code] = self.ctx.load_audio(row.audio_uri, row.audio_sha256)[0]
        return self.bg_audio[code]

    def render(self, spec: ClipSpec) -> Audio:
        speech_row = self.speech.get(spec.sentence_id)
        if speech_row is None:
            raise InputRejected(spec.stimulus_id, "speech_missing", spec.sentence_id)
        try:
            background = self._background(spec.acoustic)
        except InputRejected as exc:
            raise InputRejected(spec.stimulus_id, exc.reason, exc.detail) from None
        speech, _ = self.ctx.load_audio(speech_row.audio_uri, speech_row.audio_sha256)
        return mix_at_snr(speech, background, spec.snr_db, _SR, self.ctx.rng(spec.stimulus_id))
