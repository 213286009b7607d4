"""Mail for Iriis: the account's settings, pure message handling and a thin IMAP/SMTP client.

`settings` reads the account from the environment, `messages` turns parsed messages into
summaries, readable text and attachments and builds new ones (no network), and `client` talks
to the servers. The MCP server is actors/tools/servers/mail.py.
"""
