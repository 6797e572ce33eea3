"""The rules of the log, each in one place: the JSON codec (``codec``), the JSONL line
(``line``), the hash chain (``chain``), the event types (``types``), the tool-call and turn
rules (``toolcalls``), validation (``validate``), the projection and the context."""
