"""LLM providers: OpenAI-compatible chat completions and the offline scripted model."""
