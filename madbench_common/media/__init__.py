"""Media: decoding and encoding audio and video (PyAV, soundfile), the sandboxed decoder
server every untrusted input goes through, signal processing, mixing and muxing."""
