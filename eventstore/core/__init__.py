"""The store: sessions, appends and reads over a backend (sync and asyncio), and copying sessions between stores."""
