"""fmha from PyTorch: fused multi-head attention for NVIDIA Hopper GPUs (sm_90).

Functions over the operators ``torch.ops.fmha.fwd``, ``torch.ops.fmha.fwd_varlen`` and ``torch.ops.fmha.decode`` (C++ ``TORCH_LIBRARY``
ops in ``libfmha_torch.so``, loaded on import; Meta kernels for ``torch.compile`` that apply fmha's own argument
checks; the current CUDA stream; a device guard for the inputs' GPU):

* :func:`attention` for ``[batch, seqlen, heads, head_dim]`` (BSHD) tensors,
* :func:`attention_varlen` for packed ``[total_tokens, heads, head_dim]`` tensors with cumulative lengths,
* :func:`decode` for a few new tokens per sequence against a KV cache (contiguous or paged, split-KV),
* :func:`combine`, the LSE-weighted merge of partial results (``torch.ops.fmha.combine``);
* :mod:`fmha.distributed`: ring attention over ``torch.distributed`` (context parallelism; ``import fmha.distributed``).

Semantics: ``O = softmax(scale · Q·Kᵀ (masked)) · V`` per query head, fp32 accumulation; query head ``h`` uses K/V
head ``h // (heads_q // heads_kv)`` (GQA / MQA); ``LSE = ln Σ exp(scale · s)`` over the keys a row sees; a row that
sees no key gets ``O = 0`` and ``LSE = -inf``. dtypes: float16 or bfloat16 (all three alike); head dims: multiples of 8
up to 128. Bad arguments raise ``ValueError`` with fmha's message (argument, expected, actual), a valid request no
kernel takes (e.g. a GPU that is not sm_90) ``NotImplementedError``, a CUDA failure ``RuntimeError``.
Autograd: :func:`attention` and :func:`attention_varlen` are differentiable in q, k and v (fmha's backward,
``torch.ops.fmha.bwd`` / ``bwd_varlen``, registered with ``torch.library.register_autograd``; ``deterministic=True``
makes the gradients bitwise repeatable, ``bwd_algorithm`` picks one or two passes), also through the returned LSE (a loss may use ``lse``: its gradient enters
as ``dS = P · (dP − D + dLSE)``). :func:`decode` has no backward. Empty inputs: no query rows give empty
outputs, no keys give ``O = 0`` and ``LSE = -inf``.

Causal alignment: ``causal_align="q_end"`` (the default) aligns the last query with the last key
(FlashAttention's "bottom-right": query ``i`` sees keys ``j <= i + s_k - s_q``); ``"q_begin"`` aligns the first
query with the first key (PyTorch SDPA's ``is_causal=True``: ``j <= i``). Both are the same when ``s_q == s_k``.

The library: the environment variable ``FMHA_TORCH_LIBRARY`` names another ``libfmha_torch.so`` to load instead of
the one beside this file.
"""
import operator
import os

import torch

__all__ = ["attention", "attention_varlen", "combine", "decode", "DecodePlan"]

from ._build import TORCH_VERSION as _BUILT_FOR

if torch.__version__.split("+")[0] != _BUILT_FOR:
    raise ImportError(f"fmha: torch: expected version {_BUILT_FOR} (the extension was built against it), got "
                      f"{torch.__version__}: rebuild fmha against this torch")
_LIBRARY = os.environ.get("FMHA_TORCH_LIBRARY") or os.path.join(os.path.dirname(__file__), "libfmha_torch.so")
torch.ops.load_library(_LIBRARY)

_ALIGNS = ("q_end", "q_begin")


_FLT_MIN, _FLT_MAX = 1.1754943508222875e-38, 3.4028234663852886e38


def _scale(softmax_scale, head_dim):
    if softmax_scale is None:
        return 0.0  # the library's default, 1 / sqrt(head_dim)
    scale = float(softmax_scale)
    if not (_FLT_MIN <= scale <= _FLT_MAX):
        raise ValueError(f"fmha: softmax_scale: expected a normal fp32 value > 0 ({_FLT_MIN:.4g} … {_FLT_MAX:.4g}; "
                         f"None = 1/sqrt(head_dim)), got {softmax_scale!r}")
    return scale


