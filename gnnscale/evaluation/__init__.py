"""Evaluation below the strategies: layer-wise inference, metrics over owned vertices, the
input-footprint similarity."""
