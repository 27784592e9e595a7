"""MADBench (2026): component-level audio deepfakes of real clips (R, S, E, Q).

- :mod:`.graph`: the stage graph and its profiles (``embedded``, ``full``), with the
  evaluation and omni model rows (:mod:`.eval_models`, :mod:`.omni_models`);
- :mod:`.stages`: ingest and source QC, separation, scene, component planning, speech and
  environment generation, component QC, assembly, perturbation, features and scoring;
- :mod:`.rows`, :mod:`.sources`, :mod:`.taxonomy` (with its data in ``data/``);
- :mod:`.eval` (the paper's tasks, heads, metrics, tables and report), :mod:`.omni`,
  :mod:`.corpora` (cross-dataset loaders), :mod:`.robustness`, :mod:`.prompts` and
  :mod:`.release` (the dataset export and its card)."""
