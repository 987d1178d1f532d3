// fmha CLI core: option table, parser and --help (see options.h for the syntax and why this is not CLI11).
#include "common/options.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace fmha::cli {
namespace {

// Prints a bound: integers without a fractional part, others with up to 6 significant digits.
std::string bound_text(double v) {
  std::ostringstream os;
  if (std::floor(v) == v && std::fabs(v) < 1e15) {
    os << static_cast<long long>(v);
  } else {
    os << v;
  }
  return os.str();
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// Allowed values joined by '|', with an allowed empty string shown as "".
std::string join_allowed(const std::vector<std::string>& allowed) {
  std::vector<std::string> shown;
  for (const auto& a : allowed) shown.push_back(a.empty() ? "\"\"" : a);
  return join(shown, "|");
}

// Levenshtein distance, used only to suggest a declared name for a misspelt option.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool in_range(const OptionSpec& s, double v) {
  return (!s.min || v >= *s.min) && (!s.max || v <= *s.max);
}

// Checks a value's text against its spec. Returns "" when it is valid, else the complete message.
std::string validate_value(const OptionSpec& s, const std::optional<std::string>& value) {
  const std::string got = value ? "got " + quoted(*value) : "got no value (write --" + s.name + "=<value>)";
  const std::string fail = "--" + s.name + ": " + s.expectation() + ", " + got;
  if (s.kind == OptKind::kFlag) {
    if (!value) return "";
    const std::string& v = *value;
    if (v == "1" || v == "0" || v == "true" || v == "false") return "";
    return "--" + s.name + ": expected a bare flag (or =1, =0, =true, =false), got " + quoted(v);
  }
  if (!value) return fail;
  const std::string& v = *value;
  switch (s.kind) {
    case OptKind::kInt: {
      const auto x = parse_int(v);
      if (!x || !in_range(s, *x)) return fail;
      break;
    }
    case OptKind::kFloat: {
      const auto x = parse_float(v);
      if (!x || !in_range(s, *x)) return fail;
      break;
    }
    case OptKind::kIntList: {
      const auto xs = parse_int_list(v);
      if (!xs) return fail;
      for (int x : *xs) {
        if (!in_range(s, x)) return fail;
      }
      break;
    }
    case OptKind::kChar:
      if (v.size() != 1) return fail;
      [[fallthrough]];
    case OptKind::kString:
      if (!s.allowed.empty() && std::find(s.allowed.begin(), s.allowed.end(), v) == s.allowed.end()) return fail;
      break;
    case OptKind::kFlag:
      break;
  }
  if (s.validator) {
    const std::string why = s.validator(v);
    if (!why.empty()) return "--" + s.name + ": " + why;
  }
  return "";
}

}  // namespace

