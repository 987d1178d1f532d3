// CLI core: option table parsing, error messages and --help (tools/cli/common/options.h).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "common/options.h"

namespace fmha::cli {
namespace {

// A table with one option of every kind, as a tool would declare it.
OptionTable make_table() {
  OptionTable t("fmha_test", "Test tool.");
  t.add_int("b", "Batch count.").at_least(1).default_text_is("16384/k");
  t.add_int("iterations", "Timed runs.", 3).at_least(0);
  t.add_int("split_kv", "Splits.", -1);
  t.add_int("page", "Page size.", 128).range(1, 128);
  t.add_float("spread", "Spread.", 0.2).range(0.0, 1.0);
  t.add_string("mask", "Mask.", "no", {"", "no", "residual", "causal"});
  t.add_string("kernel-filter", "Regex.");
  t.add_flag("verify", "Verify.");
  t.add_flag("varlen", "Varlen.");
  t.add_int_list("varlen-q", "Lengths.").at_least(0);
  t.add_char("init-style", "Init.", 'r', "r1dsn");
  t.add_int("h_k", "KV heads.").at_least(1);
  t.add_int("warmup_iterations", "Warmup.", 1).at_least(0);
  return t;
}

ParsedOptions parse_ok(const OptionTable& t, const std::vector<std::string>& args) {
  ParseResult r = t.parse(args);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.options;
}

std::string parse_error(const OptionTable& t, const std::vector<std::string>& args) {
  ParseResult r = t.parse(args);
  EXPECT_FALSE(r.ok()) << "expected a parse error";
  return r.error;
}

TEST(CliOptions, DefaultsWhenNothingGiven) {
  const OptionTable t = make_table();
  const ParsedOptions o = parse_ok(t, {});
  EXPECT_EQ(o.get_int("iterations"), 3);
  EXPECT_EQ(o.get_int("split_kv"), -1);
  EXPECT_DOUBLE_EQ(o.get_float("spread"), 0.2);
  EXPECT_EQ(o.get_string("mask"), "no");
  EXPECT_EQ(o.get_char("init-style"), 'r');
  EXPECT_FALSE(o.flag("verify"));
  EXPECT_FALSE(o.find_int("b").has_value());
  EXPECT_FALSE(o.find_int_list("varlen-q").has_value());
  EXPECT_FALSE(o.find_string("kernel-filter").has_value());
  EXPECT_FALSE(o.given("iterations"));
  EXPECT_FALSE(o.help_requested());
}

TEST(CliOptions, EveryKindParses) {
  const OptionTable t = make_table();
  const ParsedOptions o =
      parse_ok(t, {"--b=4", "--split_kv=-7", "--spread=0.5", "--mask=causal", "--kernel-filter=tma.*persistent",
                   "--verify", "--varlen-q=128:0:256", "--init-style=d"});
  EXPECT_EQ(o.get_int("b"), 4);
  EXPECT_TRUE(o.given("b"));
  EXPECT_EQ(o.get_int("split_kv"), -7);
  EXPECT_DOUBLE_EQ(o.get_float("spread"), 0.5);
  EXPECT_EQ(o.get_string("mask"), "causal");
  EXPECT_EQ(o.get_string("kernel-filter"), "tma.*persistent");
  EXPECT_TRUE(o.flag("verify"));
  EXPECT_FALSE(o.flag("varlen"));
  EXPECT_EQ(*o.find_int_list("varlen-q"), (std::vector<int>{128, 0, 256}));
  EXPECT_EQ(o.get_char("init-style"), 'd');
}

TEST(CliOptions, SingleElementListAndEmptyAllowedString) {
  const OptionTable t = make_table();
  const ParsedOptions o = parse_ok(t, {"--varlen-q=17", "--mask="});
  EXPECT_EQ(*o.find_int_list("varlen-q"), (std::vector<int>{17}));
  EXPECT_EQ(o.get_string("mask"), "");
}

TEST(CliOptions, FlagAcceptsExplicitBooleans) {
  const OptionTable t = make_table();
  EXPECT_TRUE(parse_ok(t, {"--verify=1"}).flag("verify"));
  EXPECT_TRUE(parse_ok(t, {"--verify=true"}).flag("verify"));
  EXPECT_FALSE(parse_ok(t, {"--verify=0"}).flag("verify"));
  EXPECT_FALSE(parse_ok(t, {"--verify=false"}).flag("verify"));
  const std::string e = parse_error(t, {"--verify=yes"});
  EXPECT_NE(e.find("--verify"), std::string::npos) << e;
  EXPECT_NE(e.find("\"yes\""), std::string::npos) << e;
}

TEST(CliOptions, LastOccurrenceWins) {
  const OptionTable t = make_table();
  const ParsedOptions o = parse_ok(t, {"--iterations=5", "--iterations=9"});
  EXPECT_EQ(o.get_int("iterations"), 9);
}

TEST(CliOptions, ArgsAreKeptForRepro) {
  const OptionTable t = make_table();
  const std::vector<std::string> args = {"--b=2", "--verify"};
  EXPECT_EQ(parse_ok(t, args).args(), args);
}

TEST(CliOptions, ParsedOptionsOutliveTheTable) {
  ParsedOptions o;
  {
    const OptionTable t = make_table();
    o = parse_ok(t, {"--b=7"});
  }
  EXPECT_EQ(o.get_int("b"), 7);
  EXPECT_EQ(o.get_int("iterations"), 3);
}

TEST(CliOptions, HelpFlag) {
  const OptionTable t = make_table();
  EXPECT_TRUE(parse_ok(t, {"--b=1", "--help"}).help_requested());
}

TEST(CliOptions, IntErrorNamesOptionExpectationAndValue) {
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"--b=x"}), "--b: expected an integer ≥ 1, got \"x\"");
  EXPECT_EQ(parse_error(t, {"--b=0"}), "--b: expected an integer ≥ 1, got \"0\"");
  EXPECT_EQ(parse_error(t, {"--b=1.5"}), "--b: expected an integer ≥ 1, got \"1.5\"");
  EXPECT_EQ(parse_error(t, {"--b="}), "--b: expected an integer ≥ 1, got \"\"");
  EXPECT_EQ(parse_error(t, {"--split_kv=abc"}), "--split_kv: expected an integer, got \"abc\"");
  EXPECT_EQ(parse_error(t, {"--page=256"}), "--page: expected an integer in [1, 128], got \"256\"");
  EXPECT_EQ(parse_error(t, {"--iterations=99999999999"}),
            "--iterations: expected an integer ≥ 0, got \"99999999999\"");
}

