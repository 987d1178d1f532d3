// Views of wgmma accumulator fragments shared by the mainloop, the online softmax and the epilogues.
#pragma once

#include <cute/tensor.hpp>

namespace fmha::kernel {

/// View of a wgmma accumulator ((2, 2, V), M, N) as (rows, columns) = ((2, M), (2, V, N)) for row reductions.
template <class Layout>
CUTLASS_DEVICE constexpr auto acc_rowcol(Layout l) {
  using namespace cute;
  auto l0 = get<0>(l);
  return make_layout(make_layout(get<1>(l0), get<1>(l)), make_layout(get<0>(l0), get<2>(l0), get<2>(l)));
}

}  // namespace fmha::kernel
