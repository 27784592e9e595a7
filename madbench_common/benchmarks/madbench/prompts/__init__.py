"""Versioned prompts for zero-shot omni models: text, allowed answers, answer format, hash.

One YAML file per prompt (``p_bin.yaml`` …) holds its ``name``, an integer ``version`` and
one or more ``questions`` (:class:`Question`: one model call), each with its ``text``,
``answer_format`` and allowed ``options`` (:class:`Option`); :attr:`Question.hash` versions
what the model sees. The paper (MADBench §4.2, §5.1–5.4) names its prompts P_bin, P_4way,
P_comp and P_SC but does not print them; the packaged files are written for this
implementation. Other benchmarks (DEAF) add their own files with the same schema, in this
folder or anywhere (:func:`load_prompt` takes a path).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError

__all__ = ["MADBENCH_PROMPTS", "PROMPT_DIR", "Option", "PromptFile", "Question",
           "load_prompt", "packaged_prompts", "prompts_markdown"]

PROMPT_DIR = Path(__file__).resolve().parent
MADBENCH_PROMPTS = {"binary": "P_bin", "fourway": "P_4way", "speech": "P_comp",
                    "env": "P_comp", "scene": "P_SC"}
"""Task → the packaged prompt the paper assigns to it (§5.1–5.3)."""
_FILE_KEYS = {"name", "version", "questions"}
_QUESTION_KEYS = {"task", "text", "answer_format", "options"}
_OPTION_KEYS = {"answer", "label", "synonyms"}


@dataclass(frozen=True)
class Option:
    """One allowed answer: the string asked for, the label it means, parse synonyms."""

    answer: str
    label: str
    synonyms: tuple[str, ...] = ()

    def surface_forms(self) -> tuple[str, ...]:
        """Spellings whose first token is scored: case variants, with and without a
        leading space (single letters only upper case, so ``e`` in prose never counts)."""
        a = self.answer.strip()
        if len(a) == 1:
            forms = [a.upper(), " " + a.upper()]
        else:
            cases = [a, a.lower(), a.capitalize(), a.upper()]
            forms = cases + [" " + c for c in cases]
        return tuple(dict.fromkeys(forms))


@dataclass(frozen=True)
class Question:
    """One model call of a prompt: task, text, answer format and options."""

    prompt: str
    version: int
    task: str
    text: str
    answer_format: str
    options: tuple[Option, ...]

    @property
    def full_text(self) -> str:
        """What the model reads: the question, then the answer format."""
        return f"{self.text.strip()}\n{self.answer_format.strip()}".strip()

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(o.label for o in self.options)

    @property
    def hash(self) -> str:
        """Version hash: sha256 of what the model sees and is scored on (16 hex digits).

        Prompt name, version, task, text, answer format and the (answer, label) pairs.
        Synonyms are parse-side and outside the hash: a change of the parser never
        invalidates cached responses. Every result row records the hash; change a prompt's
        text and bump its ``version``."""
        blob = json.dumps({"prompt": self.prompt, "version": self.version, "task": self.task,
                           "text": self.full_text,
                           "options": [[o.answer, o.label] for o in self.options]},
                          sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def choices(self) -> tuple[str, ...]:
        """Every option's surface forms, the ``choices`` an :class:`OmniModel` scores."""
        return tuple(dict.fromkeys(f for o in self.options for f in o.surface_forms()))

    def label_of(self, surface: str) -> str:
        """The label whose option has ``surface`` among its surface forms."""
        for o in self.options:
            if surface in o.surface_forms():
                return o.label
        raise KeyError(surface)


@dataclass(frozen=True)
class PromptFile:
    """A prompt: its name, version and questions (one per task it answers)."""

    name: str
    version: int
    questions: tuple[Question, ...]
    path: str = ""

    def question(self, task: str) -> Question:
        for q in self.questions:
            if q.task == task:
                return q
        raise ConfigError(f"prompt {self.name} ({self.path}) has no question for task {task!r}")


def _check_keys(where: str, data: Any, allowed: set[str], required: Iterable[str]) -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    if unknown := set(data) - allowed:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; allowed {sorted(allowed)}")
    if missing := [k for k in required if k not in data]:
        raise ConfigError(f"{where}: missing keys {missing}")


def _option(where: str, data: Any) -> Option:
    _check_keys(where, data, _OPTION_KEYS, ("answer", "label"))
    synonyms = tuple(str(s) for s in data.get("synonyms") or ())
    return Option(str(data["answer"]), str(data["label"]), synonyms)


def _question(where: str, name: str, version: int, data: Any) -> Question:
    _check_keys(where, data, _QUESTION_KEYS, _QUESTION_KEYS)
    options = tuple(_option(f"{where} option {i}", o) for i, o in enumerate(data["options"]))
    if len(options) < 2 or len({o.label for o in options}) != len(options):
        raise ConfigError(f"{where}: needs at least two options with distinct labels")
    return Question(name, version, str(data["task"]), str(data["text"]),
                    str(data["answer_format"]), options)


def _resolve(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        return path
    wanted = str(name_or_path).lower()
    for file in sorted(PROMPT_DIR.glob("*.yaml")):
        if file.stem == wanted:
            return file
        head = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        if str(head.get("name", "")).lower() == wanted:
            return file
    known = ", ".join(p.name for p in packaged_prompts())
    raise ConfigError(f"unknown prompt {name_or_path!r}; packaged prompts: {known}")


def load_prompt(name_or_path: str | Path) -> PromptFile:
    """A packaged prompt by name (``P_bin``) or file stem (``p_bin``), or a YAML path."""
    path = _resolve(name_or_path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read prompt file: {exc}") from None
    _check_keys(str(path), data, _FILE_KEYS, _FILE_KEYS)
    name, version = str(data["name"]), data["version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(f"{path}: version must be a positive integer, got {version!r}")
    questions = tuple(_question(f"{path} question {i}", name, version, q)
                      for i, q in enumerate(data["questions"] or ()))
    if not questions:
        raise ConfigError(f"{path}: no questions")
    return PromptFile(name, version, questions, str(path))


def packaged_prompts() -> list[PromptFile]:
    """Every prompt file shipped in this package: the paper's (P_bin, P_4way, P_comp,
    P_SC) first, then others by file name."""
    files = [load_prompt(p) for p in sorted(PROMPT_DIR.glob("*.yaml"))]
    order = list(dict.fromkeys(MADBENCH_PROMPTS.values()))
    return sorted(files, key=lambda f: (order.index(f.name) if f.name in order else len(order),
                                        f.path))


def prompts_markdown(questions: Sequence[Question], hashes: Iterable[str] = ()) -> str:
    """A Markdown section printing each question verbatim with its hash and options.

    ``hashes``, if given, keeps only the questions whose hash is among them (those a
    report's rows used); unknown hashes are listed as such.
    """
    wanted = set(hashes)
    shown = [q for q in questions if not wanted or q.hash in wanted]
    lines = ["## Prompts (zero-shot omni models)", ""]
    for q in shown:
        options = ", ".join(f"`{o.answer}` → {o.label}" for o in q.options)
        lines += [f"**{q.prompt}** v{q.version}, task `{q.task}`, hash `{q.hash}`", "",
                  *(f"    {line}" for line in q.full_text.splitlines()), "",
                  f"Options: {options}.", ""]
    if missing := sorted(wanted - {q.hash for q in shown}):
        lines.append(f"Rows also name prompt hashes not packaged here: {', '.join(missing)}.")
    return "\n".join(lines).rstrip() + "\n"
