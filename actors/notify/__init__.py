"""Notifications and calls (spec section 11), without Ray.

One notifier (`notifier.Notifier`) sends over every configured channel (Web Push, ntfy,
Telegram, the owner's desktop devices) and records each attempt; the outbox drainer
(`outbox.drain`) retries with backoff so no row is ever lost; the call watcher
(`watcher.CallWatcher`) runs the calls state machine (`calls`) on an injected clock. The
scheduler (actors/scheduler) runs these as loops; the routes use the repositories.
"""
