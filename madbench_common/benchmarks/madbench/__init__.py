"""MADBench (2026): component-level audio deepfakes of real clips (R, S, E, Q).

- :mod:`.graph`: the stage graph and its profiles (``embedded``, ``full``), with the
  evaluation and omni model rows (:mod:`.eval_models`, :mod:`.omni_models`);
- :mod:`.stages`: ingest and source QC, separation, scene, component planning, speech and
  environment generation, component QC, assembly, perturbation, features and scoring;
- :mod:`.rows`, :mod:`.sources`, :mod:`.taxonomy_propose` (a draft scene taxonomy for
  review; the taxonomy itself is the scene models' vocabulary, ``models/taxonomy.py``);
- :mod:`.eval` (the paper's tasks, heads, metrics, tables and report), :mod:`.omni`,
  :mod:`.corpora` (cross-dataset loaders), :mod:`.robustness`, :mod:`.prompts` and
  :mod:`.release` (the dataset export and its card)."""

DESCRIPTION = "MADBench (2026): component-level audio deepfakes of real clips, R/S/E/Q"
"""What the benchmark is, in one line (its row of
:data:`madbench_common.cli.pipelines.PIPELINES`)."""
