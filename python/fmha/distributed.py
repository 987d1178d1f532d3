"""Context parallelism: ring attention over ``torch.distributed``, forward and backward, merged by fmha's LSE.

Each rank of a process group holds a slice of the sequence, ``q, k, v`` of shape ``[b, s_local, h, d]`` (BSHD, as
:func:`fmha.attention`; ``h_k`` may divide ``h``: GQA). The K/V slices travel around the ring (rank ``r`` sends to
``r + 1`` and receives from ``r - 1``), each rank attends its queries to the block in hand while the next block is on
its way, and the partial results are merged exactly by their LSE (:func:`fmha.combine`: ``LSE = ln Σ exp(LSE_s)``,
``O = Σ exp(LSE_s − LSE) · O_s``; an empty partial contributes exactly 0). The backward recomputes each block with
the merged output and LSE (``torch.ops.fmha.bwd``, which then gives the exact share of that block), adds dQ locally
and sends the dK / dV accumulators around the ring with their blocks, so that each one arrives at its owner after a
full turn. Technique: ring attention (Liu, Zaharia and Abbeel, 2023, "Ring Attention with Blockwise Transformers") with
the zigzag causal load balance of ring-flash-attn and TransformerEngine's context parallelism.

Causal attention (``causal=True``, the global sequence's queries and keys aligned, ``s_q = s_k``): each rank must
hold the **zigzag split** (:func:`zigzag_split`): cut the sequence into ``2 · world`` chunks, rank ``r`` holds chunks
``r`` and ``2 · world − 1 − r``, so that every rank does the same work at every step (the first step is the local
causal attention; at each later step a rank attends either all its queries to the first half of the block in hand,
or the second half of its queries to the whole block). Non-causal attention takes any equal split (:func:`split`).

Communication: NCCL point-to-point (``torch.distributed.batch_isend_irecv``), which runs on NCCL's own stream, so the
exchange overlaps the attention of the block in hand; the current stream waits for a block only when it needs it.
A ``gloo`` group works too (the tensors travel through host memory; for tests on one GPU). NVLink multicast is not
used (point-to-point only; keep ``NCCL_NVLS_ENABLE=0`` where the machine sets it).

Precision: each block's output and gradients come from fmha's kernels in the input dtype (fp32 accumulation inside),
then are merged or summed in fp32, so the error grows slowly with the number of ranks (one rounding to the input
dtype per block) beside the single call's.

Collective rules: every rank of the group calls :func:`ring_attention` with the same shapes and options, and every
rank runs the backward (a rank that skips it leaves the others waiting in the ring); double backward is not supported.

Memory per rank: the world's partial outputs, ``world × b × s_local × h × d`` fp32 (merged once at the end), beside
two K/V blocks in flight; the backward holds fp32 dQ and two fp32 dK / dV accumulators.

:func:`ring_attention_simulated` runs the same per-rank code for every rank of a ring in one process (ranks advance
in lockstep, a "send" is a copy handed to the next rank), so that the mathematics is tested on one GPU.
"""
import math

import torch
from torch.autograd.function import once_differentiable

import fmha

__all__ = ["ring_attention", "ring_attention_simulated", "split", "merge", "zigzag_split", "zigzag_merge"]


# ------------------------------------------------------------------------------------------------- sequence layout

def split(x, world_size, causal, dim=1):
    """The slices of ``x`` for a ring of ``world_size`` ranks: the zigzag split when ``causal``, else equal
    contiguous chunks along ``dim``. Returns a list of ``world_size`` tensors (views or copies).
    Raises ValueError unless ``x.shape[dim]`` is a multiple of ``world_size`` (``2 · world_size`` when causal)."""
    return zigzag_split(x, world_size, dim) if causal else list(_chunks(x, world_size, dim))


def merge(parts, causal, dim=1):
    """The inverse of :func:`split`: the whole sequence from the ranks' slices (in rank order)."""
    return zigzag_merge(parts, dim) if causal else torch.cat(list(parts), dim)


