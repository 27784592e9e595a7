"""Assembly stage: four variants per clip under three protocols, plus the scene-consistency set.

Per clip (paper §3.5): R = ŝ + ê, S = s_fake + ê, E = ŝ + e_fake, Q = s_fake + e_fake,
all mixed by :func:`madbench_common.media.mix.mix_components` (R too, so codec and
resampling traces are shared by every variant); S and Q share one fake speech, E and Q
one fake environment. Protocols (§4.1): ``scene_matched``, ``scene_mismatched``, and
``balanced`` (half of each split's clips matched, half mismatched); selection after QC
is :func:`select_components`; scene consistency (§5.3) is :meth:`AssembleStage._sc_rows`.
Samples that are the same mix (R and the consistent D-R/S-R samples, E and D-S) share files.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from madbench_common.benchmarks.madbench.rows import ComponentRow, SampleRow
from madbench_common.benchmarks.madbench.stages.clips import (
    ClipInputs,
    fetch_video,
    load_clip_inputs,
)
from madbench_common.benchmarks.madbench.stages.swaps import SwapClip, pick_env_donors
from madbench_common.core.compat import zip_strict
from madbench_common.core.types import Audio
from madbench_common.media.mix import Mix, fit_track, mix_components
from madbench_common.media.mux import MuxResult, remux_with_audio
from madbench_common.models.taxonomy import load_taxonomy
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["PROTOCOLS", "SC_PROTOCOL", "AssembleStage", "Selection", "render_track",
           "select_components", "track_fit"]

PROTOCOLS = ("balanced", "scene_matched", "scene_mismatched")
SC_PROTOCOL = "scene_consistency"
_SWAPS = {"D-R": "R-DR", "S-R": "R-SR"}
"""Real-environment swap conditions → their track tags."""


@dataclass
class Selection:
    """The components chosen for one clip (``None`` where nothing passed QC)."""

    clip_id: str
    speech: ComponentRow | None = None
    env_match: ComponentRow | None = None
    env_mismatch: ComponentRow | None = None
    mismatch_mode: str = ""
    balanced_mismatch: bool = False
    missing: list[str] = field(default_factory=list)


def _least_used(options: dict[str, list[ComponentRow]], usage: Counter[str],
                tie: dict[str, int], rng: np.random.Generator,
                ) -> tuple[str, ComponentRow] | None:
    """The least-used setting (seeded ties) and a seeded draw among its candidates."""
    if not options:
        return None
    setting = min(options, key=lambda s: (usage[s], tie.get(s, 0), s))
    usage[setting] += 1
    rows = options[setting]
    return setting, rows[int(rng.integers(len(rows)))]


class _Selector:
    """Greedy least-used selection inside one split."""

    def __init__(self, clips: dict[str, ClipInputs], passed: list[ComponentRow],
                 reuse_cap: int, rng: np.random.Generator) -> None:
        self.clips, self.passed, self.cap, self.rng = clips, passed, reuse_cap, rng
        settings = sorted({c.setting for c in passed})
        self.tie = {s: int(i) for s, i in zip_strict(settings, rng.permutation(len(settings)))}
        self.usage: dict[str, Counter[str]] = {k: Counter() for k in ("speech", "m", "d")}
        self.donor_use: Counter[str] = Counter()
        self.tax = load_taxonomy()

    def own(self, clip_id: str, component: str, match: bool) -> dict[str, list[ComponentRow]]:
        out: dict[str, list[ComponentRow]] = {}
        for c in self.passed:
            if c.clip_id == clip_id and c.component == component and c.scene_match == match:
                out.setdefault(c.setting, []).append(c)
        return out

    def donors(self, clip: ClipInputs) -> dict[str, list[ComponentRow]]:
        """Matched v2a/a2a tracks of incompatible scenes, same split, other clip and group."""
        assert clip.scene is not None
        bad = set(self.tax.fine[clip.scene.scene_label].mismatch)
        out: dict[str, list[ComponentRow]] = {}
        for c in self.passed:
            d = self.clips.get(c.clip_id)
            if (c.component != "env" or not c.scene_match or c.branch not in ("v2a", "a2a")
                    or d is None or c.clip_id == clip.clip_id
                    or d.source.source_group == clip.source.source_group
                    or d.split.split != clip.split.split or c.scene_label not in bad
                    or self.donor_use[c.component_id] >= self.cap):
                continue
            out.setdefault(c.setting, []).append(c)
        for rows in out.values():
            rows.sort(key=lambda c: (self.donor_use[c.component_id], c.component_id))
        return out

    def options(self, clip_id: str) -> int:
        return len(self.own(clip_id, "speech", True)) + len(self.own(clip_id, "env", True))

    def select(self, clip: ClipInputs) -> Selection:
        sel = Selection(clip.clip_id)
        picked = _least_used(self.own(clip.clip_id, "speech", True), self.usage["speech"],
                             self.tie, self.rng)
        sel.speech = picked[1] if picked else None
        picked = _least_used(self.own(clip.clip_id, "env", True), self.usage["m"], self.tie,
                             self.rng)
        sel.env_match = picked[1] if picked else None
        options = self.own(clip.clip_id, "env", False) | self.donors(clip)
        picked = _least_used(options, self.usage["d"], self.tie, self.rng)
        if picked:
            sel.env_mismatch = picked[1]
            replaced = picked[1].clip_id != clip.clip_id
            sel.mismatch_mode = "replaced" if replaced else "prompt"
            if replaced:
                self.donor_use[picked[1].component_id] += 1
        sel.missing = [name for name, c in (("speech", sel.speech), ("env", sel.env_match),
                                            ("env_mismatch", sel.env_mismatch)) if c is None]
        return sel


def select_components(clips: dict[str, ClipInputs], components: Sequence[ComponentRow],
                      reuse_cap: int, rng: np.random.Generator) -> dict[str, Selection]:
    """Per clip, the components of every variant and protocol (explicit and seeded).

    Per split, clips with the fewest QC-passed options choose first (ties: a seeded order);
    each takes the generator setting least used so far in its split (ties: a seeded order
    of settings), which balances settings (§3.5: "component selection is balanced across
    generation settings"); among several passed candidates of one setting (the four
    targets of a cross-identity setting, the mismatched prompts of a text-to-audio setting)
    a seeded draw picks one. Scene-mismatched environments are generated from another
    scene's prompt (``mismatch_mode="prompt"``) or borrowed from a clip of an incompatible
    scene in the same split, never the same clip or source group, each donor used at most
    ``reuse_cap`` times (``"replaced"``). A clip that lacks a QC-passed speech component,
    a matched or a mismatched environment leaves all protocols, so every protocol holds the
    same clips (Table 1: 5,512 = 4 × 1,378 samples per protocol).
    """
    passed = sorted((c for c in components if c.ok and c.qc_pass and c.clip_id in clips),
                    key=lambda c: c.component_id)
    out: dict[str, Selection] = {}
    for split in sorted({c.split.split for c in clips.values()}):
        ids = sorted(c for c in clips if clips[c].split.split == split)
        sel = _Selector(clips, passed, reuse_cap, rng)
        tie = {c: int(i) for c, i in zip_strict(ids, rng.permutation(len(ids)))}
        for cid in sorted(ids, key=lambda c: (sel.options(c), tie[c])):
            out[cid] = sel.select(clips[cid])
        both = sorted((c for c in ids if out[c].env_mismatch and out[c].env_match),
                      key=lambda c: tie[c])
        for k, cid in enumerate(both):
            out[cid].balanced_mismatch = k % 2 == 1
    return out


def track_fit(length: int, n: int) -> str:
    """How :func:`~madbench_common.media.mix.fit_track` brings ``length`` samples to ``n``."""
    return "exact" if length == n else ("trim" if length > n else "loop")


def render_track(video: Path, speech: Audio, env: Audio, s_hat: Audio, e_hat: Audio,
                 rate: int, out: Path, ceiling: float = 0.99, aac_coder: str = "fast",
                 channels: int = 1) -> tuple[Mix, MuxResult]:
    """Mix one variant and mux it beside ``video``'s untouched video stream into ``out``.

    The audio is 16 kHz float WAV (pre-codec); the MP4 copies the source's video packets
    and adds a new AAC track at the source's audio rate, mono like the mix unless
    ``channels`` says otherwise.

    The mix is mono, so the muxed track is mono by default (``channels=0`` keeps the
    source's channel count, duplicating the mix).
    """
    m = mix_components(speech, env, s_hat, e_hat, ceiling)
    return m, remux_with_audio(video, m.audio, rate, out, aac_coder=aac_coder,
                               channels=channels)


@dataclass(frozen=True)
class _Track:
    """One distinct mix of a clip: its files and what went into it."""

    tag: str
    mix: Mix
    audio_uri: str
    audio_sha256: str
    video_uri: str
    video_sha256: str
    mux_rate: int


class AssembleStage(StageImpl[SampleRow]):
    """QC'd ``components`` → ``samples`` (sharded by clip; selection is recomputed per shard)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        reuse_cap: int = param(2, unit="clips", paper="§3.4", doc="\"reuse is limited\": a "
                               "donor environment track serves at most this many clips")
        sc_reuse_cap: int = param(2, unit="clips", paper="§5.3", doc="the same, per "
                                  "scene-consistency condition (D-R, S-R)")
        sc_donor_rule: str = param("coarse", paper="§5.3", doc="D-R takes a donor from another "
                                   "coarse scene, S-R from the same coarse scene with another "
                                   "fine label")
        ceiling: float = param(0.99, unit="fraction of full scale", doc="peak ceiling of the "
                               "mixed track (source-relative RMS normalisation, §3.5)")
        aac_coder: str = param("fast", doc="the mux's AAC quantiser search (FFmpeg aac_coder)")
        channels: int = param(1, unit="channels", doc="audio channels of the muxed sample")

    p: Params

    @cached_property
    def clips(self) -> dict[str, ClipInputs]:
        return load_clip_inputs(self.ctx, with_scene=True)

    @cached_property
    def components(self) -> dict[str, ComponentRow]:
        return {r.component_id: r for r in self.ctx.read_input("component_qc", ComponentRow)}

    @cached_property
    def selection(self) -> dict[str, Selection]:
        return select_components(self.clips, list(self.components.values()),
                                 self.p.reuse_cap, self.ctx.rng("select"))

    @cached_property
    def env_donors(self) -> dict[str, dict[str, str]]:
        """Condition (D-R, S-R) → receiver clip → donor clip of the real ê."""
        def swap(c: ClipInputs) -> SwapClip:
            assert c.scene is not None
            return SwapClip(c.clip_id, c.split.split, c.source.source_group,
                            c.scene.scene_label, c.source.duration)
        receivers = [swap(self.clips[c]) for c, s in sorted(self.selection.items())
                     if not s.missing]
        pool = [swap(c) for _, c in sorted(self.clips.items())]
        cap, tax = self.p.sc_reuse_cap, load_taxonomy()
        rule = self.p.sc_donor_rule
        return {cond: pick_env_donors(receivers, pool, cond, tax, cap, self.ctx.rng(cond), rule)
                for cond in _SWAPS}

    def plan(self) -> list[str]:
        return sorted(self.selection)

    def run_items(self, items: Sequence[str]) -> list[SampleRow]:
        rows: list[SampleRow] = []
        for item in items:
            rows += self._assemble(self.clips[item], self.selection[item])
        return rows

    def _load(self, uri: str, sha: str) -> Audio:
        return self.ctx.load_audio(uri, sha)[0]

    def _assemble(self, clip: ClipInputs, sel: Selection) -> list[SampleRow]:
        if sel.missing or sel.speech is None or sel.env_match is None \
                or sel.env_mismatch is None:
            return [SampleRow(sample_id=f"{clip.clip_id}-X-none", clip_id=clip.clip_id,
                              variant="R", split=clip.split.split, status="rejected",
                              reason="no_qc_passed_component",
                              detail="missing: " + ", ".join(sel.missing))]
        n = round(clip.source.duration * clip.source.sample_rate)
        s_hat = self._load(clip.stem.speech_uri, clip.stem.speech_sha256)
        e_hat = self._load(clip.stem.env_uri, clip.stem.env_sha256)
        s_fake = fit_track(self._load(sel.speech.uri, sel.speech.sha256), n)
        envs: dict[str, Audio] = {}
        fits: dict[str, str] = {}
        for k, c in (("m", sel.env_match), ("d", sel.env_mismatch)):
            own = self._load(c.uri, c.sha256)
            fits[k] = track_fit(len(own), n)
            envs[k] = fit_track(own, n)
        for tag, d in self._swap_donors(clip).items():
            donor_env = self._load(d.stem.env_uri, d.stem.env_sha256)
            fits[tag] = track_fit(len(donor_env), n)
            envs[tag] = fit_track(donor_env, n)
        with self.ctx.tempdir() as tmp:
            video = fetch_video(self.ctx, clip.source, tmp)
            tracks = {"R": self._track(clip, "R", s_hat, e_hat, s_hat, e_hat, video),
                      "S": self._track(clip, "S", s_fake, e_hat, s_hat, e_hat, video)}
            for k, env in envs.items():
                if k in ("m", "d"):
                    tracks[f"E{k}"] = self._track(clip, f"E-{k}", s_hat, env, s_hat, e_hat,
                                                  video)
                    tracks[f"Q{k}"] = self._track(clip, f"Q-{k}", s_fake, env, s_hat, e_hat,
                                                  video)
                else:
                    tracks[k] = self._track(clip, k, s_hat, env, s_hat, e_hat, video)
        return self._rows(clip, sel, tracks, fits) + self._sc_rows(clip, sel, tracks, fits)

    def _swap_donors(self, clip: ClipInputs) -> dict[str, ClipInputs]:
        """Track tag → donor clip, for the swap conditions this clip has a donor in."""
        return {tag: self.clips[self.env_donors[cond][clip.clip_id]]
                for cond, tag in _SWAPS.items() if clip.clip_id in self.env_donors[cond]}

    def _track(self, clip: ClipInputs, tag: str, speech: Audio, env: Audio, s_hat: Audio,
               e_hat: Audio, video: Path) -> _Track:
        rate = clip.source.sample_rate
        out = video.parent / f"{clip.clip_id}-{tag}.mp4"
        p = self.p
        m, res = render_track(video, speech, env, s_hat, e_hat, rate, out, float(p.ceiling),
                              p.aac_coder, p.channels)
        wav = self.ctx.save_audio(f"audio/{clip.clip_id}-{tag}.wav", m.audio, rate)
        info = self.ctx.run.put_file(self.ctx.key("video", out.name), out)
        return _Track(tag, m, wav.uri, wav.sha256, info.uri, info.sha256, res.sample_rate)

    def _rows(self, clip: ClipInputs, sel: Selection, tracks: dict[str, _Track],
              fits: dict[str, str]) -> list[SampleRow]:
        rows = []
        for protocol in PROTOCOLS:
            mismatch = protocol == "scene_mismatched" or (
                protocol == "balanced" and sel.balanced_mismatch)
            env = sel.env_mismatch if mismatch else sel.env_match
            assert env is not None
            key = "d" if mismatch else "m"
            for variant in ("R", "S", "E", "Q"):
                track = tracks[variant if variant in "RS" else f"{variant}{key}"]
                row = self._row(clip, sel, protocol, variant, track,
                                env if variant in "EQ" else None, mismatch)
                if variant in "EQ":
                    row = dataclasses.replace(row, env_fit=fits[key])
                rows.append(row)
        return rows

    def _sc_rows(self, clip: ClipInputs, sel: Selection, tracks: dict[str, _Track],
                 fits: dict[str, str]) -> list[SampleRow]:
        """The scene-consistency samples of the clip (§5.3), paired per condition.

        ``D-R`` / ``S-R``: consistent = the clip's R; inconsistent = the clip's ŝ with a
        donor clip's real ê (:mod:`~madbench_common.benchmarks.madbench.stages.swaps`: D-R
        from any other coarse scene, S-R from the same coarse scene with another fine label,
        or the taxonomy's mismatch lists with ``sc_donor_rule="taxonomy"``), variant ``R``,
        the donor and its labels on the row, and how the donor ê was fitted (``env_fit``:
        ``exact``, ``trim`` or ``loop``; long-enough donors are preferred). ``D-S``:
        consistent = the clip's E with its scene-matched fake environment; inconsistent =
        its E with the scene-mismatched one (both synthetic).
        """
        rows = []
        for cond, tag in _SWAPS.items():
            if tag not in tracks:
                continue
            donor = self.clips[self.env_donors[cond][clip.clip_id]]
            rows.append(self._sc(self._row(clip, sel, SC_PROTOCOL, "R", tracks["R"], None,
                                           False), cond, True))
            swap = self._row(clip, sel, SC_PROTOCOL, "R", tracks[tag], None, True)
            swap = dataclasses.replace(self._with_donor(swap, donor), env_fit=fits[tag])
            rows.append(self._sc(swap, cond, False))
        for consistent, key, env in ((True, "m", sel.env_match), (False, "d", sel.env_mismatch)):
            row = self._row(clip, sel, SC_PROTOCOL, "E", tracks[f"E{key}"], env, not consistent)
            rows.append(self._sc(dataclasses.replace(row, env_fit=fits[key]), "D-S", consistent))
        return rows

    @staticmethod
    def _with_donor(row: SampleRow, donor: ClipInputs) -> SampleRow:
        assert donor.scene is not None
        return dataclasses.replace(
            row, env_donor_clip_id=donor.clip_id, env_donor_scene_label=donor.scene.scene_label,
            env_donor_coarse_label=donor.scene.coarse_label,
            env_scene_label=donor.scene.scene_label)

    @staticmethod
    def _sc(row: SampleRow, condition: str, consistent: bool) -> SampleRow:
        cls = "consistent" if consistent else "inconsistent"
        return dataclasses.replace(
            row, sample_id=f"{row.sample_id}-{condition}-{cls}", sc_condition=condition,
            scene_consistent=consistent)

    def _row(self, clip: ClipInputs, sel: Selection, protocol: str, variant: str,
             track: _Track, env: ComponentRow | None, mismatch: bool) -> SampleRow:
        assert clip.scene is not None and sel.speech is not None
        speech = sel.speech if variant in "SQ" else None
        fake_env = env is not None
        donor = self.clips.get(env.clip_id) if env and env.clip_id != clip.clip_id else None
        m = track.mix
        return SampleRow(
            sample_id=f"{clip.clip_id}-{variant}-{protocol}", clip_id=clip.clip_id,
            variant=variant, speech_fake=speech is not None, env_fake=fake_env,
            scene_consistent=not (fake_env and mismatch),
            speech_generator=speech.generator if speech else "",
            env_generator=env.generator if env else "",
            speech_branch=speech.branch if speech else "", env_branch=env.branch if env else "",
            protocol=protocol, split=clip.split.split, audio_uri=track.audio_uri,
            audio_sha256=track.audio_sha256, video_uri=track.video_uri,
            video_sha256=track.video_sha256, duration=len(m.audio) / clip.source.sample_rate,
            sample_rate=clip.source.sample_rate,
            scene_class="R" if not fake_env else ("D" if mismatch else "S"),
            scene_label=clip.scene.scene_label, coarse_label=clip.scene.coarse_label,
            env_scene_label=(env.prompt_label or env.scene_label) if env else
            clip.scene.scene_label,
            mismatch_mode=sel.mismatch_mode if fake_env and mismatch else "",
            env_donor_clip_id=donor.clip_id if donor else "",
            env_donor_scene_label=donor.scene.scene_label if donor and donor.scene else "",
            env_donor_coarse_label=donor.scene.coarse_label if donor and donor.scene else "",
            speech_component_id=speech.component_id if speech else "",
            env_component_id=env.component_id if env else "",
            target_clip_id=speech.target_clip_id if speech else "",
            speech_gain_db=m.speech_gain_db, env_gain_db=m.env_gain_db,
            common_gain_db=m.common_gain_db, speech_target_dbfs=m.speech_target_dbfs,
            env_target_dbfs=m.env_target_dbfs, mux_audio_codec="aac",
            mux_sample_rate=track.mux_rate,
        ).with_provenance(self.ctx.provenance("mix+pyav"))
