// fmha CLI core: comma expansion of command lines into runs (docs/seed.md §2.0), done by a loop, not by recursing into main.
#pragma once

#include <string>
#include <vector>

namespace fmha::cli {

/// Expands every argument whose value contains commas into the cross product of runs.
///
/// For an argument with commas, the text up to and including the first '=' is kept as a prefix and the rest is
/// split at every ',' (empty pieces are kept, so `--mask=causal,` gives `--mask=causal` and `--mask=`; the parser
/// then judges them). An argument without '=' is split as a whole. Arguments keep their positions. The first
/// argument with commas varies slowest, the last fastest, which is the order the seed's recursive expansion
/// produces: `--mask=causal,residual --d=64,128` gives
///   [--mask=causal --d=64], [--mask=causal --d=128], [--mask=residual --d=64], [--mask=residual --d=128].
/// `args` excludes the program name. Without commas the result is the single run `args` (also when `args` is
/// empty: one run with no arguments).
std::vector<std::vector<std::string>> expand_runs(const std::vector<std::string>& args);

/// Number of runs expand_runs would produce (the product of the piece counts), without building them; saturates
/// at SIZE_MAX. Lets a tool refuse an accidental million-run sweep before allocating it.
size_t count_runs(const std::vector<std::string>& args);

/// Splits `text` at every `sep`, keeping empty pieces ("a,,b" → "a", "", "b"; "" → one empty piece).
std::vector<std::string> split(const std::string& text, char sep);

}  // namespace fmha::cli
