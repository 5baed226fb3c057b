"""Vision-language model backends (SimVLM offline; OpenAI-compatible servers such as vLLM)."""
