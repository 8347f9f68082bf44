"""From discovered models and the registry to a llama-swap config: sizing and emitters."""