def zigzag_split(x, world_size, dim=1):
    """Cuts ``x`` along ``dim`` into ``2 · world_size`` equal chunks; rank ``r`` gets chunks ``r`` and
    ``2 · world_size − 1 − r`` concatenated (the causal load balance of ring attention). Returns a list of
    ``world_size`` tensors. Raises ValueError unless ``x.shape[dim]`` is a multiple of ``2 · world_size``."""
    c = list(_chunks(x, 2 * world_size, dim))
    return [torch.cat([c[r], c[2 * world_size - 1 - r]], dim) for r in range(world_size)]


def zigzag_merge(parts, dim=1):
    """The inverse of :func:`zigzag_split`: ``parts[r]`` holds chunks ``r`` and ``2W − 1 − r`` of the sequence."""
    w = len(parts)
    halves = [p.chunk(2, dim) for p in parts]
    return torch.cat([halves[r][0] for r in range(w)] + [halves[r][1] for r in reversed(range(w))], dim)


def _chunks(x, n, dim):
    if n < 1 or x.shape[dim] % n != 0:
        raise ValueError(f"fmha.distributed: sequence length (dim {dim}): expected a multiple of {n}, got "
                         f"{x.shape[dim]}")
    return x.chunk(n, dim)


# ---------------------------------------------------------------------------------- one rank's blocks of the ring

class _Kernels:
    """The fmha calls a rank makes (tests/python/test_ring_cpu.py substitutes fp64 references to test the ring's
    bookkeeping without a GPU)."""

    @staticmethod
    def attention(q, k, v, causal, softmax_scale):
        return fmha.attention(q, k, v, causal=causal, softmax_scale=softmax_scale, return_lse=True)

    @staticmethod
    def combine(out_parts, lse_parts, out_dtype):
        return fmha.combine(out_parts, lse_parts, out_dtype=out_dtype)

    @staticmethod
    def bwd(*args):
        return torch.ops.fmha.bwd(*args)


_kernels = _Kernels()


def _check(q, k, v, causal):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"fmha.distributed: {name}: expected a [b, s_local, h, d] tensor, got shape "
                             f"{tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"fmha.distributed: v.shape: expected k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    if causal and (q.shape[1] != k.shape[1] or q.shape[1] % 2 != 0):
        raise ValueError(f"fmha.distributed: causal: expected the zigzag split (s_local of q and k equal and even), "
                         f"got s_local {q.shape[1]} (q) and {k.shape[1]} (k)")


def _block(step, rank, world, causal, s_local):
    """What rank ``rank`` attends at ``step`` (the K/V block of rank ``(rank − step) mod world``): (rows, keys,
    causal) with rows / keys slices of its queries and of the block (the zigzag rule when causal)."""
    full = slice(0, s_local)
    if not causal:
        return full, full, False
    if step == 0:
        return full, full, True  # its own chunks: causal within them
    half = s_local // 2
    if step <= rank:  # the block comes from a lower rank: all queries see its first chunk, none its second
        return full, slice(0, half), False
    return slice(half, s_local), full, False  # a higher rank's block: only the second chunk of queries sees it


def _forward(rank, world, q, k, v, causal, scale):
    """One rank's forward as a generator: yields ``("send", tensors)`` (start the exchange with the ring's
    neighbours; answered with a token) and ``("recv", token)`` (answered with the tensors the previous rank sent);
    returns ``(out, lse)``: out ``[b, s, h, d]`` in q's dtype, lse ``[b, h, s]`` fp32."""
    b, s, h, d = q.shape
    out_parts = torch.empty((world, b, s, h, d), device=q.device, dtype=torch.float32)
    lse_parts = torch.empty((world, b, s, h), device=q.device, dtype=torch.float32)
    kv = (k.contiguous(), v.contiguous())
    for step in range(world):
        token = (yield ("send", kv)) if step + 1 < world else None
        rows, keys, blk_causal = _block(step, rank, world, causal, s)
        o, lse = _kernels.attention(q[:, rows], kv[0][:, keys], kv[1][:, keys], blk_causal, scale)
        if rows.start > 0:  # rows this block does not reach: an empty partial (its O is never read)
            lse_parts[step, :, :rows.start] = -math.inf
        out_parts[step, :, rows].copy_(o)
        lse_parts[step, :, rows].copy_(lse.transpose(1, 2))
        if token is not None:
            kv = yield ("recv", token)
    out, lse_rows = _kernels.combine(out_parts, lse_parts, q.dtype)
    return out, lse_rows.permute(0, 2, 1).contiguous()


