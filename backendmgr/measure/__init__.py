"""Measured, not guessed (issue 22): why a server failed, which build serves a model, and the
largest context that really fits. Pure parts (``reasons``, ``tune``) beside the record of
tuned contexts (``tuned``) and the memory reading of a process group (``memory``)."""