TEST(CliOptions, MissingValueSaysHowToWriteIt) {
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"--b"}), "--b: expected an integer ≥ 1, got no value (write --b=<value>)");
}

TEST(CliOptions, FloatErrors) {
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"--spread=abc"}), "--spread: expected a number in [0, 1], got \"abc\"");
  EXPECT_EQ(parse_error(t, {"--spread=1.5"}), "--spread: expected a number in [0, 1], got \"1.5\"");
  EXPECT_EQ(parse_error(t, {"--spread=nan"}), "--spread: expected a number in [0, 1], got \"nan\"");
}

TEST(CliOptions, StringAndCharAllowedValues) {
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"--mask=diagonal"}), "--mask: expected one of \"\"|no|residual|causal, got \"diagonal\"");
  EXPECT_EQ(parse_error(t, {"--init-style=x"}), "--init-style: expected one of r|1|d|s|n, got \"x\"");
  EXPECT_EQ(parse_error(t, {"--init-style=rr"}), "--init-style: expected one of r|1|d|s|n, got \"rr\"");
}

TEST(CliOptions, IntListErrors) {
  const OptionTable t = make_table();
  const std::string expect = "--varlen-q: expected a ':'-separated list of integers ≥ 0, got ";
  EXPECT_EQ(parse_error(t, {"--varlen-q=12:x"}), expect + "\"12:x\"");
  EXPECT_EQ(parse_error(t, {"--varlen-q=12::3"}), expect + "\"12::3\"");
  EXPECT_EQ(parse_error(t, {"--varlen-q=12:-1"}), expect + "\"12:-1\"");
  EXPECT_EQ(parse_error(t, {"--varlen-q="}), expect + "\"\"");
  EXPECT_EQ(parse_error(t, {"--varlen-q=4:"}), expect + "\"4:\"");
}

