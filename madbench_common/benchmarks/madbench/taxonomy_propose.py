"""Draft a scene taxonomy from captions, for a person to review (paper §3.4, taxonomy construction).

The paper built its taxonomy from Qwen2.5-VL descriptions of the **training and
validation** clips only, then refined it by LLM-assisted review and manual verification.
This module does the automatic first step (:func:`propose_taxonomy`): it clusters captions
into fine scenes and the fine scenes into coarse ones, and writes a draft in the format of
``madbench_common/models/data/taxonomy.json`` plus a Markdown review sheet. The committed
taxonomy stays the default; a reviewed draft is used only when a person commits it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from madbench_common.core.compat import zip_strict
from madbench_common.core.errors import ConfigError
from madbench_common.core.safetext import formula_safe, md_text
from madbench_common.models.taxonomy import (
    Taxonomy,
    assign_label,
    find_sounds,
    load_taxonomy,
)

__all__ = ["DraftTaxonomy", "captions_for_taxonomy", "propose_taxonomy", "review_sheet",
           "write_draft"]

_SPLITS = ("train", "val")


@dataclass(frozen=True)
class DraftTaxonomy:
    """The draft document (taxonomy.json layout plus review fields) and its inputs' size."""

    doc: dict[str, Any]
    n_captions: int


