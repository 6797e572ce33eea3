"""Proof: the chain walk (verify), checkpoints, integrity reports and repair."""
