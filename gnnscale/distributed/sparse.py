"""Sparse gradients of embedding tables across ranks (outside DDP).

A typed model's featureless node types are embedding tables with sparse gradients
(:func:`~gnnscale.optim.base.sparse_parameters`): a step's gradient holds only the rows it
looked up. DDP leaves them alone; the strategies that train types move them here instead:
every table's gradient is flattened into one list of rows (row ids numbered on across the
tables, in table order) and their values (:func:`flat_sparse`), gathered from every rank of a
group (one pair of all-gathers whatever the number of tables), and put back as one sparse,
uncoalesced gradient per table (:func:`set_sparse`), whose duplicate rows the optimizer
(``SparseAdam``) sums in the order given. ``strategy=data`` averages them over its ranks
(:func:`reduce_sparse`); ``strategy=factored``'s shared queue sums each step's jobs in slot
order (:class:`~gnnscale.strategies.factored.shared.SlotReducer`). The tables must share
their row width (a typed input's are all ``hidden``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from gnnscale.distributed.collectives import gather_rows, group_size


def table_rows(params: list[torch.nn.Parameter]) -> int:
    """Rows of all tables together (the flat row numbering's range)."""
    return sum(p.shape[0] for p in params)


def table_stats(params: list[torch.nn.Parameter]) -> dict[str, float]:
    """``embedding_rows_held`` and ``embedding_bytes`` of the tables a rank holds (none: an
    empty dict), the figures every strategy that trains types reports."""
    if not params:
        return {}
    return {"embedding_rows_held": float(table_rows(params)),
            "embedding_bytes": float(sum(p.numel() * p.element_size() for p in params))}


def flat_sparse(params: list[torch.nn.Parameter]) -> tuple[torch.Tensor, torch.Tensor]:
    """Every table's sparse gradient as ``(rows, values)``: row ids numbered on across the
    tables in table order, each table's rows coalesced; a table without a gradient adds none."""
    rows, vals, base = [], [], 0
    for p in params:
        if p.grad is not None:
            g = p.grad.coalesce()
            rows.append(g.indices()[0] + base)
            vals.append(g.values())
        base += p.shape[0]
    ref = params[0]
    rows_t = torch.cat(rows) if rows else torch.empty(0, dtype=torch.long, device=ref.device)
    vals_t = torch.cat(vals) if vals else ref.new_zeros((0, *ref.shape[1:]))
    return rows_t, vals_t


def set_sparse(params: list[torch.nn.Parameter], rows: torch.Tensor,
               vals: torch.Tensor) -> None:
    """Each table's gradient from flat ``rows`` and ``vals`` (numbered as :func:`flat_sparse`
    numbers them), uncoalesced, in the order given."""
    base = 0
    for p in params:
        mine = (rows >= base) & (rows < base + p.shape[0])
        p.grad = torch.sparse_coo_tensor((rows[mine] - base)[None].to(p.device),
                                         vals[mine].to(device=p.device, dtype=p.dtype),
                                         p.shape, check_invariants=False)
        base += p.shape[0]


def reduce_sparse(params: list[torch.nn.Parameter],
                  group: dist.ProcessGroup | None = None, mean: bool = True) -> int:
    """Average (``mean=False``: sum) every table's sparse gradient over ``group``
    (collective): all-gather each rank's looked-up rows and their gradient rows (divided by the
    group's size for the mean); returns the bytes this rank sent."""
    world = group_size(group)
    rows, vals = flat_sparse(params)
    all_rows = gather_rows(rows, group)
    all_vals = gather_rows(vals, group)
    if mean:
        all_vals = all_vals / world
    set_sparse(params, all_rows, all_vals)
    return rows.numel() * rows.element_size() + vals.numel() * vals.element_size()
