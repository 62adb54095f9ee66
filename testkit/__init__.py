"""Test doubles shared by the tests and the bench; not shipped (pyproject's package discovery
includes only `bot`, `adapters` and `storage`).

- `fake_server`: an OpenAI-compatible model server on 127.0.0.1 (scripted model, prefix cache,
  reasoning models), answering through `openai_answers`; `fake_anthropic`: the same for the
  Anthropic Messages API, through `anthropic_server_wire`; `fake_reasoning` and `fake_cache`:
  the thinking models and the prefix cache both share.
- `fake_bot_api`: the tests' fake Bot API (every method the bot calls, fault injection,
  files, members, reactions, channel direct messages) over the demo's
  `adapters.telegram.fake_api.DemoBotApi`; `updates`: raw update dicts parsed as the bot
  parses them.
- `fake_transcription`: a speech-to-text endpoint.
- `memory_store`: `InMemoryStore`, the store contract in memory.
"""
