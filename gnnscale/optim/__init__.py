"""Optimizers (config group ``optim``): one option per file, built by the runner."""