def _backward(rank, world, d_out, q, k, v, out, lse, causal, scale, deterministic, bwd_algorithm):
    """One rank's backward as a generator (the protocol of :func:`_forward`); returns ``(dq, dk, dv)`` in the
    inputs' dtypes. Each block's gradients come from ``torch.ops.fmha.bwd`` with the merged ``out`` and ``lse``."""
    s = q.shape[1]
    d_out, out = d_out.contiguous(), out.contiguous()
    dq = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
    kv = (k.contiguous(), v.contiguous())
    dkv_token = None
    scale_arg = 0.0 if scale is None else float(scale)
    for step in range(world):
        kv_token = (yield ("send", kv)) if step + 1 < world else None
        rows, keys, blk_causal = _block(step, rank, world, causal, s)
        lse_rows = lse if rows.start == 0 and rows.stop == s else lse[:, :, rows].contiguous()
        g_q, g_k, g_v = _kernels.bwd(d_out[:, rows], q[:, rows], kv[0][:, keys], kv[1][:, keys], out[:, rows],
                                     lse_rows, None, scale_arg, blk_causal, True, deterministic, bwd_algorithm)
        dq[:, rows] += g_q
        if dkv_token is None:  # this rank's own block: its accumulators start here
            dk_acc = torch.zeros(kv[0].shape, device=q.device, dtype=torch.float32)
            dv_acc = torch.zeros(kv[1].shape, device=q.device, dtype=torch.float32)
        else:  # the accumulators of the block in hand, from the previous rank (its step − 1)
            dk_acc, dv_acc = yield ("recv", dkv_token)
        dk_acc[:, keys] += g_k
        dv_acc[:, keys] += g_v
        dkv_token = yield ("send", (dk_acc, dv_acc))
        if kv_token is not None:
            kv = yield ("recv", kv_token)
    dk, dv = yield ("recv", dkv_token)  # this rank's own block, home after a full turn
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# --------------------------------------------------------------------------------------------------------- drivers

def _drive_simulated(gens):
    """Runs one generator per rank of a ring in one process: every rank advances until it waits for a block its
    previous rank has not sent yet; a send is a copy (the receiver owns what it gets)."""
    world = len(gens)
    sent = [dict() for _ in range(world)]  # rank -> {exchange index: tensors}
    n_sent, reply, waiting = [0] * world, [None] * world, [None] * world
    result, done = [None] * world, [False] * world
    while not all(done):
        progressed = False
        for r in range(world):
            prev = (r - 1) % world
            while not done[r]:
                if waiting[r] is not None:
                    if waiting[r] not in sent[prev]:
                        break  # not sent yet: the other ranks go first
                    reply[r], waiting[r] = sent[prev].pop(waiting[r]), None
                try:
                    kind, arg = gens[r].send(reply[r])
                except StopIteration as stop:
                    result[r], done[r] = stop.value, True
                    break
                finally:
                    progressed = True
                if kind == "send":
                    sent[r][n_sent[r]] = tuple(t.clone() for t in arg)
                    reply[r], n_sent[r] = n_sent[r], n_sent[r] + 1
                else:
                    reply[r], waiting[r] = None, arg
        if not progressed:
            raise RuntimeError("fmha.distributed: the simulated ring made no progress (a protocol error)")
    return result


