"""Example models as PyG users write them (``model.target=examples.models.<Class>``)."""
