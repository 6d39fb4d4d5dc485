"""Training: torch models and training loops (needs the ``[train]`` extra)."""