TEST(CliOptions, UnknownOptionIsNamedWithSuggestion) {
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"--hk=2"}), "unknown option \"--hk\" (did you mean --h_k?); see --help");
  EXPECT_EQ(parse_error(t, {"--warmup-iterations=2"}),
            "unknown option \"--warmup-iterations\" (did you mean --warmup_iterations?); see --help");
  EXPECT_EQ(parse_error(t, {"--zzzzzz"}), "unknown option \"--zzzzzz\"; see --help");
}

TEST(CliOptions, PositionalAndShortArgumentsRejected) {
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"out.json"}),
            "unexpected argument \"out.json\": options take the form --name=value or --flag");
  const std::string e = parse_error(t, {"-b=1"});
  EXPECT_NE(e.find("\"-b=1\""), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean --b=1?"), std::string::npos) << e;
  EXPECT_FALSE(t.parse({"--"}).ok());
  EXPECT_FALSE(t.parse({"--=3"}).ok());
}

TEST(CliOptions, SpaceSeparatedValueRejected) {
  // CLI11 itself would read `--b 4` as --b=4; the seed syntax does not.
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"--b", "4"}), "--b: expected an integer ≥ 1, got no value (write --b=<value>)");
  EXPECT_EQ(parse_error(t, {"--verify", "4"}),
            "unexpected argument \"4\": options take the form --name=value or --flag");
  EXPECT_EQ(parse_error(t, {"--mask", "causal"}),
            "--mask: expected one of \"\"|no|residual|causal, got no value (write --mask=<value>)");
}

TEST(CliOptions, ShortAndGroupedOptionsRejected) {
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"-b"}),
            "unexpected argument \"-b\": options take the form --name=value or --flag (did you mean --b?)");
  EXPECT_EQ(parse_error(t, {"-b", "4"}),
            "unexpected argument \"-b\": options take the form --name=value or --flag (did you mean --b?)");
  EXPECT_FALSE(t.parse({"-vb"}).ok());
  EXPECT_FALSE(t.parse({"/b:4"}).ok());  // no Windows-style options either
  EXPECT_FALSE(t.parse({"--b=2", "--", "--verify"}).ok());
}

TEST(CliOptions, FlagValuesAreOnlyTheSeedOnes) {
  // CLI11 also takes yes/no/on/off/enable/disable, any integer, and `--flag=` as true.
  const OptionTable t = make_table();
  for (const char* v : {"yes", "on", "off", "2", "-1", "TRUE", "t"}) {
    EXPECT_EQ(parse_error(t, {std::string("--verify=") + v}),
              std::string("--verify: expected a bare flag (or =1, =0, =true, =false), got \"") + v + "\"");
  }
  EXPECT_EQ(parse_error(t, {"--verify="}), "--verify: expected a bare flag (or =1, =0, =true, =false), got \"\"");
  EXPECT_FALSE(parse_ok(t, {"--verify", "--verify=0"}).flag("verify"));  // last wins for flags too
  EXPECT_TRUE(parse_ok(t, {"--verify=false", "--verify"}).flag("verify"));
}

TEST(CliOptions, IntegersAreDecimal) {
  // CLI11 2.1.2 converts with strtoll(..., 0): octal for a leading 0, hex for 0x, leading spaces skipped.
  const OptionTable t = make_table();
  EXPECT_EQ(parse_ok(t, {"--b=010"}).get_int("b"), 10);
  EXPECT_EQ(parse_ok(t, {"--b=+08"}).get_int("b"), 8);
  EXPECT_EQ(parse_ok(t, {"--split_kv=-0"}).get_int("split_kv"), 0);
  EXPECT_EQ(parse_ok(t, {"--split_kv=-2147483648"}).get_int("split_kv"), -2147483648LL);
  EXPECT_EQ(parse_error(t, {"--b=0x10"}), "--b: expected an integer ≥ 1, got \"0x10\"");
  EXPECT_EQ(parse_error(t, {"--b= 3"}), "--b: expected an integer ≥ 1, got \" 3\"");
  EXPECT_EQ(parse_error(t, {"--b=true"}), "--b: expected an integer ≥ 1, got \"true\"");
  EXPECT_EQ(parse_error(t, {"--split_kv=2147483648"}), "--split_kv: expected an integer, got \"2147483648\"");
  EXPECT_EQ(*parse_ok(t, {"--varlen-q=010:+2:0"}).find_int_list("varlen-q"), (std::vector<int>{10, 2, 0}));
  EXPECT_EQ(parse_int("010"), 10);
  EXPECT_EQ(parse_int("-0"), 0);
}

