"""Stand-ins for model code that exists only as Hugging Face remote code (never vendored).

DF-Arena-1B and MiniCPM-o 4.5 ship their architectures as ``trust_remote_code`` files in
their hub repositories, which cannot be read offline. To test everything around their
forward (the adapter's real ``from_pretrained`` loading, pre-processing, output parsing,
the stage's rows), :mod:`madbench_common.models.tiny.remote` writes a snapshot in the
release's layout whose remote-code files are these stand-ins: small modules written
here (not upstream code) with the release's file, class and entry-point names, which
return exactly what the release's code returns (its source, read through the search
tool, is cited in each module). Every snapshot made from them carries
``madbench_standin.json``: its outputs are noise from random weights of a stand-in
architecture, never the paper's model.
"""
