"""Checkpoint interop: the Hugging Face layout (config.json + safetensors / .bin)."""
