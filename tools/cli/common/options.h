// fmha CLI core: the option table that drives both argument parsing and --help.
//
// Every tool declares one OptionTable. The table is the single source of truth: the parser accepts exactly the
// options it lists, converts and range-checks their values, and --help is generated from the same entries, so the
// help text cannot drift from what the parser reads.
//
// Syntax (the seed's, docs/seed.md §2.0): `--name=value`, a bare `--flag`, and int lists written `--varlen-q=128:0:256`.
// Nothing else is accepted: no `--name value`, no short options, no positional arguments. A repeated option keeps
// its last value (as the seed's parser does), so a repro line can be rerun with an override appended.
// Comma lists (`--d=64,128`) are expanded into separate runs before parsing; see expand.h.
//
// Built on CLI11 (2.1.2): parse() turns the table into a CLI::App, one CLI11 option per entry bound to a typed
// variable, and CLI11 does the parsing proper: it matches the names, converts the values (int, double, string, char,
// bool, std::vector<int> split at ':' by its delimiter), keeps the last of a repeated option (trigger_on_parse), and
// runs the checks as CLI11 validators (CLI::Range for the bounds, CLI::IsMember for allowed values and flag values,
// CLI::TypeValidator<int> for ints that overflow). The --help layout is CLI11's formatter. Layered on top, in
// options.cpp:
//  * a pre-check of each argument's shape, because CLI11 accepts more than the seed: `--name value`, short options,
//    positionals, `--flag=` and empty list elements (which it drops) are rejected there, and unknown names are
//    reported with a suggestion (CLI11 has none);
//  * small validators for the seed's value forms where CLI11's conversion is wider (strtoll base 0 reads "010" as
//    octal and takes "0x10"; strtold takes " 1", "nan" and "inf");
//  * our error messages: CLI11's exceptions are caught and the message is rebuilt from the entry
//    (OptionSpec::expectation) and the argument as written, so errors read `--b: expected an integer ≥ 1, got "x"`.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace fmha::cli {

/// Kind of value an option takes.
enum class OptKind {
  kInt,      ///< `--b=4`: a decimal integer that fits in `int`
  kFloat,    ///< `--spread=0.2`: a finite decimal number
  kString,   ///< `--mask=causal`: free text, or one of `allowed`
  kFlag,     ///< bare `--verify` (also `--verify=1|0|true|false`, so a flag can be swept with commas)
  kIntList,  ///< `--varlen-q=128:0:256`: one or more integers separated by ':'
  kChar,     ///< `--init-style=r`: exactly one character, usually one of `allowed`
};

/// Name of a kind as shown in --help placeholders: "int", "float", "str", "", "int:int:...", "c".
const char* kind_placeholder(OptKind kind);

/// One entry of an option table. Build entries through OptionTable::add_*; the setters return the entry so that
/// constraints can be chained: `table.add_int("b", "Batch count.").at_least(1).default_text("16384/k")`.
struct OptionSpec {
  std::string name;                           ///< without the leading "--"; no '=' or ','
  OptKind kind = OptKind::kString;
  std::optional<std::string> default_value;   ///< value used when the option is absent; nullopt = "unset"
  std::string default_text;                   ///< shown in --help instead of default_value (e.g. "2048/d")
  std::string help;                           ///< one or two sentences for --help
  std::string value_name;                     ///< --help placeholder ("file", "regex"); "" = from the kind
  std::vector<std::string> allowed;           ///< kString/kChar: the accepted values (empty = anything)
  std::optional<double> min;                  ///< kInt/kFloat/kIntList (each element): smallest accepted value
  std::optional<double> max;                  ///< kInt/kFloat/kIntList (each element): largest accepted value
  /// Extra check run on the value as written, once the other checks passed (it is the last CLI11 validator; for a
  /// list it runs once, on the whole list); returns "" when the value is fine, otherwise the expectation, written
  /// so that "--<name>: <returned text>" reads as a complete message (e.g. `expected a valid regex, got "("`).
  std::function<std::string(const std::string& value)> validator;