def _length(name, value):
    try:
        return operator.index(value)  # ints (and SymInts, integer tensors of one element), not floats
    except TypeError:
        raise TypeError(f"fmha: {name}: expected an int, got {type(value).__name__} {value!r}") from None


_BWD_ALGORITHMS = ("auto", "one_pass", "two_pass")


def _bwd_algorithm(name):
    if name not in _BWD_ALGORITHMS:
        raise ValueError(f"fmha: bwd_algorithm: expected 'auto', 'one_pass' or 'two_pass', got {name!r}")
    return name


def _align(causal_align):
    if causal_align not in _ALIGNS:
        raise ValueError(f"fmha: causal_align: expected 'q_end' or 'q_begin', got {causal_align!r}")
    return causal_align == "q_end"


def attention(q, k, v, *, causal=False, causal_align="q_end", softmax_scale=None, return_lse=False,
              deterministic=False, bwd_algorithm="auto"):
    """Attention over dense BSHD tensors.

    Args:
      q: ``[b, s_q, h, d]`` float16 or bfloat16 on a CUDA device (sm_90). Any strides whose head-dim mode is
        contiguous and whose other strides are multiples of 8 elements, e.g. a ``[b, h, s, d]`` tensor's
        ``.transpose(1, 2)``.
      k, v: ``[b, s_k, h_k, d]``, q's dtype and device; ``h_k`` divides ``h``.
      causal: apply the causal mask (see ``causal_align``).
      causal_align: ``"q_end"`` (default, bottom-right) or ``"q_begin"`` (top-left, SDPA's ``is_causal``).
      softmax_scale: the scale of the scores; ``None`` = ``1 / sqrt(d)``.
      return_lse: also return the LSE.
      deterministic: the backward (autograd) gives bitwise repeatable gradients (``"auto"`` takes the two-pass
        algorithm for it); the forward is the same either way.
      bwd_algorithm: the backward's algorithm (``fmha::BwdAlgorithm``): ``"auto"`` (the library picks from the
        shape and options), ``"one_pass"`` (dQ accumulated in fp32 across key blocks) or ``"two_pass"`` (a dQ kernel
        of its own that recomputes S and dP; repeatable by construction). The forward is the same either way.

    Returns:
      ``out`` ``[b, s_q, h, d]`` (contiguous, q's dtype), and with ``return_lse`` also ``lse`` ``[b, h, s_q]``
      (float32, natural log).
    """
    out, lse = torch.ops.fmha.fwd(q, k, v, _scale(softmax_scale, q.shape[-1]), bool(causal), _align(causal_align),
                                  bool(deterministic), _bwd_algorithm(bwd_algorithm))
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False,
                     causal_align="q_end", softmax_scale=None, return_lse=False, deterministic=False,
                     bwd_algorithm="auto"):
    """Attention over packed variable-length sequences (no padding).

    Args:
      q: ``[total_q, h, d]``: the queries of every sequence one after another (float16 or bfloat16, CUDA).
      k, v: ``[total_k, h_k, d]``.
      cu_seqlens_q, cu_seqlens_k: int32 ``[b + 1]``, contiguous, on q's device: sequence ``i`` owns rows
        ``cu[i] … cu[i+1] - 1`` (``cu[0] = 0``, non-decreasing; a sequence may be empty).
      max_seqlen_q, max_seqlen_k: the largest sequence lengths (upper bounds are fine; they size the grid).
      The lengths stay on the device and are not checked: ``cu[b] <= total`` rows and every length
      ``<= max_seqlen`` are the caller's contract (rows outside every sequence get unspecified O and LSE).
      causal, causal_align, softmax_scale, return_lse, deterministic, bwd_algorithm: as in :func:`attention`, per
        sequence.

    Returns:
      ``out`` ``[total_q, h, d]``, and with ``return_lse`` also ``lse`` ``[h, total_q]`` (float32).
    """
    out, lse = torch.ops.fmha.fwd_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, _length("max_seqlen_q", max_seqlen_q),
                                         _length("max_seqlen_k", max_seqlen_k),
                                         _scale(softmax_scale, q.shape[-1]), bool(causal), _align(causal_align),
                                         bool(deterministic), _bwd_algorithm(bwd_algorithm))
    return (out, lse) if return_lse else out


