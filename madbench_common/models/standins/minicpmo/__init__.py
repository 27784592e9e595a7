"""STAND-IN remote code for ``openbmb/MiniCPM-o-4_5`` (see the package docstring).

Keeps the release's ``modeling_minicpmo.py`` interface (:class:`.modeling_minicpmo.MiniCPMO`)
with a tiny linear audio and image embedder in place of the release's Whisper and SigLIP
encoders.
"""
