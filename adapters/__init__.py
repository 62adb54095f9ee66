"""Adapters: the outside world (Telegram, LLM providers, the scheduler) behind the ports."""
