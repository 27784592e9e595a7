"""The storage core: the object store and its S3 client, manifests, row types, errors and
Python-version shims. Depends on nothing else in madbench_common."""
