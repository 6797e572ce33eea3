"""JSONL in and out: the reader, bulk import, export, copy and agent transcripts."""
