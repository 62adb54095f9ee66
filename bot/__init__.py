"""tgbot: a Telegram LLM bot whose history is conversation, not instructions."""
