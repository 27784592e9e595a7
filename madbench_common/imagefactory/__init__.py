"""The images: ``images/<slug>/image.yaml`` and its Dockerfile (:mod:`.images`,
:mod:`.dockerfile`), layered hash locks (:mod:`.images`), the images lock
(:mod:`.imagelock`), builds and pushes (:mod:`.imagebuild`, :mod:`.imagepush`), the
container engine (:mod:`.containers`), upstream sources (:mod:`.upstream`), SBOMs
(:mod:`.sbom`), the secret scan (:mod:`.secrets_scan`) and the adapter tests in an image's
venv (:mod:`.adaptertest`). Below the engine, which runs stages in these images; the image
tests, which run the engine, are in ``testing/``."""
