"""MADBench common library: manifests, object store, roles, stages and the pipeline graph."""

__all__ = ["__version__"]

__version__ = "0.1.0"