class _ProcessGroupRing:
    """Point-to-point exchanges with the ring's neighbours in a torch.distributed group: NCCL's batched isend /
    irecv (on NCCL's stream; the waits order the current stream), or through host memory for a gloo group."""

    def __init__(self, group):
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("fmha.distributed.ring_attention: torch.distributed: expected an initialised process "
                               "group (torch.distributed.init_process_group), got none")
        self.dist, self.group = dist, group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        ranks = [dist.get_global_rank(group, i) if group is not None else i for i in range(self.world)]
        self.next, self.prev = ranks[(self.rank + 1) % self.world], ranks[(self.rank - 1) % self.world]
        self.host = dist.get_backend(group) == "gloo"

    def drive(self, gen):
        reply, pending, n_sent = None, {}, 0
        while True:
            try:
                kind, arg = gen.send(reply)
            except StopIteration as stop:
                return stop.value
            if kind == "send":
                pending[n_sent] = self._start(arg)
                reply, n_sent = n_sent, n_sent + 1
            else:
                reply = self._finish(*pending.pop(arg))

    def _start(self, tensors):
        if self.world == 1:
            return tensors, None, None
        dist = self.dist
        src = [t.contiguous().cpu() if self.host else t.contiguous() for t in tensors]
        bufs = [torch.empty_like(t) for t in src]
        if self.host:
            reqs = [dist.isend(t, self.next, self.group) for t in src] + \
                   [dist.irecv(b, self.prev, self.group) for b in bufs]
        else:
            ops = [dist.P2POp(dist.isend, t, self.next, self.group) for t in src] + \
                  [dist.P2POp(dist.irecv, b, self.prev, self.group) for b in bufs]
            reqs = dist.batch_isend_irecv(ops)
        return bufs, reqs, [t.device for t in tensors], src

    def _finish(self, bufs, reqs=None, devices=None, keep=None):
        if reqs is None:
            return tuple(t.clone() for t in bufs)  # world 1: the block comes back to its own rank
        for req in reqs:
            req.wait()
        return tuple(b.to(dev) for b, dev in zip(bufs, devices)) if self.host else tuple(bufs)


# -------------------------------------------------------------------------------------------------------- autograd

class _Ring(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, ring, causal, scale, deterministic, bwd_algorithm):
        out, lse = ring.drive(_forward(ring.rank, ring.world, q, k, v, causal, scale))
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (ring, causal, scale, deterministic, bwd_algorithm)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out):
        q, k, v, out, lse = ctx.saved_tensors
        ring, causal, scale, deterministic, algo = ctx.args
        dq, dk, dv = ring.drive(_backward(ring.rank, ring.world, d_out, q, k, v, out, lse, causal, scale,
                                          deterministic, algo))
        return dq, dk, dv, None, None, None, None, None


class _SimulatedRing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, world, causal, scale, deterministic, bwd_algorithm, *qkv):
        qs, ks, vs = qkv[:world], qkv[world:2 * world], qkv[2 * world:]
        res = _drive_simulated([_forward(r, world, qs[r], ks[r], vs[r], causal, scale) for r in range(world)])
        outs, lses = [o for o, _ in res], [lse for _, lse in res]
        ctx.save_for_backward(*qkv, *outs, *lses)
        ctx.args = (world, causal, scale, deterministic, bwd_algorithm)
        return tuple(outs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *d_outs):
        world, causal, scale, deterministic, algo = ctx.args
        t = ctx.saved_tensors
        qs, ks, vs = t[:world], t[world:2 * world], t[2 * world:3 * world]
        outs, lses = t[3 * world:4 * world], t[4 * world:]
        d_outs = [torch.zeros_like(o) if g is None else g for g, o in zip(d_outs, outs)]
        res = _drive_simulated([_backward(r, world, d_outs[r], qs[r], ks[r], vs[r], outs[r], lses[r], causal, scale,
                                          deterministic, algo) for r in range(world)])
        grads = [g[0] for g in res] + [g[1] for g in res] + [g[2] for g in res]
        return (None,) * 5 + tuple(grads)


