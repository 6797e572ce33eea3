"""The rules of the log: the JSON codec, the line, the chain, validation and the projection."""
