"""Which edge type a link task predicts on a typed graph (torch-free: the launcher and the
task resolve ``task.edge_type`` against a graph's edge types with it).

``task.edge_type`` names the target edge type as the typed fanouts do
(:mod:`gnnscale.sampling.schemas`): by its relation where that names one edge type of the
graph (``writes``), else as ``src__rel__dst`` (``author__writes__paper``); ``src,rel,dst``
(quoted on the command line: Hydra reads an unquoted comma as a sweep) means the same. Left
out (``null``), a graph with one candidate takes it: the candidates are the edge types that
are not the reverse of another edge type of the graph (:func:`reverse_of`), so a graph built
with ``add_reverse=True`` from one edge type has one. Several candidates are refused in one
line listing them.

The reverse of ``(s, r, d)`` is ``(d, rev_r, s)`` (:data:`gnnscale.data.graph.REVERSE`: what
``GraphStore.from_typed(add_reverse=True)`` adds), and that of ``(d, rev_r, s)`` is
``(s, r, d)``, when the graph has it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gnnscale.errors import ConfigError

#: The reverse relation's prefix (the value of ``gnnscale.data.graph.REVERSE``, which imports
#: torch; a test checks the two agree).
REVERSE = "rev_"
KEY_SEP = "__"

EdgeType = tuple[str, str, str]


def key(edge_type: Sequence[str]) -> str:
    """The ``src__rel__dst`` name of an edge type."""
    return KEY_SEP.join(edge_type)


def reverse_of(edge_type: Sequence[str], edge_types: Sequence[Sequence[str]]
               ) -> EdgeType | None:
    """The reverse edge type of ``edge_type`` among ``edge_types``, or None."""
    s, r, d = edge_type
    types = {tuple(et) for et in edge_types}
    if (d, REVERSE + r, s) in types:
        return (d, REVERSE + r, s)
    if r.startswith(REVERSE) and (d, r[len(REVERSE):], s) in types:
        return (d, r[len(REVERSE):], s)
    return None


def candidates(edge_types: Sequence[Sequence[str]]) -> list[EdgeType]:
    """The edge types a link task may take by default: all but the added reverses (an edge type
    ``(d, rev_r, s)`` whose forward ``(s, r, d)`` the graph has)."""
    types = [tuple(et) for et in edge_types]
    present = set(types)
    return [et for et in types
            if not (et[1].startswith(REVERSE)
                    and (et[2], et[1][len(REVERSE):], et[0]) in present)]


def resolve(option: str | Sequence[str] | None, edge_types: Sequence[Sequence[str]],
            graph: str = "the graph") -> EdgeType:
    """The edge type ``task.edge_type`` names among ``edge_types`` (``graph`` names the graph
    in messages); raises :class:`~gnnscale.errors.ConfigError` in one line for an unknown or
    ambiguous name, or, with ``option`` None, for several candidates."""
    types = [tuple(str(p) for p in et) for et in edge_types]
    by_rel: dict[str, list[EdgeType]] = {}
    for et in types:
        by_rel.setdefault(et[1], []).append(et)

    def name(et: EdgeType) -> str:
        return et[1] if len(by_rel[et[1]]) == 1 else key(et)

    if option is None or option == "":
        found = candidates(types)
        if len(found) == 1:
            return found[0]
        raise ConfigError(f"task=link on {graph} needs task.edge_type, the edge type to "
                          f"predict: one of {', '.join(name(et) for et in found)}")
    if not isinstance(option, str):
        parts = tuple(str(p) for p in option)
    elif KEY_SEP in option:
        parts = tuple(option.split(KEY_SEP))
    elif "," in option:
        parts = tuple(p.strip() for p in option.split(","))
    else:
        parts = (option,)
    if len(parts) == 3 and parts in types:
        return parts
    if len(parts) == 1 and len(by_rel.get(parts[0], ())) == 1:
        return by_rel[parts[0]][0]
    shown = option if isinstance(option, str) else key(parts)
    if len(parts) == 1 and parts[0] in by_rel:
        raise ConfigError(f"task.edge_type={shown} is ambiguous: relation {parts[0]!r} names "
                          f"{len(by_rel[parts[0]])} edge types of {graph} "
                          f"({', '.join(key(et) for et in by_rel[parts[0]])}); name it as "
                          "src__rel__dst")
    raise ConfigError(f"task.edge_type={shown} is not an edge type of {graph}: its edge types "
                      f"are {', '.join(name(et) for et in types)}")
