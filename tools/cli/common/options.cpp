// fmha CLI core: option table, parser and --help. Parsing, conversion, the value checks and the help layout are
// CLI11's (CLI::App built per call from the table); this file adds the seed-syntax pre-check, the seed's value forms
// and our error messages on top (see options.h).
#include "common/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
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

// The message for a value that does not fit its entry: `--b: expected an integer ≥ 1, got "x"`; `value` is the
// text after '=' as written (nullopt: the argument had no '=').
std::string bad_value(const OptionSpec& s, const std::optional<std::string>& value) {
  if (s.kind == OptKind::kFlag) {
    return "--" + s.name + ": expected a bare flag (or =1, =0, =true, =false), got " + quoted(value.value_or(""));
  }
  const std::string got = value ? "got " + quoted(*value) : "got no value (write --" + s.name + "=<value>)";
  return "--" + s.name + ": " + s.expectation() + ", " + got;
}

// Seed integers are decimal with an optional sign. Returns the same number in the form CLI11 2.1.2 reads as decimal
// (its conversion is strtoll(..., 0), so "010" would be octal 8): leading zeros dropped. nullopt for anything else
// ("0x10", " 3", "1.5", ""), which strtoll would partly accept.
std::optional<std::string> seed_decimal(const std::string& text) {
  const size_t digits = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  if (digits == text.size()) return std::nullopt;
  for (size_t j = digits; j < text.size(); ++j) {
    if (text[j] < '0' || text[j] > '9') return std::nullopt;
  }
  const size_t first = text.find_first_not_of('0', digits);
  const std::string magnitude = first == std::string::npos ? "0" : text.substr(first);
  return (text[0] == '-' ? "-" : "") + magnitude;
}

// True when an `a:b:c` list has an empty element ("", "4:", ":4", "1::2"). CLI11's delimiter split drops those
// silently, so they are rejected before the list reaches it.
bool has_empty_element(const std::string& list) {
  return list.empty() || list.front() == ':' || list.back() == ':' || list.find("::") != std::string::npos;
}

// ---------------------------------------------------------------------------------------------------------------
// The CLI11 side: one CLI::App per parse()/help_text() call
// ---------------------------------------------------------------------------------------------------------------

// Where CLI11 stores one option's converted value; only the member of the option's kind is used.
struct Slot {
  bool flag = false;
  int i = 0;
  double f = 0;
  std::string s;
  char c = 0;
  std::vector<int> list;
};

// One argument that passed the seed-syntax pre-check: a declared name and the text after '=' (nullopt: none).
struct Token {
  const OptionSpec* spec = nullptr;
  std::optional<std::string> value;
};

// --help layout in the seed's terms; the rest (description, "Options:" group, column alignment) is CLI11's.
class SeedHelpFormatter : public CLI::Formatter {
 public:
  // CLI11 would print "Usage: prog [OPTIONS]"; ours states the one accepted syntax and the comma rule.
  std::string make_usage(const CLI::App*, std::string name) const override {
    return "\nUsage: " + name + " [--name=value | --flag]...\n" +
           "A value with commas (--d=64,128) runs the tool once per value; with several such options every\n"
           "combination runs, the first option varying slowest. The process exits 0 only if every run passed.\n";
  }
  // CLI11 would print "--b INT"; the left column is `--b=<int>` (the option text holds "=<int>").
  std::string make_option_opts(const CLI::Option* opt) const override { return opt->get_option_text(); }
};

// A CLI::App mirroring an option table. Each entry becomes a CLI11 option bound to a Slot, its constraints become
// CLI11 validators, and trigger_on_parse makes CLI11 convert and check every occurrence as it reads it: the first bad
// argument on the command line is the one reported, and a repeated option keeps its last value.
class Cli11App {
 public:
  Cli11App(const std::string& program, const std::string& summary, const std::vector<std::string>& order,
           const std::map<std::string, OptionSpec>& specs);
  Cli11App(const Cli11App&) = delete;
  Cli11App& operator=(const Cli11App&) = delete;

  // Parses pre-checked tokens. Returns "" or the error message for the first bad one.
  std::string parse(const std::vector<Token>& tokens);
  // The converted value of a given option (after a successful parse).
  const Slot& slot(const std::string& name) const { return slots_.at(name); }
  // CLI11's help text in our layout.
  std::string help();

 private:
  const Token* current() const;
  std::string run_validator(const OptionSpec& s, const std::string& element);

  CLI::App app_;
  std::map<std::string, Slot> slots_;  // std::map: the references bound into app_ stay valid
  size_t help_width_ = 0;
  const std::vector<Token>* tokens_ = nullptr;  // during parse()
  std::string validator_error_;                 // set when an entry's own validator rejected the value
  const Token* list_token_ = nullptr;           // the list whose elements run_validator is counting
  size_t list_elements_seen_ = 0;
};

