"""Loggers: none (console + JSON lines only) and wandb."""
