"""``make rehearsal``: the paper's graphs end to end on one machine, on tiny random weights.

``madbench rehearse run`` (:mod:`madbench_common.cli.rehearse`) executes the rendered
workflows (``workflows/full.yaml``, then ``workflows/deaf.yaml``) with the local Argo
interpreter (:mod:`..argo_local`), every pod in its own image under the pod policy, as
``argo submit`` would run them on a cluster. A pass (:mod:`.run`):

* :mod:`.preflight`: what can fail before any build (upstream sources, tiny-weights
  callables, secret keys) and a dry run whose pods :func:`..lint.check_pods` accepts;
* :mod:`.objectstore`: SeaweedFS and the API stub in a network namespace with only
  loopback (:mod:`..sandbox`), the demo clips uploaded; S3 keys are new at each start and
  reach pods only through the workflows' ``secretKeyRef``, never logged or written;
* :mod:`.profile`: the ``argo submit -p`` values (shard counts, relaxed stage parameters,
  ``madbench_common/data/rehearsal.yaml``) and every way the pass departs from a cluster;
* :mod:`.images` and :mod:`.imagestore`: each image built locally when missing or stale
  (bases first), its tiny weights written, pinned by image id, removed after its last pod
  unless ``KEEP_IMAGES=1``; ``IMAGE_TESTS=1`` runs its image test first;
* :mod:`.pods`: each pod in a memory cgroup with its ``limits.memory``, deadline and
  retries (GPU pods run on the CPU); the memo skips pods done before with the same spec,
  image recipe, tiny weights and upstream results, so a killed pass resumes;
* :mod:`.state` and :mod:`.records`: ``<work>/state.json``, then ``images/rehearsal.json``
  and ``images/rehearsal.md`` and the printed reports, labelled as random-weight numbers.
"""
