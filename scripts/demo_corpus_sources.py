"""What the demo corpus is made of, for ``scripts/build_demo_corpus.py``: the Debian
packages and the members unpacked from each, the recorded voices, the photographs with
their ambiences (one source group each), the clips' audio formats, and the
``ATTRIBUTION.md`` written from them (every licence and credit, and the clips using it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

AST = "usr/share/asterisk/sounds"
AST_DOC = "usr/share/doc"
TUX = "usr/share/tuxpaint/stamps"
MG = "usr/share/games/megaglest/tilesets"
STK = "usr/share/games/supertuxkart/data/sfx"
PLASMA = "usr/share/wallpapers"
MATE = "usr/share/backgrounds/mate/nature"

# package -> member globs to extract (None: whole package via ``dpkg-deb -x``).
PACKAGES: dict[str, list[str] | None] = {
    "asterisk-core-sounds-en": None,
    "asterisk-core-sounds-en-wav": None,
    "asterisk-core-sounds-es": None,
    "asterisk-core-sounds-es-wav": None,
    "asterisk-core-sounds-fr": None,
    "asterisk-core-sounds-fr-wav": None,
    "asterisk-core-sounds-it": None,
    "asterisk-core-sounds-it-wav": None,
    "asterisk-core-sounds-ru": None,
    "asterisk-core-sounds-ru-wav": None,
    "tuxpaint-stamps-default": [f"{TUX}/*", "usr/share/doc/*"],
    "megaglest-data": [f"{MG}/*/sounds/*", "usr/share/doc/*"],
    "supertuxkart-data": [f"{STK}/*", "usr/share/doc/*"],
    "plasma-workspace-wallpapers": [
        f"{PLASMA}/*/metadata.json",
        f"{PLASMA}/*/contents/images/1920x1080.jpg",
        f"{PLASMA}/*/contents/images/2560x1600.jpg",
        "usr/share/doc/*",
    ],
    "mate-backgrounds": [f"{MATE}/*", "usr/share/doc/*"],
}


@dataclass(frozen=True)
class Speaker:
    """One real recorded voice and where its prompts and transcripts live."""

    speaker_id: str
    gender: str
    name: str
    kind: str  # "asterisk" or "tuxpaint"
    package: str
    lang: str  # asterisk listing language, or Tux Paint locale code
    sound_dir: str
    listing_package: str
    license: str
    credit: str


SPEAKERS: list[Speaker] = [
    Speaker(
        "allison_smith",
        "f",
        "Allison Smith",
        "asterisk",
        "asterisk-core-sounds-en-wav",
        "en",
        f"{AST}/en_US_f_Allison",
        "asterisk-core-sounds-en",
        "CC-BY-SA-3.0",
        "Voice: Allison Smith (theivrvoice.com); Asterisk core sounds (Digium)",
    ),
    Speaker(
        "allison_smith",
        "f",
        "Allison Smith",
        "asterisk",
        "asterisk-core-sounds-es-wav",
        "es",
        f"{AST}/es_MX_f_Allison",
        "asterisk-core-sounds-es",
        "CC-BY-SA-3.0",
        "Voice: Allison Smith (theivrvoice.com); Asterisk core sounds, es-MX (Digium)",
    ),
    Speaker(
        "june_wallack",
        "f",
        "June Wallack",
        "asterisk",
        "asterisk-core-sounds-fr-wav",
        "fr",
        f"{AST}/fr_CA_f_June",
        "asterisk-core-sounds-fr",
        "CC-BY-SA-3.0",
        "Voice: June Wallack (junewallack.com); translation Clod Patry, Kristopher Lalletti; "
        "Asterisk core sounds fr-CA (Digium)",
    ),
    Speaker(
        "carlo_flora",
        "m",
        "Carlo Flora",
        "asterisk",
        "asterisk-core-sounds-it-wav",
        "it",
        f"{AST}/it_IT_m_Carlo",
        "asterisk-core-sounds-it",
        "CC-BY-3.0",
        "Voice: Carlo Flora (carloflora.com, segreterietelefoniche.it); translation Silvia "
        "Petrin; Asterisk core sounds it-IT",
    ),
    Speaker(
        "ivrvoice_ru",
        "f",
        "IvrvoiceRU female voice",
        "asterisk",
        "asterisk-core-sounds-ru-wav",
        "ru",
        f"{AST}/ru_RU_f_IvrvoiceRU",
        "asterisk-core-sounds-ru",
        "CC-BY-3.0",
        "Voice provided by Maxim Topal (ivrvoice.ru); Asterisk core sounds ru-RU",
    ),
    Speaker(
        "krasimir_petkov",
        "m",
        "Krasimir Petkov",
        "tuxpaint",
        "tuxpaint-stamps-default",
        "bg",
        TUX,
        "tuxpaint-stamps-default",
        "GPL-2+",
        "Voice: Krasimir Petkov (Bulgarian descriptive sounds); Tux Paint stamps, Bill Kendrick "
        "et al.",
    ),
    Speaker(
        "edwin_veber",
        "m",
        "Edwin Veber",
        "tuxpaint",
        "tuxpaint-stamps-default",
        "ru",
        TUX,
        "tuxpaint-stamps-default",
        "GPL-2+",
        "Voice: Edwin Veber (Russian descriptive sounds); Tux Paint stamps, Bill Kendrick et al.",
    ),
]


@dataclass(frozen=True)
class Ambience:
    """One real ambience recording."""

    package: str
    path: str
    license: str
    credit: str


@dataclass(frozen=True)
class Scene:
    """A source group: one real photograph paired with a fitting ambience recording."""

    group: str
    package: str
    image: str
    image_license: str
    image_credit: str
    caption: str
    ambience: Ambience
    n_clips: int


MG_CREDIT = "MegaGlest tileset ambience, The Glest Team / The MegaGlest Team"
SCENES: list[Scene] = [
    Scene(
        "forest_path",
        "plasma-workspace-wallpapers",
        f"{PLASMA}/Path/contents/images/1920x1080.jpg",
        "LGPL-3",
        "Photo 'Path' by Risto Saukonpää (KDE Plasma wallpapers)",
        "A narrow path through a dense conifer forest with birdsong in the trees.",
        Ambience("megaglest-data", f"{MG}/dark_forest/sounds/day.ogg", "CC-BY-SA-3.0", MG_CREDIT),
        3,
    ),
    Scene(
        "moss_forest",
        "plasma-workspace-wallpapers",
        f"{PLASMA}/OneStandsOut/contents/images/1920x1080.jpg",
        "LGPL-3",
        "Photo 'One Stands Out' by Risto Saukonpää (KDE Plasma wallpapers)",
        "Close-up of moss on a forest floor, with birds calling in the woods around.",
        Ambience("megaglest-data", f"{MG}/birch_forest/sounds/day.ogg", "CC-BY-SA-3.0", MG_CREDIT),
        3,
    ),
    Scene(
        "green_meadow",
        "mate-backgrounds",
        f"{MATE}/GreenMeadow.jpg",
        "GPL-2+",
        "Photo 'GreenMeadow' by Timothy Schellhase (MATE backgrounds)",
        "Fresh green meadow grass on a spring day with birds singing nearby.",
        Ambience(
            "megaglest-data",
            f"{MG}/spring/sounds/day.ogg",
            "CC-BY-SA-3.0",
            "MegaGlest spring daytime ambience by dobroide (forum.freegamedev.net)",
        ),
        3,
    ),
    Scene(
        "autumn_leaves",
        "plasma-workspace-wallpapers",
        f"{PLASMA}/FallenLeaf/contents/images/1920x1080.jpg",
        "LGPL-3",
        "Photo 'Fallen Leaf' by Martin Klapetek (KDE Plasma wallpapers)",
        "Fallen autumn leaves on the ground in a sunny park, with birds in the distance.",
        Ambience("megaglest-data", f"{MG}/autumn/sounds/sunny_day.ogg", "CC-BY-SA-3.0", MG_CREDIT),
        2,
    ),
    Scene(
        "rain_leaves",
        "mate-backgrounds",
        f"{MATE}/RainDrops.jpg",
        "GPL-2+",
        "Photo 'RainDrops' by blackcombwhistler07 (MATE backgrounds)",
        "Green leaves covered in raindrops during steady rainfall.",
        Ambience("megaglest-data", f"{MG}/birch_forest/sounds/rain.ogg", "CC-BY-SA-3.0", MG_CREDIT),
        3,
    ),
    Scene(
        "storm_plain",
        "mate-backgrounds",
        f"{MATE}/Storm.jpg",
        "GPL-2+",
        "Photo 'Storm' by Sergey Nazarov (MATE backgrounds)",
        "Dark storm clouds over an open plain with heavy rain falling.",
        Ambience("megaglest-data", f"{MG}/autumn/sounds/rain.ogg", "CC-BY-SA-3.0", MG_CREDIT),
        2,
    ),
    Scene(
        "dune_grass",
        "mate-backgrounds",
        f"{MATE}/Dune.jpg",
        "GPL-2+",
        "Photo 'Dune' by Marco Cogoni (MATE backgrounds)",
        "Dry dune grass by the sea bending in a strong, gusting wind.",
        Ambience("megaglest-data", f"{MG}/winter/sounds/wind.ogg", "CC-BY-SA-3.0", MG_CREDIT),
        2,
    ),
    Scene(
        "night_lake",
        "plasma-workspace-wallpapers",
        f"{PLASMA}/summer_1am/contents/images/1920x1080.jpg",
        "LGPL-3",
        "Photo 'summer 1am' by Risto Saukonpää (KDE Plasma wallpapers)",
        "A still lake under a pink midsummer night sky, with crickets chirping in the reeds.",
        Ambience(
            "megaglest-data", f"{MG}/birch_forest/sounds/night.ogg", "CC-BY-SA-3.0", MG_CREDIT
        ),
        3,
    ),
    Scene(
        "dark_shore",
        "plasma-workspace-wallpapers",
        f"{PLASMA}/DarkestHour/contents/images/1920x1080.jpg",
        "LGPL-3",
        "Photo 'Darkest Hour' by Risto Saukonpää (KDE Plasma wallpapers)",
        "A dark lakeshore before dawn, with night creatures calling from the trees.",
        Ambience("megaglest-data", f"{MG}/mediterran/sounds/night.ogg", "CC-BY-SA-3.0", MG_CREDIT),
        2,
    ),
    Scene(
        "jetty_water",
        "plasma-workspace-wallpapers",
        f"{PLASMA}/BytheWater/contents/images/1920x1080.jpg",
        "LGPL-3",
        "Photo 'By the water' by Maciej Wiklo (KDE Plasma wallpapers)",
        "A wooden jetty by the water at sunset, with water flowing and lapping below.",
        Ambience(
            "supertuxkart-data",
            f"{STK}/river_loop.ogg",
            "CC0",
            "River recording by Adam Newns (vennaudio.com), freesound #166310; SuperTuxKart",
        ),
        2,
    ),
    Scene(
        "cafe_cups",
        "plasma-workspace-wallpapers",
        f"{PLASMA}/ColorfulCups/contents/images/2560x1600.jpg",
        "LGPL-3",
        "Photo 'Colorful Cups' by Dmitri Popov (KDE Plasma wallpapers)",
        "Stacks of colourful cups in a busy cafe, with diners chatting and cutlery clinking.",
        Ambience(
            "supertuxkart-data",
            f"{STK}/lenautile_restaurant.ogg",
            "CC0",
            "Restaurant recording by Alcappuccino, freesound #263528; SuperTuxKart",
        ),
        3,
    ),
]

# (sample rate, channels, AAC bitrate) for the clip audio; drawn per clip.
AUDIO_FORMATS: list[tuple[int, int, str]] = (
    [(48000, 2, "128k")] * 12
    + [(44100, 2, "128k")] * 8
    + [(44100, 1, "80k")] * 4
    + [(48000, 1, "80k")] * 2
    + [(32000, 1, "64k")] * 2
)


@dataclass
class Prompt:
    """One recorded utterance with its transcript."""

    path: Path
    text: str
    duration: float = 0.0


@dataclass
class ClipPlan:
    """Everything needed to render one clip."""

    clip_id: str
    speaker: Speaker
    scene: Scene
    prompts: list[Prompt] = field(default_factory=list)


def write_attribution(out_dir: Path, versions: dict[str, str], plans: list[ClipPlan]) -> None:
    """Write ATTRIBUTION.md: per source package licence, authors and the clips using it."""
    by_pkg: dict[str, list[str]] = {name: [] for name in sorted(PACKAGES)}
    for p in plans:
        by_pkg[p.speaker.package].append(p.clip_id)
        by_pkg[p.speaker.listing_package].append(p.clip_id)
        by_pkg[p.scene.ambience.package].append(p.clip_id)
        by_pkg[p.scene.package].append(p.clip_id)
    lines = [
        "# Demo corpus: attribution and licences",
        "",
        "Built by `scripts/build_demo_corpus.py` from Debian packages (versions below). Every",
        "clip is a derivative work of the recordings and photograph listed for it in",
        "`sources.csv` (`license`, `attribution` columns) and is distributed under the terms",
        "of those works; share-alike terms (CC-BY-SA-3.0, GPL-2+, LGPL-3) carry over to the",
        "corresponding clip and stems. The mixing, trimming, pan and encoding are the only",
        "modifications.",
        "",
        "## Speech",
        "",
    ]
    seen: set[tuple[str, str]] = set()
    for s in SPEAKERS:
        if (s.package, s.speaker_id) in seen:
            continue
        seen.add((s.package, s.speaker_id))
        clips = sorted({p.clip_id for p in plans if p.speaker == s})
        lines.append(
            f"- **{s.name}** (`{s.speaker_id}`, {s.gender}, {s.lang}) — `{s.package}` "
            f"{versions.get(s.package, '')}, transcripts from `{s.listing_package}`; "
            f"licence {s.license}. {s.credit}. Clips: {', '.join(clips) or 'none'}."
        )
    lines += ["", "## Ambience", ""]
    amb_seen: set[str] = set()
    for sc in SCENES:
        a = sc.ambience
        if a.path in amb_seen:
            continue
        amb_seen.add(a.path)
        clips = sorted(p.clip_id for p in plans if p.scene.ambience == a)
        lines.append(
            f"- `{a.path.split('/', 4)[-1]}` — `{a.package}` {versions.get(a.package, '')}; "
            f"licence {a.license}. {a.credit}. Clips: {', '.join(clips)}."
        )
    lines += ["", "## Photographs (source groups)", ""]
    for sc in SCENES:
        clips = sorted(p.clip_id for p in plans if p.scene == sc)
        lines.append(
            f"- `{sc.group}`: `{sc.image.split('/', 3)[-1]}` — `{sc.package}` "
            f"{versions.get(sc.package, '')}; licence {sc.image_license}. {sc.image_credit}. "
            f"Clips: {', '.join(clips)}."
        )
    lines += [
        "",
        "## Packages",
        "",
        "| package | version | licence(s) of the files used | clips |",
        "| --- | --- | --- | --- |",
    ]
    pkg_lic: dict[str, set[str]] = {}
    for s in SPEAKERS:
        pkg_lic.setdefault(s.package, set()).add(s.license)
        pkg_lic.setdefault(s.listing_package, set()).add(s.license)
    for sc in SCENES:
        pkg_lic.setdefault(sc.ambience.package, set()).add(sc.ambience.license)
        pkg_lic.setdefault(sc.package, set()).add(sc.image_license)
    for name in sorted(PACKAGES):
        clips = sorted(set(by_pkg[name]))
        lines.append(
            f"| `{name}` | {versions.get(name, '')} | {', '.join(sorted(pkg_lic.get(name, [])))} "
            f"| {len(clips)} |"
        )
    lines += [
        "",
        "Full licence texts are in each package's `/usr/share/doc/<package>/copyright`.",
        "",
    ]
    (out_dir / "ATTRIBUTION.md").write_text("\n".join(lines), encoding="utf-8")
