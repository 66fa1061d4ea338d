// The checks of option values for tpusim (tools/tpusim.cpp, tools/sweep/command.cpp) and the
// reference runners (tpusim-cpu, tpusim-gpu: gpu/runner_cli.h), and the message of a command line
// CLI11 refuses: one style for every option, as for tpusim's own errors. CLI11 puts the option's
// name first, the check says the value as given and what is expected, the tool exits 2:
//   --jobs: 'abc' is not a whole number 1..4096 (worker processes)
//   --batch: 70000 is more than 65535: expected a whole number 1..65535 (a batch size)
//   --timing: 'dev' is not device, end_to_end or both
// A value option takes one of these checks, not CLI11's own (CLI::Range, CLI::IsMember), whose
// messages read "Value 0 not in range 1 to 4096" and "9 not in {8,16}" (and "abc" alone for a
// number IsMember could not convert).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpusim::tools {

// A count: decimal digits only (no sign, so -1 cannot wrap), from `min` to `max` (named in the
// rule as "min..max" when below UINT64_MAX); `what` says what the number is in the message. With
// `byte_suffixes`, KiB, MiB and GiB are accepted too (use it with ->transform, which passes the
// expanded number on).
CLI::Validator count_option(uint64_t min, std::string_view what, bool byte_suffixes = false,
                            uint64_t max = UINT64_MAX);
// A finite number above 0; `unit`, when given, is named in the message.
CLI::Validator positive_option(std::string_view unit = "");
// A finite number from `min` to `max`; `unit` is named in the message.
CLI::Validator number_option(double min, double max, std::string_view unit);
// One of `names` (a number option's allowed values as they are written, e.g. {"8", "16"}).
CLI::Validator one_of_option(std::vector<std::string> names);

// The message of a command line CLI11 refuses (for CLI::App::failure_message): CLI11's, but for
// an option given without its value, which says what the value should be in the checks' words
//   --batch: no value given: expected a whole number >= 1 (a batch size)
// (CLI11: "--batch: 1 required UINT:a whole number >= 1 (a batch size) missing").
std::string failure_message(const CLI::App* app, const CLI::Error& error);

}  // namespace tpusim::tools