TEST(CliOptions, FloatsAreFiniteNumbers) {
  const OptionTable t = make_table();
  EXPECT_DOUBLE_EQ(parse_ok(t, {"--spread=1e-1"}).get_float("spread"), 0.1);
  EXPECT_DOUBLE_EQ(parse_ok(t, {"--spread=.25"}).get_float("spread"), 0.25);
  for (const char* v : {" 0.5", "inf", "-inf", "1e309", "0.5 ", "", "0,5"}) {
    EXPECT_EQ(parse_error(t, {std::string("--spread=") + v}),
              std::string("--spread: expected a number in [0, 1], got \"") + v + "\"");
  }
}

TEST(CliOptions, CharOptions) {
  OptionTable t("x", "y");
  t.add_char("any", "Any character.");
  t.add_char("code", "A code.", 'r', "r1");
  EXPECT_EQ(parse_ok(t, {"--any=7"}).get_char("any"), '7');
  EXPECT_EQ(parse_ok(t, {"--any=-"}).get_char("any"), '-');
  EXPECT_EQ(parse_ok(t, {"--code=1"}).get_char("code"), '1');
  EXPECT_EQ(parse_error(t, {"--any=65"}), "--any: expected a single character, got \"65\"");  // not char 65
  EXPECT_EQ(parse_error(t, {"--any="}), "--any: expected a single character, got \"\"");
  EXPECT_EQ(parse_error(t, {"--code=49"}), "--code: expected one of r|1, got \"49\"");
}

TEST(CliOptions, ListsKeepTheLastOccurrenceWhole) {
  const OptionTable t = make_table();
  EXPECT_EQ(*parse_ok(t, {"--varlen-q=1:2:3", "--varlen-q=4"}).find_int_list("varlen-q"), (std::vector<int>{4}));
  const std::string expect = "--varlen-q: expected a ':'-separated list of integers ≥ 0, got ";
  EXPECT_EQ(parse_error(t, {"--varlen-q=:4"}), expect + "\":4\"");
  EXPECT_EQ(parse_error(t, {"--varlen-q=:"}), expect + "\":\"");
  EXPECT_EQ(parse_error(t, {"--varlen-q=[1:2]"}), expect + "\"[1:2]\"");
  EXPECT_EQ(parse_error(t, {"--varlen-q=1 2"}), expect + "\"1 2\"");
}

TEST(CliOptions, StringValuesArePassedThroughVerbatim) {
  const OptionTable t = make_table();
  for (const char* v : {"{}", "[ab]", "--verify", "-x", "a=b", "\"q\"", " padded "}) {
    EXPECT_EQ(parse_ok(t, {std::string("--kernel-filter=") + v, "--verify"}).get_string("kernel-filter"), v);
  }
  const ParsedOptions o = parse_ok(t, {"--kernel-filter=--b=3"});
  EXPECT_FALSE(o.given("b"));
}

TEST(CliOptions, ErrorOrderFollowsTheCommandLine) {
  // The pre-check and CLI11 both report the first offending argument, whichever of them finds it.
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"--b=x", "--bogus"}), "--b: expected an integer ≥ 1, got \"x\"");
  EXPECT_EQ(parse_error(t, {"--bogus", "--b=x"}), "unknown option \"--bogus\"; see --help");
  EXPECT_EQ(parse_error(t, {"--mask=full", "--b"}), "--mask: expected one of \"\"|no|residual|causal, got \"full\"");
  EXPECT_EQ(parse_error(t, {"--b", "--mask=full"}), "--b: expected an integer ≥ 1, got no value (write --b=<value>)");
  EXPECT_EQ(parse_error(t, {"--iterations=1", "--varlen-q=1:-2", "oops"}),
            "--varlen-q: expected a ':'-separated list of integers ≥ 0, got \"1:-2\"");
  EXPECT_EQ(parse_error(t, {"--b=x", "--b=2"}), "--b: expected an integer ≥ 1, got \"x\"");  // not hidden by later
}