  /// Requires value ≥ m (for lists: every element). Returns *this.
  OptionSpec& at_least(double m);
  /// Requires value ≤ m (for lists: every element). Returns *this.
  OptionSpec& at_most(double m);
  /// Requires lo ≤ value ≤ hi. Returns *this.
  OptionSpec& range(double lo, double hi);
  /// Sets the --help text for the default ("2048/d", "= h"); the option itself stays unset. Returns *this.
  OptionSpec& default_text_is(std::string text);
  /// Restricts the accepted values (kString: whole strings; kChar: one-character strings). Returns *this.
  OptionSpec& one_of(std::vector<std::string> values);
  /// Sets the --help placeholder: `--json=<file>`. Returns *this.
  OptionSpec& value_name_is(std::string name);
  /// Installs an extra validator (see `validator`). Returns *this.
  OptionSpec& check(std::function<std::string(const std::string&)> fn);

  /// The expectation part of an error message, e.g. "expected an integer ≥ 1" or "expected one of no|causal"
  /// (an allowed empty string shows as "").
  std::string expectation() const;
};

/// The values of one parsed run. Getters take the option name without "--". Asking for a name that is not in the
/// table, or with the wrong kind, is a programming error and throws std::logic_error; so does get_* on an option
/// that is unset (no default and not given): use find_* for options whose default is derived later.
class ParsedOptions {
 public:
  /// True when the option appeared on the command line (defaults do not count).
  bool given(const std::string& name) const;
  /// True when the table declares this option (lets shared helpers read optional options).
  bool declared(const std::string& name) const;

  int get_int(const std::string& name) const;                    ///< value or default of a kInt option
  std::optional<int> find_int(const std::string& name) const;    ///< nullopt when unset
  double get_float(const std::string& name) const;               ///< value or default of a kFloat option
  std::optional<double> find_float(const std::string& name) const;
  std::string get_string(const std::string& name) const;         ///< value or default of a kString option
  std::optional<std::string> find_string(const std::string& name) const;
  char get_char(const std::string& name) const;                  ///< value or default of a kChar option
  std::optional<char> find_char(const std::string& name) const;
  bool flag(const std::string& name) const;                      ///< a kFlag option: given (and not =0/false)
  /// A kIntList option's elements; nullopt when unset.
  std::optional<std::vector<int>> find_int_list(const std::string& name) const;

  /// True when --help was given.
  bool help_requested() const { return help_; }
  /// The arguments this run was parsed from (program name excluded), for repro lines.
  const std::vector<std::string>& args() const { return args_; }

 private:
  friend class OptionTable;
  const OptionSpec& spec(const std::string& name, OptKind kind) const;
  /// A given option's value as CLI11 converted it; the alternative follows the kind (kFlag: bool, kInt: int,
  /// kFloat: double, kString: std::string, kChar: char, kIntList: std::vector<int>).
  using Value = std::variant<bool, int, double, std::string, char, std::vector<int>>;
  const Value* given_value(const std::string& name) const;  ///< nullptr when not given
  const std::optional<std::string>& default_value(const std::string& name) const;

  std::shared_ptr<const std::map<std::string, OptionSpec>> specs_;  ///< snapshot of the table at parse time
  std::map<std::string, Value> values_;  ///< every option given (last occurrence), converted by CLI11
  std::vector<std::string> args_;
  bool help_ = false;
};

/// Outcome of OptionTable::parse: the options, or an error naming the offending argument.
struct ParseResult {
  ParsedOptions options;  ///< valid (and complete) only when ok()
  std::string error;  ///< "" on success; e.g. `--b: expected an integer ≥ 1, got "x"`
  /// True when error is empty.
  bool ok() const { return error.empty(); }
};

/// A tool's options. Declares entries, parses one run's arguments, prints --help. `--help` is always declared.
/// Each ParsedOptions keeps its own snapshot of the entries, so it stays valid whatever happens to the table.
class OptionTable {
 public:
  /// `program`: tool name shown in --help (e.g. "fmha_fwd"); `summary`: one line saying what the tool does.
  OptionTable(std::string program, std::string summary);