def _vectors(captions: Sequence[str]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.str_]]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(stop_words="english", ngram_range=(1, 2), sublinear_tf=True,
                          token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b")
    matrix = vec.fit_transform(captions).toarray()
    return matrix, vec.get_feature_names_out()


def _cluster(x: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.int64]:
    from sklearn.cluster import AgglomerativeClustering

    if k >= len(x):
        return np.arange(len(x))
    model = AgglomerativeClustering(n_clusters=k, metric="cosine", linkage="average")
    return np.asarray(model.fit_predict(x + 1e-12), dtype=np.int64)


def _unit(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.asarray(x / np.maximum(norm, 1e-12))


def _name(centroid: npt.NDArray[np.float64], terms: npt.NDArray[np.str_], taken: set[str],
          top: int = 2) -> str:
    words = [str(terms[i]) for i in np.argsort(-centroid)
             if centroid[i] > 0 and " " not in str(terms[i])][:top]
    base = "_".join(words) or "scene"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _sounds(captions: Sequence[str], tax: Taxonomy) -> list[str]:
    counts = Counter(s for c in captions for s in find_sounds(c, tax))
    return [s for s, _ in counts.most_common()]


def propose_taxonomy(captions: Sequence[str], *, fine: int = 63, coarse: int = 10,
                     max_mismatch_similarity: float = 0.05,
                     taxonomy: Taxonomy | None = None) -> DraftTaxonomy:
    """Cluster ``captions`` into a draft fine/coarse taxonomy.

    Defaults the paper does not fix: TF-IDF of each caption (English stop words removed,
    words and word pairs, sublinear term frequency); fine clusters by average-link
    agglomerative clustering on cosine distance (``fine``, 63 by default as in the paper);
    coarse clusters by the same clustering of the fine centroids (``coarse``, 10). Each
    cluster is named by its two heaviest centroid words; its expected sounds are the
    taxonomy's sound-vocabulary entries its captions mention (most frequent first); every
    label excludes speech, singing, music and media playback; proposed mismatches are the
    fine clusters of *other* coarse clusters whose centroid cosine similarity is below
    ``max_mismatch_similarity`` (symmetric by construction). Each draft label also carries
    its size, three example captions and the committed label most of its captions get.
    """
    texts = [" ".join(c.split()) for c in captions if c and c.strip()]
    if len(texts) < 2:
        raise ConfigError(f"taxonomy propose needs at least 2 captions, got {len(texts)}")
    tax = taxonomy or load_taxonomy()
    x, terms = _vectors(texts)
    fine_of = _cluster(_unit(x), fine)
    ids = sorted(set(fine_of.tolist()))
    cent = np.stack([x[fine_of == i].mean(axis=0) for i in ids])
    coarse_of = _cluster(_unit(cent), min(coarse, len(ids)))
    taken: set[str] = set()
    coarse_names = {c: _name(cent[coarse_of == c].mean(axis=0), terms, taken, top=1)
                    for c in sorted(set(coarse_of.tolist()))}
    fine_names = [_name(cent[j], terms, taken) for j in range(len(ids))]
    sim = _unit(cent) @ _unit(cent).T
    fine_docs = []
    for j, i in enumerate(ids):
        members = [t for t, f in zip_strict(texts, fine_of) if f == i]
        mismatch = [fine_names[k] for k in range(len(ids))
                    if coarse_of[k] != coarse_of[j] and sim[j, k] < max_mismatch_similarity]
        committed = Counter(assign_label(m, tax) for m in members).most_common(1)[0][0]
        fine_docs.append({
            "name": fine_names[j], "coarse": coarse_names[int(coarse_of[j])],
            "keywords": [str(terms[t]) for t in np.argsort(-cent[j])[:6] if cent[j, t] > 0],
            "expected_sounds": _sounds(members, tax), "excluded": list(tax.always_excluded),
            "mismatch": mismatch, "n_captions": len(members),
            "examples": list(dict.fromkeys(members))[:3],
            "closest_committed_label": committed})
    coarse_docs = [{"name": name, "domain": "", "description": "", "keywords": [],
                    "n_fine": int(np.sum(coarse_of == c))} for c, name in coarse_names.items()]
    doc = {"version": "draft", "draft": True, "always_excluded": list(tax.always_excluded),
           "fallback_label": fine_names[int(np.argmax([np.sum(fine_of == i) for i in ids]))],
           "coarse": coarse_docs, "sounds": [{"name": s.name, "aliases": list(s.aliases)}
                                             for s in tax.sounds.values()],
           "fine": fine_docs}
    return DraftTaxonomy(doc, len(texts))


def review_sheet(draft: DraftTaxonomy) -> str:
    """Markdown for the reviewer: coarse groups, fine labels, sounds, examples, mismatches.
    Examples are captions (input text): each is Markdown- and HTML-escaped on one line
    (:func:`md_text`), and one that a spreadsheet would run as a formula starts with ``'``."""
    e = md_text
    lines = [f"# Draft scene taxonomy ({draft.n_captions} captions)", "",
             "Review before use: rename labels, merge or split clusters, fill coarse domains "
             "and descriptions, add missing scenes, and validate every mismatch relation "
             "(paper §3.4). The committed taxonomy stays the default.", ""]
    for c in draft.doc["coarse"]:
        lines += [f"## {e(c['name'])} ({c['n_fine']} fine)", ""]
        for f in (f for f in draft.doc["fine"] if f["coarse"] == c["name"]):
            lines += [f"### {e(f['name'])} — {f['n_captions']} captions "
                      f"(closest committed label: `{e(f['closest_committed_label'])}`)",
                      f"- keywords: {e(', '.join(f['keywords'])) or '—'}",
                      f"- expected sounds: {e(', '.join(f['expected_sounds'])) or '—'}",
                      f"- proposed mismatches: {len(f['mismatch'])}",
                      *[f"- example: {e(formula_safe(x))}" for x in f["examples"]], ""]
    return "\n".join(lines)


def write_draft(draft: DraftTaxonomy, out: Path) -> tuple[Path, Path]:
    """``<out>.json`` (the draft document) and ``<out>.md`` (the review sheet)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    js, md = out.with_suffix(".json"), out.with_suffix(".md")
    js.write_text(json.dumps(draft.doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md.write_text(review_sheet(draft) + "\n", encoding="utf-8")
    return js, md


def captions_for_taxonomy(rows: Sequence[dict[str, Any]],
                          splits: Sequence[str] = _SPLITS) -> list[str]:
    """Captions of the rows in ``splits`` (the paper uses train and val only)."""
    return [str(r.get("caption", "")) for r in rows
            if str(r.get("split", "")) in splits and str(r.get("caption", "")).strip()]
