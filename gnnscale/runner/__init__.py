"""The common training loop: build, epochs, evaluation, checkpoints, metrics, logging."""