# ------------------------------------------------------------------------------------------------------ autograd

def _fwd_setup_context(ctx, inputs, output):
    q, k, v, scale, causal, q_end = inputs[:6]
    deterministic = inputs[6] if len(inputs) > 6 else False  # the schema's defaults when left out
    algorithm = inputs[7] if len(inputs) > 7 else "auto"
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.args = (scale, causal, q_end, deterministic, algorithm)
    ctx.n_inputs = len(inputs)
    ctx.set_materialize_grads(False)


def _fwd_backward(ctx, d_out, d_lse):
    q, k, v, out, lse = ctx.saved_tensors
    if d_out is None and d_lse is None:
        return (None,) * ctx.n_inputs
    if d_out is None:  # only the LSE was used
        d_out = torch.zeros_like(out)
    dq, dk, dv = torch.ops.fmha.bwd(d_out, q, k, v, out, lse, d_lse, *ctx.args)
    return (dq, dk, dv) + (None,) * (ctx.n_inputs - 3)


def _fwd_varlen_setup_context(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, q_end = inputs[:10]
    deterministic = inputs[10] if len(inputs) > 10 else False
    algorithm = inputs[11] if len(inputs) > 11 else "auto"
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
    ctx.args = (max_q, max_k, scale, causal, q_end, deterministic, algorithm)
    ctx.n_inputs = len(inputs)
    ctx.set_materialize_grads(False)


def _fwd_varlen_backward(ctx, d_out, d_lse):
    q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
    if d_out is None and d_lse is None:
        return (None,) * ctx.n_inputs
    if d_out is None:
        d_out = torch.zeros_like(out)
    dq, dk, dv = torch.ops.fmha.bwd_varlen(d_out, q, k, v, out, lse, d_lse, cu_q, cu_k, *ctx.args)
    return (dq, dk, dv) + (None,) * (ctx.n_inputs - 3)


torch.library.register_autograd("fmha::fwd", _fwd_backward, setup_context=_fwd_setup_context)
torch.library.register_autograd("fmha::fwd_varlen", _fwd_varlen_backward, setup_context=_fwd_varlen_setup_context)


def combine(out_parts, lse_parts, *, out_dtype=None):
    """The LSE-weighted merge of partial attention results over the same rows (``torch.ops.fmha.combine``; the
    split-KV reduction that decode and :mod:`fmha.distributed`'s ring attention use).

    Args:
      out_parts: float32 ``[n, *rows, d]`` (contiguous, CUDA): n partial outputs, each normalised by its own softmax
        sum (e.g. :func:`attention`'s ``out`` over a part of the keys, in float32), ``d`` ≤ 512.
      lse_parts: float32 ``[n, *rows]`` (contiguous): their LSE (natural log); ``-inf`` marks a part that saw no key
        (it contributes exactly 0 and its output is never read).
      out_dtype: the merged output's dtype (float32 by default, or float16 / bfloat16).

    Returns:
      ``out`` ``[*rows, d]`` = Σ exp(LSE_s − LSE) · O_s and ``lse`` ``[*rows]`` = ln Σ exp(LSE_s) (float32); a row
      with no non-empty part gets 0 and ``-inf``. Not differentiable.

    Raises:
      ValueError naming the argument: dtypes other than float32, shapes that do not match, non-contiguous tensors,
      ``d`` outside 1 … 512, no part, ``n × rows`` ≥ 2^31 − 64, tensors not on one CUDA device, another
      ``out_dtype``; NotImplementedError without an sm_90 GPU; RuntimeError for a CUDA failure.

    Example: :func:`attention` returns ``out`` ``[b, s, h, d]`` but ``lse`` ``[b, h, s]``, so its LSE is transposed to
    the rows of ``out`` first::

        o1, l1 = attention(q, k[:, :half], v[:, :half], return_lse=True)
        o2, l2 = attention(q, k[:, half:], v[:, half:], return_lse=True)
        out, lse = combine(torch.stack([o1.float(), o2.float()]),
                           torch.stack([l1.transpose(1, 2), l2.transpose(1, 2)]))
        # out [b, s, h, d] float32 ≈ attention(q, k, v) (up to the halves' rounding to q's dtype); lse [b, s, h]
    """
    return torch.ops.fmha.combine(out_parts, lse_parts, out_dtype)


class DecodePlan:
    """What a :func:`decode` call launches, fixed by the shapes and two integers (no device values), so that a CUDA
    graph captured with one plan replays with any cache lengths up to ``max_seqlen_k``.

    Args:
      max_seqlen_k: bound on every sequence's keys after the append; 0 = the cache's capacity.
      num_splits: key splits per (sequence, K/V head); 0 = the library's heuristic (batch × K/V heads × length
        against the SM count).
    """

    __slots__ = ("max_seqlen_k", "num_splits")

    def __init__(self, max_seqlen_k=0, num_splits=0):
        self.max_seqlen_k = _length("max_seqlen_k", max_seqlen_k)
        self.num_splits = _length("num_splits", num_splits)

    def __repr__(self):
        return f"DecodePlan(max_seqlen_k={self.max_seqlen_k}, num_splits={self.num_splits})"


def decode(q, k_cache, v_cache, seqlens_k, *, page_table=None, cache_batch_idx=None, k_new=None, v_new=None,
           plan=None, softmax_scale=None, return_lse=False):
    """Decode: ``n`` new query tokens per sequence against a KV cache (FlashAttention's ``flash_attn_with_kvcache``
    semantics).

    Args:
      q: ``[b, n, h, d]`` float16 or bfloat16 on a CUDA device (sm_90), ``1 <= n <= 16``.
      k_cache, v_cache: contiguous ``[slots, capacity, h_k, d]``, or with ``page_table`` paged
        ``[num_pages, page_size, h_k, d]`` (any ``page_size`` ≥ 1; multiples of 64 are fastest); q's dtype; modified in place when
        ``k_new`` is given.
      seqlens_k: int32 ``[b]`` on q's device: tokens already in each sequence's cache before this call.
      page_table: int32 ``[rows, pages_per_seq]``: row ``c`` lists the pages of slot ``c``.
      cache_batch_idx: int32 ``[b]``: the slot (or page-table row) of sequence ``i`` (default ``i``).
      k_new, v_new: ``[b, n, h_k, d]``: appended at positions ``seqlens_k[i] …`` and attended (without them the
        ``n`` tokens' keys must already be the cache's last ``n``: cache-only).
      plan: a :class:`DecodePlan` (default ``DecodePlan()``).
      softmax_scale: ``None`` = ``1 / sqrt(d)``.
      return_lse: also return the LSE.

    Token ``t`` of sequence ``i`` sees keys ``0 … L_i - n + t`` with ``L_i = seqlens_k[i] (+ n with an append)``
    (causal q-end); a token that sees no key gets ``O = 0`` and ``LSE = -inf``. Device values are clamped to the
    plan's and the cache's bounds, never trusted (never a read or write outside the tensors). Rotary embedding is not
    applied: rotate ``k_new`` first.

    Returns:
      ``out`` ``[b, n, h, d]`` (contiguous, q's dtype), and with ``return_lse`` also ``lse`` ``[b, n, h]`` (float32).
    """
    plan = DecodePlan() if plan is None else plan
    out, lse = torch.ops.fmha.decode(q, k_cache, v_cache, seqlens_k, page_table, cache_batch_idx, k_new, v_new,
                                     plan.max_seqlen_k, plan.num_splits, _scale(softmax_scale, q.shape[-1]))
    return (out, lse) if return_lse else out