TEST(CliOptions, ValidatorSeesTheValueAsWritten) {
  OptionTable t("x", "y");
  std::vector<std::string> seen;
  t.add_int("d", "Head dim.", 128).check([&seen](const std::string& v) -> std::string {
    seen.push_back(v);
    return "";
  });
  t.add_int_list("l", "List.").at_least(0).check([&seen](const std::string& v) -> std::string {
    seen.push_back(v);
    return v == "1:2:3" ? "expected anything but 1:2:3" : "";
  });
  EXPECT_TRUE(t.parse({"--d=+08", "--l=4:5"}).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"+08", "4:5"}));  // once per list, on the whole list
  EXPECT_EQ(t.parse({"--l=1:2:3"}).error, "--l: expected anything but 1:2:3");
  seen.clear();
  EXPECT_EQ(t.parse({"--l=1:x"}).error, "--l: expected a ':'-separated list of integers ≥ 0, got \"1:x\"");
  EXPECT_TRUE(seen.empty());  // not run on a list that failed its own checks
}

TEST(CliOptions, HelpLongLeftColumnWraps) {
  OptionTable t("x", "y");
  t.add_string("a-rather-long-option-name", "Long.", std::string("first"), {"first", "second", "third"});
  t.add_flag("v", "Short.");
  const std::string h = t.help_text();
  EXPECT_NE(h.find("  --a-rather-long-option-name=<first|second|third>\n"), std::string::npos) << h;
  EXPECT_NE(h.find("Long. [default: first]"), std::string::npos) << h;
  EXPECT_NE(h.find("  --v "), std::string::npos) << h;
  EXPECT_EQ(h.find("[OPTIONS]"), std::string::npos) << h;  // CLI11's usage line is replaced by the seed syntax
  EXPECT_NE(h.find("Usage: x [--name=value | --flag]..."), std::string::npos) << h;
  EXPECT_EQ(h.substr(h.size() - 2), ".\n");  // no trailing blank line
}

TEST(CliOptions, FirstBadArgumentIsReported) {
  const OptionTable t = make_table();
  EXPECT_EQ(parse_error(t, {"--b=2", "--iterations=-1", "--b=x"}),
            "--iterations: expected an integer ≥ 0, got \"-1\"");
}

TEST(CliOptions, ValidatorRunsAfterConversion) {
  OptionTable t("x", "y");
  t.add_int("d", "Head dim.", 128).at_least(1).check([](const std::string& v) -> std::string {
    return std::stoi(v) % 8 == 0 ? "" : "expected a multiple of 8, got \"" + v + "\"";
  });
  EXPECT_TRUE(t.parse({"--d=64"}).ok());
  EXPECT_EQ(t.parse({"--d=65"}).error, "--d: expected a multiple of 8, got \"65\"");
}

TEST(CliOptions, CommonOptionsKernelFilterRegexChecked) {
  OptionTable t("fmha_fwd", "Forward.");
  add_common_options(t);
  EXPECT_TRUE(t.parse({"--kernel-filter=tma.*(individual|persistent)"}).ok());
  const std::string e = t.parse({"--kernel-filter=("}).error;
  EXPECT_EQ(e.rfind("--kernel-filter: expected a valid ECMAScript regex, got \"(\"", 0), 0u) << e;
}

TEST(CliOptions, CommonOptionsDeclareSeedNames) {
  OptionTable t("fmha_fwd", "Forward.");
  add_common_options(t);
  for (const char* n : {"verify", "verbose", "iterations", "warmup_iterations", "tensor_ring_buffers", "sm-count",
                        "kernel-filter", "list-kernels", "json", "init-style", "init-style-q", "init-style-k",
                        "init-style-v"}) {
    EXPECT_TRUE(t.has(n)) << n;
  }
  const ParsedOptions o = t.parse({}).options;
  EXPECT_EQ(o.get_int("iterations"), 3);
  EXPECT_EQ(o.get_int("warmup_iterations"), 1);
  EXPECT_EQ(o.get_int("tensor_ring_buffers"), 1);
  EXPECT_FALSE(o.find_char("init-style-q").has_value());

  OptionTable g("fmha_gen", "Gen.");
  CommonOptionSet set;
  set.warmup = false;
  set.ring_buffers = false;
  set.init_styles = "r10dsn";
  set.init_tensors = {"q", "cache-k", "cache-v", "new-k", "new-v"};
  add_common_options(g, set);
  EXPECT_FALSE(g.has("warmup_iterations"));
  EXPECT_TRUE(g.has("init-style-cache-k"));
  EXPECT_TRUE(g.parse({"--init-style=0"}).ok());
  EXPECT_FALSE(t.parse({"--init-style=0"}).ok());  // '0' is not in the forward tool's default set
  // Help: placeholders from value names, init-style codes described from the tool's own set.
  const std::string h = t.help_text();
  EXPECT_NE(h.find("--json=<file>"), std::string::npos) << h;
  EXPECT_NE(h.find("--kernel-filter=<regex>"), std::string::npos) << h;
  EXPECT_EQ(h.find("0 zeros"), std::string::npos) << h;
  EXPECT_NE(g.help_text().find("0 zeros"), std::string::npos);
}

