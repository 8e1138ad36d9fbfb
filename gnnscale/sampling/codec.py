"""The one wire format of a :class:`~gnnscale.sampling.base.MiniBatch`: an int64 header of
sizes and flags, and one flat int64 body.

Every path that moves a mini-batch between processes uses it: the factored strategy's job
queue (which puts ``epoch, step`` before the header), the sampler workers (the body travels as
one shared-memory tensor) and the split strategy's sample broadcast; the split plans encode
their per-rank blocks with :func:`encode_blocks` / :func:`decode_blocks`.

Header: ``len(n_id), num_targets``, then per block ``num_edges, num_src, num_dst, flags``
(:func:`header_size`: ``2 + 4 * layers`` entries, fixed by the number of layers so that a
receiver can allocate it). ``flags`` is a sum of :data:`SRC_PREFIX` (``src_ids`` is
``n_id[:num_src]``, not sent), :data:`SRC_SENT` (``src_ids`` sent), :data:`WEIGHT`,
:data:`EDGE_ID` and :data:`EDGE_TYPE`. Body: ``n_id``, then block by block its ``edge_index``
(row 0 then row 1), ``src_ids`` when sent, ``edge_weight`` (float32, its bits one int64 per
edge, so the values come back bit for bit), ``e_id`` and ``edge_type``. Decoded tensors are
views of the body (no copy), except ``edge_weight``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gnnscale.sampling.base import Block, MiniBatch

HEAD = 2  # len(n_id), num_targets
PER_BLOCK = 4  # num_edges, num_src, num_dst, flags
SRC_PREFIX, SRC_SENT, WEIGHT, EDGE_ID, EDGE_TYPE = 1, 2, 4, 8, 16
_KNOWN = SRC_PREFIX | SRC_SENT | WEIGHT | EDGE_ID | EDGE_TYPE


def header_size(num_layers: int) -> int:
    """Entries of the header of a mini-batch of ``num_layers`` blocks."""
    return HEAD + PER_BLOCK * num_layers


def _is_prefix(ids: torch.Tensor, n_id: torch.Tensor | None) -> bool:
    """Whether ``ids`` equals the first ``len(ids)`` entries of ``n_id`` (a view of them is
    recognised without reading them)."""
    if n_id is None or ids.numel() > n_id.numel():
        return False
    if (ids.dtype == n_id.dtype and ids.data_ptr() == n_id.data_ptr()
            and ids.stride(0) == n_id.stride(0) and ids.device == n_id.device):
        return True
    return torch.equal(ids.long(), n_id[: ids.numel()].long())


def _per_edge(block: Block, name: str, t: torch.Tensor) -> torch.Tensor:
    """``t`` flat, checked to hold one entry per edge of ``block``."""
    t = t.reshape(-1)
    if t.numel() != block.num_edges:
        raise ValueError(f"mini-batch codec: a block's {name} has {t.numel()} entries for "
                         f"{block.num_edges} edges; give one per edge")
    return t


def encode_blocks(blocks: Sequence[Block], n_id: torch.Tensor | None = None
                  ) -> tuple[list[int], list[torch.Tensor]]:
    """The per-block header entries (:data:`PER_BLOCK` each) and body parts of ``blocks``; a
    ``src_ids`` that is a prefix of ``n_id`` is flagged instead of sent."""
    head: list[int] = []
    parts: list[torch.Tensor] = []
    for b in blocks:
        flags = 0
        parts.append(b.edge_index.reshape(-1))
        if b.src_ids is not None:
            if b.src_ids.numel() != b.num_src:
                raise ValueError(f"mini-batch codec: a block's src_ids has "
                                 f"{b.src_ids.numel()} entries for {b.num_src} sources")
            if _is_prefix(b.src_ids, n_id):
                flags |= SRC_PREFIX
            else:
                flags |= SRC_SENT
                parts.append(b.src_ids.reshape(-1))
        if b.edge_weight is not None:
            if b.edge_weight.dtype != torch.float32:
                raise TypeError(f"mini-batch codec: edge_weight must be float32, got "
                                f"{b.edge_weight.dtype}")
            flags |= WEIGHT
            parts.append(_per_edge(b, "edge_weight", b.edge_weight).view(torch.int32))
        if b.e_id is not None:
            flags |= EDGE_ID
            parts.append(_per_edge(b, "e_id", b.e_id))
        if b.edge_type is not None:
            flags |= EDGE_TYPE
            parts.append(_per_edge(b, "edge_type", b.edge_type))
        head += [b.num_edges, b.num_src, b.num_dst, flags]
    return head, parts


def _block_entries(head: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """``head`` (per-block entries) as ``(edges, src, dst, flags)`` rows, checked."""
    if len(head) % PER_BLOCK:
        raise ValueError(f"mini-batch codec: {len(head)} block header entries is not a "
                         f"multiple of {PER_BLOCK} (num_edges, num_src, num_dst, flags)")
    rows = [(int(head[i]), int(head[i + 1]), int(head[i + 2]), int(head[i + 3]))
            for i in range(0, len(head), PER_BLOCK)]  # PER_BLOCK entries each
    for layer, (e, ns, nd, flags) in enumerate(rows):
        if min(e, ns, nd) < 0 or flags & ~_KNOWN or (flags & SRC_PREFIX and flags & SRC_SENT):
            raise ValueError(f"mini-batch codec: block {layer}'s header entry "
                             f"{[e, ns, nd, flags]} is not (num_edges, num_src, num_dst, "
                             "flags) of this codec")
    return rows


def blocks_size(head: Sequence[int]) -> int:
    """Body entries the per-block header entries ``head`` announce."""
    size = 0
    for e, ns, _, flags in _block_entries(head):
        size += 2 * e + (ns if flags & SRC_SENT else 0)
        size += e * ((flags & WEIGHT > 0) + (flags & EDGE_ID > 0) + (flags & EDGE_TYPE > 0))
    return size


def decode_blocks(head: Sequence[int], body: torch.Tensor, n_id: torch.Tensor | None = None
                  ) -> list[Block]:
    """The blocks :func:`encode_blocks` wrote as ``head`` and (concatenated, int64 or a
    narrower integer type) ``body``; prefix ``src_ids`` become views of ``n_id``."""
    rows = _block_entries(head)
    need = blocks_size(head)
    if body.numel() != need:
        raise ValueError(f"mini-batch codec: the block header announces {need} body entries "
                         f"but the body has {body.numel()}")
    if n_id is None and any(flags & SRC_PREFIX for *_, flags in rows):
        raise ValueError("mini-batch codec: a block's src_ids is a prefix of n_id, but no "
                         "n_id was given to decode it")
    body = body.reshape(-1).long()
    blocks, pos = [], 0

    def take(n: int) -> torch.Tensor:
        nonlocal pos
        pos += n
        return body[pos - n: pos]

    for e, ns, nd, flags in rows:
        block = Block(take(2 * e).view(2, e), (ns, nd))
        if flags & SRC_PREFIX and n_id is not None:  # (checked above: n_id is given)
            block.src_ids = n_id[:ns]
        elif flags & SRC_SENT:
            block.src_ids = take(ns)
        if flags & WEIGHT:
            block.edge_weight = take(e).to(torch.int32).view(torch.float32)
        if flags & EDGE_ID:
            block.e_id = take(e)
        if flags & EDGE_TYPE:
            block.edge_type = take(e)
        blocks.append(block)
    return blocks


def encode_parts(mb: MiniBatch) -> tuple[list[int], list[torch.Tensor]]:
    """The header entries and body parts of ``mb`` (concatenate them to have :func:`encode`'s
    pair; a caller may put fields of its own before the header)."""
    head, parts = encode_blocks(mb.blocks, mb.n_id)
    return [mb.n_id.numel(), mb.num_targets] + head, [mb.n_id.reshape(-1)] + parts


def encode(mb: MiniBatch, *, shared: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(header, body)``, int64, of ``mb``; ``shared`` puts the body in shared memory (a
    tensor another process maps instead of copying)."""
    head, parts = encode_parts(mb)
    body = torch.empty(sum(p.numel() for p in parts), dtype=torch.int64)
    if shared:
        body.share_memory_()
    torch.cat([p.long() for p in parts], out=body)
    return torch.tensor(head, dtype=torch.int64), body