// The --help placeholder after the name: "=<int>", "=<file>", "=<no|causal>", or "" for a flag.
std::string placeholder(const OptionSpec& s) {
  if (s.kind == OptKind::kFlag) return "";
  if (!s.value_name.empty()) return "=<" + s.value_name + ">";
  if (!s.allowed.empty() && s.allowed.size() <= 8) return "=<" + join_allowed(s.allowed) + ">";
  return std::string("=<") + kind_placeholder(s.kind) + ">";
}

// The --help description: the entry's help, then its default, bounds and (long) list of allowed values.
std::string help_description(const OptionSpec& s) {
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
      const std::string e = s.expectation();
      notes.push_back(e.substr(e.find("expected ") + 9));
    }
    if (s.allowed.size() > 8) notes.push_back("one of " + join_allowed(s.allowed));
  }
  return notes.empty() ? s.help : s.help + " [" + join(notes, "; ") + "]";
}

Cli11App::Cli11App(const std::string& program, const std::string& summary, const std::vector<std::string>& order,
                   const std::map<std::string, OptionSpec>& specs)
    : app_(program + ": " + summary, program) {
  app_.set_help_flag();  // --help is an ordinary entry of the table (help_requested() reads it)
  // Checks for the seed's value forms where CLI11's conversion is wider (see seed_decimal and parse_float).
  const CLI::Validator decimal(
      [](std::string& v) -> std::string {
        const auto d = seed_decimal(v);
        if (!d) return "not a decimal integer";
        v = *d;
        return "";
      },
      "DECIMAL");
  const CLI::Validator finite_number(
      [](std::string& v) -> std::string { return parse_float(v) ? "" : "not a finite number"; }, "NUMBER");
  const CLI::Validator one_char([](std::string& v) -> std::string { return v.size() == 1 ? "" : "not one character"; },
                                "CHAR");
  for (const std::string& name : order) {
    const OptionSpec& s = specs.at(name);
    Slot& slot = slots_[name];
    const std::string flag_name = "--" + name;
    CLI::Option* opt = nullptr;
    switch (s.kind) {
      case OptKind::kFlag:
        opt = app_.add_flag(flag_name, slot.flag)->check(CLI::IsMember(std::vector<std::string>{"1", "0", "true",
                                                                                                   "false"}));
        break;
      case OptKind::kInt:
        opt = app_.add_option(flag_name, slot.i)->transform(decimal)->check(CLI::TypeValidator<int>());
        break;
      case OptKind::kFloat:
        opt = app_.add_option(flag_name, slot.f)->check(finite_number);
        break;
      case OptKind::kString:
        opt = app_.add_option(flag_name, slot.s);
        break;
      case OptKind::kChar:
        opt = app_.add_option(flag_name, slot.c);
        if (s.allowed.empty()) opt->check(one_char);
        break;
      case OptKind::kIntList:
        // One argument per occurrence, split at ':' by CLI11; every element is checked and converted.
        opt = app_.add_option(flag_name, slot.list)
                  ->delimiter(':')
                  ->allow_extra_args(false)
                  ->transform(decimal)
                  ->check(CLI::TypeValidator<int>());
        break;
    }
    if (s.min || s.max) {
      opt->check(CLI::Range(s.min.value_or(std::numeric_limits<double>::lowest()),
                            s.max.value_or(std::numeric_limits<double>::max())));
    }
    if (!s.allowed.empty() && (s.kind == OptKind::kString || s.kind == OptKind::kChar)) {
      opt->check(CLI::IsMember(s.allowed));
    }
    if (s.validator) {
      opt->check(CLI::Validator([this, &s](std::string& v) { return run_validator(s, v); }, "CHECK"));
    }
    opt->trigger_on_parse()->option_text(placeholder(s))->description(help_description(s));
    help_width_ = std::max(help_width_, 2 + flag_name.size() + opt->get_option_text().size());
  }
}

const Token* Cli11App::current() const {
  // Every token adds exactly one entry to CLI11's parse order (the flag, or the option with its value), so the
  // option CLI11 is working on belongs to token parse_order().size() - 1.
  const auto& seen = app_.parse_order();
  if (tokens_ == nullptr || seen.empty() || seen.size() > tokens_->size()) return nullptr;
  const Token& t = (*tokens_)[seen.size() - 1];
  return seen.back()->check_lname(t.spec->name) ? &t : nullptr;
}

