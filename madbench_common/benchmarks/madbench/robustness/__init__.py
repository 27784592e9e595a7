"""Robustness protocols: named, seeded perturbations of the test split.

``conditions`` parses the user-extensible condition list, ``noise`` the noise set,
``chain`` applies one condition to one track; the ``perturb`` stage
(:mod:`madbench_common.benchmarks.madbench.stages.perturb`) runs them over a run's test samples.
"""