const char* kind_placeholder(OptKind kind) {
  switch (kind) {
    case OptKind::kInt: return "int";
    case OptKind::kFloat: return "float";
    case OptKind::kString: return "str";
    case OptKind::kFlag: return "";
    case OptKind::kIntList: return "int:int:...";
    case OptKind::kChar: return "c";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------------------------
// Value conversion
// ---------------------------------------------------------------------------------------------------------------

std::optional<int> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t i = (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (i == text.size()) return std::nullopt;
  for (size_t j = i; j < text.size(); ++j) {
    if (text[j] < '0' || text[j] > '9') return std::nullopt;
  }
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < INT_MIN || v > INT_MAX) return std::nullopt;
  return static_cast<int>(v);
}

std::optional<double> parse_float(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::vector<int>> parse_int_list(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::vector<int> out;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    const auto x = parse_int(text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (!x) return std::nullopt;
    out.push_back(*x);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// OptionSpec
// ---------------------------------------------------------------------------------------------------------------

OptionSpec& OptionSpec::at_least(double m) {
  min = m;
  return *this;
}
OptionSpec& OptionSpec::at_most(double m) {
  max = m;
  return *this;
}
OptionSpec& OptionSpec::range(double lo, double hi) {
  min = lo;
  max = hi;
  return *this;
}
OptionSpec& OptionSpec::default_text_is(std::string text) {
  default_text = std::move(text);
  return *this;
}
OptionSpec& OptionSpec::one_of(std::vector<std::string> values) {
  allowed = std::move(values);
  return *this;
}
OptionSpec& OptionSpec::value_name_is(std::string name) {
  value_name = std::move(name);
  return *this;
}
OptionSpec& OptionSpec::check(std::function<std::string(const std::string&)> fn) {
  validator = std::move(fn);
  return *this;
}

std::string OptionSpec::expectation() const {
  std::string bounds;
  if (min && max) {
    bounds = " in [" + bound_text(*min) + ", " + bound_text(*max) + "]";
  } else if (min) {
    bounds = " ≥ " + bound_text(*min);
  } else if (max) {
    bounds = " ≤ " + bound_text(*max);
  }
  switch (kind) {
    case OptKind::kInt: return "expected an integer" + bounds;
    case OptKind::kFloat: return "expected a number" + bounds;
    case OptKind::kIntList: return "expected a ':'-separated list of integers" + bounds;
    case OptKind::kFlag: return "expected a bare flag";
    case OptKind::kChar:
      if (allowed.empty()) return "expected a single character";
      return "expected one of " + join_allowed(allowed);
    case OptKind::kString:
      if (allowed.empty()) return "expected a string";
      return "expected one of " + join_allowed(allowed);
  }
  return "expected a value";
}

// ---------------------------------------------------------------------------------------------------------------
// ParsedOptions
// ---------------------------------------------------------------------------------------------------------------

const OptionSpec& ParsedOptions::spec(const std::string& name, OptKind kind) const {
  if (!specs_) throw std::logic_error("ParsedOptions used before parsing");
  const auto it = specs_->find(name);
  if (it == specs_->end()) throw std::logic_error("option --" + name + " is not declared in the option table");
  if (it->second.kind != kind) {
    throw std::logic_error("option --" + name + " is read as " + std::string(kind_placeholder(kind)) +
                           " but declared as " + kind_placeholder(it->second.kind));
  }
  return it->second;
}

std::optional<std::string> ParsedOptions::raw(const std::string& name) const {
  const auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  return specs_->at(name).default_value;
}

bool ParsedOptions::given(const std::string& name) const {
  if (!declared(name)) throw std::logic_error("option --" + name + " is not declared in the option table");
  return values_.count(name) != 0;
}

bool ParsedOptions::declared(const std::string& name) const { return specs_ && specs_->count(name) != 0; }

std::optional<int> ParsedOptions::find_int(const std::string& name) const {
  spec(name, OptKind::kInt);
  const auto v = raw(name);
  return v ? parse_int(*v) : std::nullopt;
}

int ParsedOptions::get_int(const std::string& name) const {
  const auto v = find_int(name);
  if (!v) throw std::logic_error("option --" + name + " is unset (no default); use find_int");
  return *v;
}

std::optional<double> ParsedOptions::find_float(const std::string& name) const {
  spec(name, OptKind::kFloat);
  const auto v = raw(name);
  return v ? parse_float(*v) : std::nullopt;
}

double ParsedOptions::get_float(const std::string& name) const {
  const auto v = find_float(name);
  if (!v) throw std::logic_error("option --" + name + " is unset (no default); use find_float");
  return *v;
}

std::optional<std::string> ParsedOptions::find_string(const std::string& name) const {
  spec(name, OptKind::kString);
  return raw(name);
}

std::string ParsedOptions::get_string(const std::string& name) const {
  const auto v = find_string(name);
  if (!v) throw std::logic_error("option --" + name + " is unset (no default); use find_string");
  return *v;
}

std::optional<char> ParsedOptions::find_char(const std::string& name) const {
  spec(name, OptKind::kChar);
  const auto v = raw(name);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

char ParsedOptions::get_char(const std::string& name) const {
  const auto v = find_char(name);
  if (!v) throw std::logic_error("option --" + name + " is unset (no default); use find_char");
  return *v;
}

bool ParsedOptions::flag(const std::string& name) const {
  spec(name, OptKind::kFlag);
  const auto it = values_.find(name);
  if (it == values_.end()) return false;
  return it->second.empty() || it->second == "1" || it->second == "true";
}

std::optional<std::vector<int>> ParsedOptions::find_int_list(const std::string& name) const {
  spec(name, OptKind::kIntList);
  const auto v = raw(name);
  return v ? parse_int_list(*v) : std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// OptionTable
// ---------------------------------------------------------------------------------------------------------------

OptionTable::OptionTable(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  add_flag("help", "Print this help and exit.");
}

OptionSpec& OptionTable::add(const std::string& name, OptKind kind, const std::string& help) {
  if (name.empty() || name[0] == '-' || name.find_first_of("=, ") != std::string::npos) {
    throw std::logic_error("invalid option name \"" + name + "\" (no leading '-', no '=', ',' or space)");
  }
  if (specs_.count(name)) throw std::logic_error("option --" + name + " is declared twice");
  OptionSpec& s = specs_[name];
  s.name = name;
  s.kind = kind;
  s.help = help;
  order_.push_back(name);
  return s;
}

OptionSpec& OptionTable::add_int(const std::string& name, const std::string& help, std::optional<int> def) {
  OptionSpec& s = add(name, OptKind::kInt, help);
  if (def) s.default_value = std::to_string(*def);
  return s;
}

OptionSpec& OptionTable::add_float(const std::string& name, const std::string& help, std::optional<double> def) {
  OptionSpec& s = add(name, OptKind::kFloat, help);
  if (def) {
    std::ostringstream os;
    os.precision(17);
    os << *def;
    s.default_value = os.str();
  }
  return s;
}

OptionSpec& OptionTable::add_string(const std::string& name, const std::string& help, std::optional<std::string> def,
                                    std::vector<std::string> allowed) {
  OptionSpec& s = add(name, OptKind::kString, help);
  s.default_value = std::move(def);
  s.allowed = std::move(allowed);
  return s;
}

OptionSpec& OptionTable::add_flag(const std::string& name, const std::string& help) {
  return add(name, OptKind::kFlag, help);
}

OptionSpec& OptionTable::add_int_list(const std::string& name, const std::string& help) {
  return add(name, OptKind::kIntList, help);
}

OptionSpec& OptionTable::add_char(const std::string& name, const std::string& help, std::optional<char> def,
                                  const std::string& allowed) {
  OptionSpec& s = add(name, OptKind::kChar, help);
  if (def) s.default_value = std::string(1, *def);
  for (char c : allowed) s.allowed.emplace_back(1, c);
  return s;
}

const OptionSpec& OptionTable::spec(const std::string& name) const {
  const auto it = specs_.find(name);
  if (it == specs_.end()) throw std::logic_error("option --" + name + " is not declared in the option table");
  return it->second;
}

std::string OptionTable::suggest(const std::string& name) const {
  std::string best;
  size_t best_d = 3;
  for (const auto& n : order_) {
    const size_t d = edit_distance(name, n);
    if (d < best_d && d < n.size()) {
      best = n;
      best_d = d;
    }
  }
  return best;
}

ParseResult OptionTable::parse(const std::vector<std::string>& args) const {
  ParseResult r;
  r.options.specs_ = std::make_shared<const std::map<std::string, OptionSpec>>(specs_);
  r.options.args_ = args;
  for (const std::string& arg : args) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0 || arg[2] == '=') {
      std::string hint = "options take the form --name=value or --flag";
      if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') hint += " (did you mean -" + arg + "?)";
      r.error = "unexpected argument " + quoted(arg) + ": " + hint;
      return r;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::optional<std::string> value =
        eq == std::string::npos ? std::nullopt : std::optional<std::string>(arg.substr(eq + 1));
    const auto it = specs_.find(name);
    if (it == specs_.end()) {
      r.error = "unknown option " + quoted("--" + name);
      const std::string s = suggest(name);
      if (!s.empty()) r.error += " (did you mean --" + s + "?)";
      r.error += "; see --help";
      return r;
    }
    const std::string why = validate_value(it->second, value);
    if (!why.empty()) {
      r.error = why;
      return r;
    }
    r.options.values_[name] = value.value_or("");
    if (name == "help") r.options.help_ = r.options.flag("help");
  }
  return r;
}

std::string OptionTable::help_text() const {
  std::ostringstream os;
  os << program_ << ": " << summary_ << "\n\n"
     << "Usage: " << program_ << " [--name=value | --flag]...\n"
     << "A value with commas (--d=64,128) runs the tool once per value; with several such options every\n"
     << "combination runs, the first option varying slowest. The process exits 0 only if every run passed.\n\n"
     << "Options:\n";
  std::vector<std::string> lefts;
  size_t width = 0;
  for (const auto& n : order_) {
    const OptionSpec& s = specs_.at(n);
    std::string left = "  --" + n;
    if (s.kind != OptKind::kFlag) {
      if (!s.value_name.empty()) {
        left += "=<" + s.value_name + ">";
      } else if (!s.allowed.empty() && s.allowed.size() <= 8) {
        left += "=<" + join_allowed(s.allowed) + ">";
      } else {
        left += std::string("=<") + kind_placeholder(s.kind) + ">";
      }
    }
    width = std::max(width, left.size());
    lefts.push_back(left);
  }
  width = std::min<size_t>(width, 40);
  for (size_t i = 0; i < order_.size(); ++i) {
    const OptionSpec& s = specs_.at(order_[i]);
    std::string line = lefts[i];
    if (line.size() < width) line += std::string(width - line.size(), ' ');
    line += "  " + s.help;
    std::vector<std::string> notes;
    if (s.kind != OptKind::kFlag) {
      if (!s.default_text.empty()) {
        notes.push_back("default: " + s.default_text);
      } else if (s.default_value) {
        notes.push_back("default: " + (s.default_value->empty() ? std::string("\"\"") : *s.default_value));
      } else {
        notes.push_back("default: unset");
      }
      if (s.min || s.max) {
        std::string e = s.expectation();
        notes.push_back(e.substr(e.find("expected ") + 9));
      }
      if (s.allowed.size() > 8) notes.push_back("one of " + join_allowed(s.allowed));
    }
    if (!notes.empty()) line += " [" + join(notes, "; ") + "]";
    os << line << "\n";
  }
  return os.str();
}

// ---------------------------------------------------------------------------------------------------------------
// Options shared by the tools
// ---------------------------------------------------------------------------------------------------------------

void add_common_options(OptionTable& t, const CommonOptionSet& set) {
  t.add_flag("verify", "Check the results against the CPU reference; without it the tag is [--].");
  t.add_flag("verbose", "Print time and shared memory per result: t=<ms>ms, smem=<bytes>b.");
  t.add_int("iterations", "Timed runs; the median and mean time are reported.", set.iterations_default).at_least(0);
  if (set.warmup) t.add_int("warmup_iterations", "Untimed runs before timing.", set.warmup_default).at_least(0);
  if (set.ring_buffers) {
    t.add_int("tensor_ring_buffers",
              "Independent input/output buffer sets; each timed run uses the next one (defeats L2 reuse). "
              "Verification uses set 0.",
              1)
        .at_least(1);
  }
  t.add_int("sm-count", "SM count handed to the kernels; 0 queries the device.", 0).at_least(0);
  if (set.kernel_filter) {
    t.add_string("kernel-filter", "Run only kernel variants whose name matches this regex (std::regex search).")
        .default_text_is("all kernels")
        .value_name_is("regex")
        .check([](const std::string& v) -> std::string {
          try {
            std::regex re(v);
          } catch (const std::regex_error& e) {
            return "expected a valid ECMAScript regex, got \"" + v + "\" (" + e.what() + ")";
          }
          return "";
        });
  }
  if (set.list_kernels) t.add_flag("list-kernels", "List the kernel variants of this tool and exit (needs no GPU).");
  t.add_string("json", "Also write one JSON object per result to this file.")
      .default_text_is("no file")
      .value_name_is("file");
  std::string styles;
  for (char c : set.init_styles) {
    static const std::map<char, const char*> kWhat = {
        {'r', "r random Gaussian"}, {'1', "1 ones"},          {'0', "0 zeros"},
        {'d', "d j%4 per chunk"},   {'s', "s chunk index%4"}, {'l', "l Gaussian(-1, 100)"},
        {'n', "n uninitialised"}};
    const auto it = kWhat.find(c);
    if (it == kWhat.end()) continue;
    styles += (styles.empty() ? "" : ", ") + std::string(it->second);
  }
  t.add_char("init-style", "Fill style of every input: " + styles + ".", 'r', set.init_styles);
  for (const auto& tensor : set.init_tensors) {
    t.add_char("init-style-" + tensor, "Fill style of " + tensor + " (overrides --init-style).", std::nullopt,
               set.init_styles)
        .default_text_is("--init-style");
  }
}

}  // namespace fmha::cli
