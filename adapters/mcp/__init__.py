"""MCP servers over the official SDK (the `mcp` extra): started, watched, restarted, called.

Imported only when the settings name a server (`bot/app/mcp_wiring.py`), so a bot without
`[[mcp.servers]]` never loads the SDK.
"""
