"""Fingerprints and model identities name code by its canonical, pre-move module name
(issue 22's layout): a move alone recomputes no stage, an edit still does."""

from __future__ import annotations

import json
from pathlib import Path

import madbench_common
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.identity import (
    LEGACY_MODULES,
    adapter_sources,
    canonical_name,
    canonical_source,
)

PACKAGE = Path(madbench_common.__file__).resolve().parent


def _modules() -> list[str]:
    """Every module and package of madbench_common, from its files (nothing imported)."""
    out = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_a_moved_target_keeps_its_old_name_and_others_are_unchanged() -> None:
    assert canonical_name("madbench_common.benchmarks.madbench.stages.ingest:IngestStage") == \
        "madbench_common.stages.ingest:IngestStage"
    assert canonical_name("madbench_common.models.reference.asr:ReferenceASR") == \
        "madbench_common.reference.asr:ReferenceASR"
    assert canonical_name("madbench_common.cli.deaf") == "madbench_common.deaf.cli"
    assert canonical_name("madbench_common.benchmarks.deaf.graph") == "madbench_common.deaf.graph"
    assert canonical_name("madbench_common.models.adapters.f5tts:F5TTS") == \
        "madbench_common.models.f5tts:F5TTS"
    for same in ("madbench_common.models.registry:REGISTRY", "madbench_common.pipeline.stage",
                 "madbench_common.benchmarks.madbench.stagesX", "tests.toy:Stage"):
        assert canonical_name(same) == same


def test_sources_are_hashed_with_the_old_names() -> None:
    text = ("from madbench_common.models.taxonomy import assign_label\n"
            "import madbench_common.build.images\n"
            "# see madbench_common/benchmarks/deaf/voices.py and tests/build/test_images.py\n"
            "from madbench_common.models.roles import Frames\n")
    assert canonical_source(text) == (
        "from madbench_common.taxonomy import assign_label\n"
        "import madbench_common.images\n"
        "# see madbench_common/deaf/voices.py and tests/test_images.py\n"
        "from madbench_common.models.roles import Frames\n")


def test_every_new_name_exists_and_no_two_modules_share_a_canonical_name() -> None:
    """Two modules with one canonical name would share an identity: every entry names code
    that exists, an old module name is not a module again (except ``models``, whose
    adapters moved one level down into ``models.adapters``), and canonical names are
    unique across the package."""
    modules = set(_modules())
    containers = {"madbench_common.models.adapters"}  # a prefix move into a subpackage
    for new, old in LEGACY_MODULES.items():
        data = PACKAGE / new.split(".", 1)[1].replace(".", "/")
        assert new in modules or data.is_dir(), new
        assert new in containers or old not in modules, f"{old} is a module again ({new})"
    canon = [canonical_name(m) for m in modules - containers]
    assert len(canon) == len(set(canon)), sorted(c for c in canon if canon.count(c) > 1)


def test_identities_key_sources_by_canonical_name() -> None:
    module = REGISTRY["ref-av-sync-det"].target.partition(":")[0]
    assert module.startswith("madbench_common.models.reference.")
    sources = adapter_sources(module)
    assert set(sources) >= {"madbench_common.reference.detectors",
                            "madbench_common.reference.encoders"}
    assert all(not k.startswith("madbench_common.models.reference") for k in sources)
    assert "models.reference" not in json.dumps(sources)
