"""STAND-IN remote code for ``openbmb/MiniCPM-o-4_5`` (see the package docstring).

The release's ``modeling_minicpmo.py`` (read through the search tool): ``MiniCPMO`` holds the
language model as ``self.llm`` (``Qwen3ForCausalLM``) beside its vision, audio and TTS
modules (``init_vision``/``init_audio``/``init_tts`` config flags, settable as
``from_pretrained`` keyword arguments); ``chat(msgs=…, max_new_tokens, do_sample,
max_slice_nums, enable_thinking, use_tts_template, generate_audio, omni_mode, …)`` takes
one conversation whose contents are strings, PIL images and 16 kHz numpy audio, loads its
processor from ``config._name_or_path``, embeds the media into the LLM's input embeddings,
decodes with ``self.llm.generate(inputs_embeds=…)`` and returns the answer as a ``str``
(text before ``<|tts_eos|>``; a ``(answer, prompt)`` tuple only with ``return_prompt``).
An audio item in the messages switches the TTS template on. The stand-ins keep that
interface with a tiny linear audio and image embedder in place of the release's Whisper
and SigLIP encoders.
"""
