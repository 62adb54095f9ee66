"""Test doubles shared by the tests and the bench; not shipped (pyproject's package discovery
includes only `bot`, `adapters` and `storage`).

- `fake_server`: an OpenAI-compatible model server on 127.0.0.1 (scripted model, prefix cache,
  reasoning models); `fake_anthropic`: the same for the Anthropic Messages API;
  `fake_reasoning` and `fake_cache`: the thinking models and the prefix cache both share.
- `fake_bot_api`: the full fake Bot API (fault injection, files, members, reactions, channel
  direct messages) over the demo's `adapters.telegram.fake_api`.
- `fake_transcription`: a speech-to-text endpoint.
- `memory_store`: `InMemoryStore`, the store contract in memory.
"""
