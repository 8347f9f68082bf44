"""Finding models: walking folders, the GGUF header reader, config.json, ids and classes."""
