"""Component manifests, asset matching and host detection."""