def _options(softmax_scale, bwd_algorithm):
    if softmax_scale is not None:
        fmha._scale(softmax_scale, 1)  # the same check as fmha.attention's
    return softmax_scale, fmha._bwd_algorithm(bwd_algorithm)


def ring_attention(q, k, v, *, group=None, causal=False, softmax_scale=None, deterministic=False,
                   bwd_algorithm="auto"):
    """Attention over a sequence split across the ranks of ``group`` (default: the world), differentiable in q, k, v.

    Args:
      q: this rank's ``[b, s_local, h, d]`` queries (float16 / bfloat16 on this rank's CUDA device, as
        :func:`fmha.attention`); k, v: ``[b, s_local, h_k, d]``. Every rank passes the same shapes; with ``causal``
        the slices are the zigzag split (:func:`zigzag_split`) of a sequence whose queries and keys coincide.
      group: a ``torch.distributed`` process group (NCCL, or gloo for tests); None = the default group.
      causal: the causal mask over the whole sequence (``s_local`` even).
      softmax_scale: ``None`` = ``1 / sqrt(d)``.
      deterministic, bwd_algorithm: the backward's options, as :func:`fmha.attention`'s (the ring's own order is
        fixed, so ``deterministic=True`` makes the gradients bitwise repeatable).

    Returns:
      this rank's ``out`` ``[b, s_local, h, d]`` (contiguous, q's dtype): the rows of the whole sequence's attention
      that this rank holds.

    Raises:
      ValueError for this rank's shapes (the ranks' shapes are not compared: every rank must pass the same), a bad
      ``softmax_scale`` or ``bwd_algorithm``, and whatever :func:`fmha.attention` raises for the slices (dtype,
      device, head dim); RuntimeError without an initialised process group. Every rank must call it, and run the
      backward, in the same order (see the module's collective rules).
    """
    _check(q, k, v, causal)
    scale, algo = _options(softmax_scale, bwd_algorithm)
    return _Ring.apply(q, k, v, _ProcessGroupRing(group), bool(causal), scale, bool(deterministic), algo)


def ring_attention_simulated(qs, ks, vs, *, causal=False, softmax_scale=None, deterministic=False,
                             bwd_algorithm="auto"):
    """The ring of :func:`ring_attention` simulated in one process on one GPU: each rank's forward and backward run
    the same code as on a real ring, one rank after another at each step.

    Args:
      qs, ks, vs: lists of the ``world`` ranks' slices (e.g. from :func:`split`): ``qs[r]`` ``[b, s_local, h, d]``,
        ``ks[r]``, ``vs[r]`` ``[b, s_local, h_k, d]``, float16 or bfloat16 on one CUDA device, the same shapes for
        every rank (the zigzag split when ``causal``).
      causal, softmax_scale, deterministic, bwd_algorithm: as :func:`ring_attention`'s.

    Returns:
      the list of the ranks' outputs ``[b, s_local, h, d]`` (differentiable in every rank's slices).

    Raises:
      ValueError for lists of different lengths, shapes that differ between ranks or that the ring cannot take, a bad
      ``softmax_scale`` or ``bwd_algorithm``, and whatever :func:`fmha.attention` raises for the slices.
    """
    world = len(qs)
    if world < 1 or len(ks) != world or len(vs) != world:
        raise ValueError(f"fmha.distributed: qs, ks, vs: expected lists of one slice per rank (world >= 1), got "
                         f"{len(qs)}, {len(ks)}, {len(vs)}")
    for r in range(world):
        _check(qs[r], ks[r], vs[r], causal)
        if (qs[r].shape, ks[r].shape) != (qs[0].shape, ks[0].shape):
            raise ValueError(f"fmha.distributed: rank {r}: expected rank 0's shapes q {tuple(qs[0].shape)}, k "
                             f"{tuple(ks[0].shape)}, got {tuple(qs[r].shape)}, {tuple(ks[r].shape)}")
    scale, algo = _options(softmax_scale, bwd_algorithm)
    return list(_SimulatedRing.apply(world, bool(causal), scale, bool(deterministic), algo, *qs, *ks, *vs))
