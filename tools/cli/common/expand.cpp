// fmha CLI core: comma expansion (see expand.h).
#include "common/expand.h"

#include <cstdint>

namespace fmha::cli {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = text.find(sep, start);
    if (pos == std::string::npos) {
      out.push_back(text.substr(start));
      return out;
    }
    out.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

namespace {

// The alternatives for one argument: itself when it has no comma, else prefix + each piece.
std::vector<std::string> alternatives(const std::string& arg) {
  if (arg.find(',') == std::string::npos) return {arg};
  const size_t eq = arg.find('=');
  // A comma before the first '=' belongs to the name: split the whole argument (the parser rejects the pieces
  // as unknown options, which names them).
  const size_t cut = (eq == std::string::npos || arg.find(',') < eq) ? 0 : eq + 1;
  std::vector<std::string> out;
  for (auto& piece : split(arg.substr(cut), ',')) out.push_back(arg.substr(0, cut) + piece);
  return out;
}

}  // namespace

size_t count_runs(const std::vector<std::string>& args) {
  size_t n = 1;
  for (const auto& a : args) {
    size_t pieces = 1;
    for (char c : a) pieces += (c == ',');
    if (pieces > 1 && n > SIZE_MAX / pieces) return SIZE_MAX;
    n *= pieces;
  }
  return n;
}

std::vector<std::vector<std::string>> expand_runs(const std::vector<std::string>& args) {
  std::vector<std::vector<std::string>> choices;
  choices.reserve(args.size());
  for (const auto& a : args) choices.push_back(alternatives(a));

  // Odometer over the choice indices: the last argument is the fastest digit, so the first comma argument varies
  // slowest, as in the seed's recursion.
  std::vector<size_t> index(args.size(), 0);
  std::vector<std::vector<std::string>> runs;
  while (true) {
    std::vector<std::string> run;
    run.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) run.push_back(choices[i][index[i]]);
    runs.push_back(std::move(run));
    size_t digit = args.size();
    while (digit > 0) {
      --digit;
      if (++index[digit] < choices[digit].size()) break;
      index[digit] = 0;
      if (digit == 0) return runs;
    }
    if (args.empty()) return runs;
  }
}

}  // namespace fmha::cli
