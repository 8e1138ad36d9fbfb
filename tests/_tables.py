"""A tiny set of user tables (dataset=tables) for tests that compose every dataset option."""

from __future__ import annotations

from pathlib import Path


def write_tables(folder: Path) -> Path:
    """A 4-node labelled ring as ``nodes.csv`` + ``edges.csv`` and the schema file naming
    them (returned): what ``dataset=tables dataset.schema=<it>`` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nodes.csv").write_text("id,f,label\na,1,x\nb,2,y\nc,3,x\nd,4,y\n")
    (folder / "edges.csv").write_text("src,dst\na,b\nb,c\nc,d\nd,a\n")
    schema = folder / "tables.yaml"
    schema.write_text("nodes: [{path: nodes.csv, features: [f], label: label}]\n"
                      "edges: [{path: edges.csv}]\n")
    return schema
