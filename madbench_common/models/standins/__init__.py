"""Stand-ins for model code that exists only as Hugging Face remote code (never vendored).

DF-Arena-1B and MiniCPM-o 4.5 ship their architectures as ``trust_remote_code`` files that
cannot be read offline. To test everything around their forward,
:mod:`madbench_common.models.tiny.remote` writes snapshots whose remote-code files are these
stand-ins: small modules written here (not upstream code) with the release's file, class
and entry-point names, returning exactly what the release's code returns (each module cites
its source). Every such snapshot carries ``madbench_standin.json``: its outputs are noise
from random weights of a stand-in architecture, never the paper's model.
"""
