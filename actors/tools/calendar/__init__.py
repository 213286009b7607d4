"""The calendar and contacts for Iriis: the account's settings, pure event and contact handling,
and a thin CalDAV/CardDAV client.

`settings` reads the account from the environment; `times` reads times as people write them and
computes free time; `events` shows, builds and changes iCalendar events; `contacts` reads vCards
and finds people (no network in any of those); `client` talks to the servers through the `caldav`
library. The MCP server is actors/tools/servers/calendar.py.
"""
