DEFAULT_LISTEN = "127.0.0.1:8080"  # llama-swap's own port, on loopback (``up``'s default)