TEST(CliOptions, GetterMisuseIsAProgrammingError) {
  const OptionTable t = make_table();
  const ParsedOptions o = parse_ok(t, {});
  EXPECT_THROW(o.get_int("nope"), std::logic_error);
  EXPECT_THROW(o.get_float("b"), std::logic_error);  // declared as int
  EXPECT_THROW(o.get_int("b"), std::logic_error);    // unset, no default
  EXPECT_THROW(o.given("nope"), std::logic_error);
  EXPECT_FALSE(o.declared("nope"));
  EXPECT_TRUE(o.declared("b"));
}

TEST(CliOptions, TableRejectsBadOrDuplicateNames) {
  OptionTable t("x", "y");
  t.add_int("b", "B.");
  EXPECT_THROW(t.add_int("b", "again"), std::logic_error);
  EXPECT_THROW(t.add_flag("a=b", "bad"), std::logic_error);
  EXPECT_THROW(t.add_flag("a,b", "bad"), std::logic_error);
  EXPECT_THROW(t.add_flag("--x", "bad"), std::logic_error);
  EXPECT_THROW(t.add_flag("help", "declared by the table"), std::logic_error);
}

TEST(CliOptions, HelpIsGeneratedFromTheTable) {
  const OptionTable t = make_table();
  const std::string h = t.help_text();
  EXPECT_NE(h.find("fmha_test: Test tool."), std::string::npos) << h;
  EXPECT_NE(h.find("--b=<int>"), std::string::npos) << h;
  EXPECT_NE(h.find("Batch count."), std::string::npos);
  EXPECT_NE(h.find("default: 16384/k"), std::string::npos);
  EXPECT_NE(h.find("default: 3"), std::string::npos);
  EXPECT_NE(h.find("--mask=<\"\"|no|residual|causal>"), std::string::npos) << h;
  EXPECT_NE(h.find("--varlen-q=<int:int:...>"), std::string::npos);
  EXPECT_NE(h.find("--init-style=<r|1|d|s|n>"), std::string::npos) << h;
  EXPECT_NE(h.find("default: unset"), std::string::npos);  // --kernel-filter
  EXPECT_NE(h.find("integer in [1, 128]"), std::string::npos) << h;
  EXPECT_NE(h.find("  --verify "), std::string::npos);
  EXPECT_NE(h.find("--help"), std::string::npos);
  EXPECT_NE(h.find("commas"), std::string::npos);
  // Every declared option appears.
  for (const auto& n : t.names()) EXPECT_NE(h.find("--" + n), std::string::npos) << n;
}

TEST(CliOptions, ValueConverters) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-3"), -3);
  EXPECT_EQ(parse_int("+3"), 3);
  EXPECT_FALSE(parse_int(" 3").has_value());
  EXPECT_FALSE(parse_int("3 ").has_value());
  EXPECT_FALSE(parse_int("0x10").has_value());
  EXPECT_FALSE(parse_int("2147483648").has_value());
  EXPECT_EQ(parse_int("2147483647"), 2147483647);
  EXPECT_DOUBLE_EQ(*parse_float("1e-3"), 1e-3);
  EXPECT_FALSE(parse_float("inf").has_value());
  EXPECT_FALSE(parse_float("1.0x").has_value());
  EXPECT_EQ(*parse_int_list("3:2"), (std::vector<int>{3, 2}));
  EXPECT_FALSE(parse_int_list(":").has_value());
}

}  // namespace
}  // namespace fmha::cli

TEST(CliOptions, DashHSuggestsHelpNotHeads) {
  fmha::cli::OptionTable t("tool", "A tool.");
  t.add_int("h", "Heads.");
  const auto r = t.parse({"-h"});
  EXPECT_NE(r.error.find("did you mean --help?"), std::string::npos) << r.error;
}
