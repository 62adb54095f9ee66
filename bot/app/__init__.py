"""The composition root and every entry point: wiring, the `tgbot` command line, serving
(polling and webhook), the offline demo, and the retention loop.

The only package that reads `bot.config` or imports `adapters` and `storage`.
"""