std::string Cli11App::run_validator(const OptionSpec& s, const std::string& element) {
  // The entry's validator sees the value as written (CLI11 may have normalised it, e.g. "+08" to "8"); a list is
  // validated element by element by CLI11, so its validator runs once, on the whole list, after the last element.
  const Token* t = current();
  const std::string value = t ? t->value.value_or("") : element;
  if (t && s.kind == OptKind::kIntList) {
    if (t != list_token_) {
      list_token_ = t;
      list_elements_seen_ = 0;
    }
    const size_t elements = static_cast<size_t>(std::count(value.begin(), value.end(), ':')) + 1;
    if (++list_elements_seen_ < elements) return "";
  }
  validator_error_ = s.validator(value);
  return validator_error_;
}

std::string Cli11App::parse(const std::vector<Token>& tokens) {
  // CLI11 reads `--name value` (so an empty value survives; CLI11 drops an empty `--name=`) and a flag as written.
  std::vector<std::string> argv;
  for (const Token& t : tokens) {
    if (t.spec->kind == OptKind::kFlag) {
      argv.push_back("--" + t.spec->name + (t.value ? "=" + *t.value : ""));
    } else {
      argv.push_back("--" + t.spec->name);
      argv.push_back(*t.value);
    }
  }
  std::reverse(argv.begin(), argv.end());  // CLI::App::parse(std::vector&) takes the arguments last first
  tokens_ = &tokens;
  validator_error_.clear();
  std::string error;
  try {
    app_.parse(argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's ConversionError / ValidationError texts ("Value 0 not in range ...") are replaced by ours.
    const Token* t = current();
    if (t == nullptr) {
      error = e.what();  // not expected: every token maps to one CLI11 option
    } else if (!validator_error_.empty()) {
      error = "--" + t->spec->name + ": " + validator_error_;
    } else {
      error = bad_value(*t->spec, t->value);
    }
  }
  tokens_ = nullptr;
  return error;
}

std::string Cli11App::help() {
  auto formatter = std::make_shared<SeedHelpFormatter>();
  // CLI11 starts the description at column `width` and moves it to the next line when the left column reaches it.
  formatter->column_width(std::min<size_t>(help_width_, 40) + 2);
  app_.formatter(formatter);
  std::string text = app_.help();
  while (text.size() >= 2 && text.compare(text.size() - 2, 2, "\n\n") == 0) text.pop_back();
  return text;
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

// Both use CLI11's conversion, as the parser does, behind the seed-form checks the parser's validators make.
std::optional<int> parse_int(const std::string& text) {
  const auto decimal = seed_decimal(text);
  int v = 0;
  if (!decimal || !CLI::detail::lexical_cast(*decimal, v)) return std::nullopt;
  return v;
}

std::optional<double> parse_float(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  double v = 0;
  if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v)) return std::nullopt;
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

const ParsedOptions::Value* ParsedOptions::given_value(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

const std::optional<std::string>& ParsedOptions::default_value(const std::string& name) const {
  return specs_->at(name).default_value;
}

bool ParsedOptions::given(const std::string& name) const {
  if (!declared(name)) throw std::logic_error("option --" + name + " is not declared in the option table");
  return values_.count(name) != 0;
}

bool ParsedOptions::declared(const std::string& name) const { return specs_ && specs_->count(name) != 0; }

// Given options hold CLI11's converted value; defaults are converted from their text with the same conversion.
std::optional<int> ParsedOptions::find_int(const std::string& name) const {
  spec(name, OptKind::kInt);
  if (const Value* v = given_value(name)) return std::get<int>(*v);
  const auto& d = default_value(name);
  return d ? parse_int(*d) : std::nullopt;
}

int ParsedOptions::get_int(const std::string& name) const {
  const auto v = find_int(name);
  if (!v) throw std::logic_error("option --" + name + " is unset (no default); use find_int");
  return *v;
}

std::optional<double> ParsedOptions::find_float(const std::string& name) const {
  spec(name, OptKind::kFloat);
  if (const Value* v = given_value(name)) return std::get<double>(*v);
  const auto& d = default_value(name);
  return d ? parse_float(*d) : std::nullopt;
}

double ParsedOptions::get_float(const std::string& name) const {
  const auto v = find_float(name);
  if (!v) throw std::logic_error("option --" + name + " is unset (no default); use find_float");
  return *v;
}

std::optional<std::string> ParsedOptions::find_string(const std::string& name) const {
  spec(name, OptKind::kString);
  if (const Value* v = given_value(name)) return std::get<std::string>(*v);
  return default_value(name);
}

std::string ParsedOptions::get_string(const std::string& name) const {
  const auto v = find_string(name);
  if (!v) throw std::logic_error("option --" + name + " is unset (no default); use find_string");
  return *v;
}

std::optional<char> ParsedOptions::find_char(const std::string& name) const {
  spec(name, OptKind::kChar);
  if (const Value* v = given_value(name)) return std::get<char>(*v);
  const auto& d = default_value(name);
  if (!d || d->size() != 1) return std::nullopt;
  return (*d)[0];
}

char ParsedOptions::get_char(const std::string& name) const {
  const auto v = find_char(name);
  if (!v) throw std::logic_error("option --" + name + " is unset (no default); use find_char");
  return *v;
}

bool ParsedOptions::flag(const std::string& name) const {
  spec(name, OptKind::kFlag);
  const Value* v = given_value(name);
  return v != nullptr && std::get<bool>(*v);
}

std::optional<std::vector<int>> ParsedOptions::find_int_list(const std::string& name) const {
  spec(name, OptKind::kIntList);
  if (const Value* v = given_value(name)) return std::get<std::vector<int>>(*v);
  const auto& d = default_value(name);
  return d ? parse_int_list(*d) : std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// OptionTable
// ---------------------------------------------------------------------------------------------------------------

OptionTable::OptionTable(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  add_flag("help", "Print this help and exit.");
}

OptionSpec& OptionTable::add(const std::string& name, OptKind kind, const std::string& help) {
  // Ours: no '=' (the value separator) or ',' (comma expansion, and CLI11's name separator); CLI11's: no leading
  // '-' or '!', no ':', '{' or space.
  if (name.find(',') != std::string::npos || !CLI::detail::valid_name_string(name)) {
    throw std::logic_error("invalid option name \"" + name + "\" (no leading '-' or '!'; no '=', ',', ':', '{' or space)");
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
  // Seed-syntax pre-check (ours): `--name` or `--name=value` with a declared name, a value where one is needed, no
  // `--flag=` and no empty list element. It stops at the first argument that fails; CLI11 then parses the arguments
  // before it, so a bad value earlier on the command line is still the error reported.
  std::vector<Token> tokens;
  std::string syntax_error;
  for (const std::string& arg : args) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0 || arg[2] == '=') {
      syntax_error = "unexpected argument " + quoted(arg) + ": options take the form --name=value or --flag";
      if (arg == "-h" || arg == "-help" || arg == "-?")
        syntax_error += " (did you mean --help?)";  // not --h (the heads option)
      else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-')
        syntax_error += " (did you mean -" + arg + "?)";
      break;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto it = specs_.find(name);
    if (it == specs_.end()) {
      syntax_error = "unknown option " + quoted("--" + name);
      const std::string s = suggest(name);
      if (!s.empty()) syntax_error += " (did you mean --" + s + "?)";
      syntax_error += "; see --help";
      break;
    }
    Token t;
    t.spec = &it->second;
    if (eq != std::string::npos) t.value = arg.substr(eq + 1);
    const OptKind kind = t.spec->kind;
    if ((kind == OptKind::kFlag && t.value && t.value->empty()) || (kind != OptKind::kFlag && !t.value) ||
        (kind == OptKind::kIntList && has_empty_element(*t.value))) {
      syntax_error = bad_value(*t.spec, t.value);
      break;
    }
    tokens.push_back(std::move(t));
  }
  Cli11App cli(program_, summary_, order_, specs_);
  r.error = cli.parse(tokens);
  if (r.error.empty()) r.error = syntax_error;
  if (!r.ok()) return r;
  for (const Token& t : tokens) {
    const Slot& v = cli.slot(t.spec->name);
    ParsedOptions::Value value;
    switch (t.spec->kind) {
      case OptKind::kFlag: value.emplace<bool>(v.flag); break;
      case OptKind::kInt: value.emplace<int>(v.i); break;
      case OptKind::kFloat: value.emplace<double>(v.f); break;
      case OptKind::kString: value.emplace<std::string>(v.s); break;
      case OptKind::kChar: value.emplace<char>(v.c); break;
      case OptKind::kIntList: value.emplace<std::vector<int>>(v.list); break;
    }
    r.options.values_[t.spec->name] = std::move(value);  // the slot holds the last occurrence
  }
  r.options.help_ = r.options.flag("help");
  return r;
}

std::string OptionTable::help_text() const { return Cli11App(program_, summary_, order_, specs_).help(); }

// ---------------------------------------------------------------------------------------------------------------
// Options shared by the tools
// ---------------------------------------------------------------------------------------------------------------

void add_common_options(OptionTable& t, const CommonOptionSet& set) {
  t.add_flag("verify", set.verify_help);
  t.add_flag("verbose", "Print the median time per result: t=<ms>ms.");
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
  t.add_string("json", "Also write the results to this file: one JSON document per run of the tool, its results in "
                       "the array `runs`.")
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
