"""The report's prompt table: every zero-shot prompt the omni rows were answered with.

Paper §4.2 and §5.1–5.3 name the prompts (P_bin, P_4way, P_comp, P_SC) without printing
them; MADBench writes its own (:mod:`madbench_common.benchmarks.madbench.prompts`), so the report
prints
each one the rows name by hash — its text, answer format and options — next to the
parse rates. A hash that no packaged prompt has (a prompt file given by path) is listed
as such, so a reader knows the text is not in the package.
"""

from __future__ import annotations

from madbench_common.benchmarks.madbench.eval.suite import EvalResult
from madbench_common.benchmarks.madbench.eval.tables import Table
from madbench_common.benchmarks.madbench.prompts import Question, packaged_prompts

__all__ = ["prompt_table"]


def _used_hashes(results: list[EvalResult]) -> list[str]:
    seen: dict[str, None] = {}
    for r in results:
        for rec in r.tables.get("parse", []):
            seen.update(dict.fromkeys(rec.get("prompt_hashes", [])))
    return list(seen)


def _row(q: Question) -> list[str]:
    options = ", ".join(f"{o.answer} → {o.label}" for o in q.options)
    return [q.prompt, str(q.version), q.task, q.hash, " ".join(q.full_text.split()), options]


def prompt_table(results: list[EvalResult]) -> Table:
    """One row per prompt question used by any result (packaged prompts, by hash)."""
    t = Table("prompts", "Zero-shot prompts (verbatim; MADBench's own, the paper prints none)",
              ["Prompt", "Version", "Task", "Hash", "Text", "Options (answer → label)"])
    used = _used_hashes(results)
    known = [q for f in packaged_prompts() for q in f.questions]
    rows = [_row(q) for q in known if q.hash in used]
    if rows:
        t.sections.append(("Prompts", rows))
    if missing := [h for h in used if h not in {q.hash for q in known}]:
        t.note("Not packaged (prompt files given by path): " + ", ".join(missing))
    t.note("The score is read from the first token of each option at the answer position; "
           "the generated text is parsed into the labels, refusal or unparsed.")
    return t