def body_size(header: torch.Tensor | Sequence[int]) -> int:
    """Body entries a ``header`` announces."""
    h = _header_list(header)
    return h[0] + blocks_size(h[HEAD:])


def _header_list(header: torch.Tensor | Sequence[int]) -> list[int]:
    h = header.tolist() if isinstance(header, torch.Tensor) else [int(x) for x in header]
    if len(h) < HEAD or (len(h) - HEAD) % PER_BLOCK:
        raise ValueError(f"mini-batch codec: a header has {HEAD} + {PER_BLOCK} * layers "
                         f"entries, got {len(h)}")
    if h[0] < 0 or not 0 <= h[1] <= h[0]:
        raise ValueError(f"mini-batch codec: header starts with len(n_id) = {h[0]}, "
                         f"num_targets = {h[1]}; need 0 <= num_targets <= len(n_id)")
    return h


def decode(header: torch.Tensor | Sequence[int], body: torch.Tensor) -> MiniBatch:
    """The :class:`MiniBatch` :func:`encode` wrote as ``header`` and ``body`` (its tensors are
    views of ``body``)."""
    h = _header_list(header)
    need = body_size(h)
    if body.numel() != need:
        raise ValueError(f"mini-batch codec: the header announces {need} body entries but the "
                         f"body has {body.numel()}")
    body = body.reshape(-1)
    n_id = body[: h[0]]
    return MiniBatch(n_id, decode_blocks(h[HEAD:], body[h[0]:], n_id), h[1])
