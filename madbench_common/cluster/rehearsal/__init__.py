"""``make rehearsal``: the paper's graphs end to end on one machine, on tiny random weights.

``madbench rehearse run`` executes the rendered workflows with the local Argo interpreter
(:mod:`..argo_local`), every pod in its own image under the pod policy, as ``argo submit``
would on a cluster. Modules: :mod:`.run` (a pass), :mod:`.preflight`, :mod:`.objectstore`
(SeaweedFS and the API stub in a loopback-only namespace), :mod:`.profile` (the ``-p``
values and every departure from a cluster), :mod:`.images` and :mod:`.imagestore`,
:mod:`.pods` (cgroups, deadlines, retries, the resume memo), :mod:`.state` and
:mod:`.records` (the reports, labelled as random-weight numbers).
"""