  /// Declares an integer option; `def` = default (nullopt: unset). Throws std::logic_error on a bad or duplicate name.
  OptionSpec& add_int(const std::string& name, const std::string& help, std::optional<int> def = std::nullopt);
  /// Declares a floating-point option.
  OptionSpec& add_float(const std::string& name, const std::string& help, std::optional<double> def = std::nullopt);
  /// Declares a string option; `allowed` non-empty restricts the values.
  OptionSpec& add_string(const std::string& name, const std::string& help,
                         std::optional<std::string> def = std::nullopt, std::vector<std::string> allowed = {});
  /// Declares a bare flag (false unless given).
  OptionSpec& add_flag(const std::string& name, const std::string& help);
  /// Declares an `a:b:c` integer list option (unset unless given).
  OptionSpec& add_int_list(const std::string& name, const std::string& help);
  /// Declares a one-character option; `allowed` lists the accepted characters ("r10dsn"); empty = any.
  OptionSpec& add_char(const std::string& name, const std::string& help, std::optional<char> def = std::nullopt,
                       const std::string& allowed = "");

  /// True when `name` (without "--") is declared.
  bool has(const std::string& name) const { return specs_.count(name) != 0; }
  /// The entry for `name`; throws std::logic_error if it is not declared.
  const OptionSpec& spec(const std::string& name) const;
  /// Declared names in declaration order.
  const std::vector<std::string>& names() const { return order_; }
  /// The tool name given to the constructor.
  const std::string& program() const { return program_; }

  /// Parses one run's arguments (program name excluded, commas already expanded). Never throws on user input;
  /// the first offending argument is reported in ParseResult::error.
  ParseResult parse(const std::vector<std::string>& args) const;

  /// The --help text: usage, the comma-expansion rule and one line per option with its default and allowed values.
  std::string help_text() const;

 private:
  OptionSpec& add(const std::string& name, OptKind kind, const std::string& help);
  std::string suggest(const std::string& name) const;

  std::string program_;
  std::string summary_;
  std::map<std::string, OptionSpec> specs_;
  std::vector<std::string> order_;
};

/// Which of the options shared by the tools add_common_options declares, and their defaults.
struct CommonOptionSet {
  bool warmup = true;            ///< --warmup_iterations (fwd-style tools; gen/bwd/MLA decode have none)
  int warmup_default = 1;
  int iterations_default = 3;    ///< --iterations
  bool ring_buffers = true;      ///< --tensor_ring_buffers
  bool kernel_filter = true;     ///< --kernel-filter
  bool list_kernels = true;      ///< --list-kernels
  /// --verify's help: what the results are checked against (the tool's reference).
  std::string verify_help = "Check the results against the CPU reference; without it the tag is [--].";
  std::string init_styles = "r1dsn";  ///< codes accepted by --init-style and the per-tensor variants
  std::vector<std::string> init_tensors = {"q", "k", "v"};  ///< adds --init-style-<t> for each
};

/// Declares the options every tool shares (docs/seed.md §2.0 plus fmha's additions): --verify, --verbose,
/// --iterations, --warmup_iterations, --tensor_ring_buffers, --sm-count, --kernel-filter (checked to be a valid
/// regex), --list-kernels, --json, --init-style and --init-style-<tensor>. Per-tensor init styles are unset by
/// default and fall back to --init-style (see init.h, init_style_for).
void add_common_options(OptionTable& table, const CommonOptionSet& set = {});

/// Converts text to int exactly as the parser does (decimal, optional sign, must fit in int). nullopt on failure.
std::optional<int> parse_int(const std::string& text);
/// Converts text to a finite double exactly as the parser does. nullopt on failure.
std::optional<double> parse_float(const std::string& text);
/// Converts "a:b:c" to a list of ints. nullopt when empty or when any element is not an int.
std::optional<std::vector<int>> parse_int_list(const std::string& text);

}  // namespace fmha::cli
