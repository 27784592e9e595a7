"""Adapters for the paper's models: one module per model family, heavy imports inside.

Adding a model
--------------

1. **Role.** Pick the role it implements in :mod:`madbench_common.models.roles` (``Separator``,
   ``SpeechGenerator``, ``EnvGenerator``, ``ASR``, ``Encoder``, ``Detector``, ``OmniModel``…).
2. **Slug.** One slug names the model everywhere: registry key, ``images/<slug>/``,
   Argo template and workflow parameters (``<stage>_image``, ``<stage>_model``). An image
   that serves several models (``qc``) uses its slug as the prefix of theirs.
3. **Adapter.** ``madbench_common/models/<family>.py``: a class with ``slug``, ``version``,
   ``reference = False`` and the role's methods. Import torch and the upstream package
   inside methods or ``__init__``, never at module top, so the orchestrator stays light.
   Load weights only through :func:`madbench_common.models.weights.hf_path` /
   :func:`~madbench_common.models.weights.url_file` (offline; a missing file names the fix).
4. **Image folder.** ``images/<slug>/``: ``Dockerfile`` (``FROM`` an ARG base), ``image.yaml``
   (:mod:`madbench_common.images`), ``requirements.in`` (``-r ../common.in`` + pins),
   ``requirements.lock`` (``make lock IMAGE=<slug>``), ``weights.yaml``, and a row in
   ``images/README.md`` (paper name, upstream, licence, Python, torch).
5. **Tiny-model test.** ``tests/models/test_<family>.py`` builds a tiny randomly
   initialised model from the upstream package's own classes and configs and runs the
   adapter's real forward or sampling code on CPU; it skips in the main venv
   (``pytest.importorskip``) and runs in ``.venvs/<slug>`` via ``make adapter-test IMAGE=<slug>``.
   The tiny checkpoint's builder (``image.yaml`` ``image_test.weights``) writes every model
   the image registers in the release's layout (the files ``weights.yaml`` fetches);
   declare what it writes with :func:`madbench_common.models.weights.tiny_layout` and list
   ``tests/models/test_tiny_layouts.py`` (declaration against ``weights.yaml``; in the
   venv, the files written) in ``adapter_tests`` and its ``IMAGES``. Where the model code
   exists only as hub remote code, a stand-in of it (:mod:`.standins`) returns what the
   release's returns, and only the real forward is skipped, naming that reason.
6. **Registry line.** ``register(ModelSpec(slug, role, "madbench_common.models.<family>:<Class>",
   False, image, description, paper_model=<the paper's name>, group=...))`` in
   :mod:`madbench_common.models.registry`.
7. **Render.** In :mod:`madbench_common.pipeline.definition`, name it in the stage's
   ``full`` profile (``full={"model": <slug>, "image": <slug>, "gpu": 1}``; compound QC
   stages set ``"params"``); the stage's own ``model``/``image`` stay the CPU reference, so
   the embedded run and ``smoke.yaml`` need no GPU. Then run ``madbench render``.

Frozen encoders and detectors (paper §4.2) also implement ``embed(mode=…, audio=…,
sample_rate=…, frames=…, fps=…)`` returning a :class:`~madbench_common.models.roles.Embedding`
(features, the exact :class:`~madbench_common.models.roles.InputSpec`, a detector's P(fake)), and
get one ``features_<slug>`` stage from an ``EvalModel`` row in
:mod:`madbench_common.pipeline.eval_models` (frame rate, size and modes per model).
Shared input recipes (resampling, repeat-padding, A-V fusion) are in :mod:`.prep`.
"""
