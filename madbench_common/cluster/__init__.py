"""Cluster concerns that run on one machine: executing rendered Argo workflows locally.

* :mod:`.argo_local`: an interpreter of the Argo Workflows subset that ``madbench render``
  emits (DAGs, ``withSequence`` fan-out, parameters, expressions, retries, deadlines,
  ``onExit``, parallelism), with a dry run that resolves every pod without running it;
* :mod:`.podexec`: the per-pod launcher (network namespace, memory cgroup, container);
* :mod:`.sandbox`: a private network namespace with only loopback, the object store
  (SeaweedFS) and the API stub inside it;
* :mod:`.rehearsal`: ``make rehearsal``, the paper's graphs on tiny random checkpoints,
  every stage in its own image under the pod policy.
"""
