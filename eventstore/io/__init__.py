"""JSONL in and out: the reader, bulk import, export and agent transcripts."""
