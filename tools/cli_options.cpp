// Option checks and the failure message (cli_options.h).
#include "tools/cli_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "isa/text.h"

namespace tpusim::tools {

CLI::Validator count_option(uint64_t min, std::string_view what, bool byte_suffixes, uint64_t max) {
  const std::string rule = fmt::format("a whole number {} ({}{})",
                                       max == UINT64_MAX ? fmt::format(">= {}", min) : fmt::format("{}..{}", min, max),
                                       what, byte_suffixes ? ", optionally with a KiB, MiB or GiB suffix" : "");
  return CLI::Validator(
      [min, max, rule, byte_suffixes](std::string& text) -> std::string {
        std::string_view digits = text;
        uint64_t scale = 1;
        if (byte_suffixes)
          for (auto [suffix, shift] : {std::pair{"KiB", 10}, {"MiB", 20}, {"GiB", 30}})
            if (digits.ends_with(suffix)) scale = uint64_t{1} << shift, digits.remove_suffix(3);
        const bool ok =
            !digits.empty() && digits.size() <= 20 &&
            std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
        uint64_t v = 0;
        const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (!ok || ec != std::errc() || ptr != digits.data() + digits.size() || v > UINT64_MAX / scale)
          return fmt::format("'{}' is not {}", isa::printable(text), rule);
        if (v * scale < min) return fmt::format("{} is less than {}: expected {}", v * scale, min, rule);
        if (v * scale > max) return fmt::format("{} is more than {}: expected {}", v * scale, max, rule);
        text = std::to_string(v * scale);  // what CLI11 then converts (with ->transform)
        return {};
      },
      rule);
}

namespace {

// A check for a finite number for which `ok` holds, described by `rule`.
template <typename Ok>
CLI::Validator number_check(std::string rule, Ok ok) {
  return CLI::Validator(
      [rule, ok](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return !text.empty() && end == text.c_str() + text.size() && std::isfinite(v) && ok(v)
                   ? std::string()
                   : fmt::format("'{}' is not {}", isa::printable(text), rule);
      },
      rule);
}

}  // namespace

CLI::Validator positive_option(std::string_view unit) {
  return number_check(unit.empty() ? "a number above 0" : fmt::format("a number above 0 ({})", unit),
                      [](double v) { return v > 0; });
}

CLI::Validator number_option(double min, double max, std::string_view unit) {
  return number_check(fmt::format("a number {:g}..{:g} ({})", min, max, unit),
                      [min, max](double v) { return v >= min && v <= max; });
}

CLI::Validator one_of_option(std::vector<std::string> names) {
  std::string rule;
  for (size_t i = 0; i < names.size(); ++i)
    rule += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return CLI::Validator(
      [names, rule](std::string& text) -> std::string {
        if (std::find(names.begin(), names.end(), text) != names.end()) return {};
        return fmt::format("'{}' is not {}", isa::printable(text), rule);
      },
      rule);
}

namespace {

// The option named `name` of `app` or of any of its subcommands that were given.
const CLI::Option* given_option(const CLI::App* app, const std::string& name) {
  if (const CLI::Option* o = app->get_option_no_throw(name)) return o;
  for (const CLI::App* sub : app->get_subcommands())  // (a subcommand counts as given once named)
    if (const CLI::Option* o = given_option(sub, name)) return o;
  return nullptr;
}

}  // namespace

std::string failure_message(const CLI::App* app, const CLI::Error& error) {
  std::string message = CLI::FailureMessage::simple(app, error);
  // CLI11's "NAME: N required TYPE missing" (ArgumentMismatch::TypedAtLeast): an option given
  // without its value.
  const std::string_view what = error.what();
  const size_t colon = what.find(": ");
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) && colon != std::string_view::npos &&
      what.ends_with(" missing") && what.find(" required ", colon) != std::string_view::npos) {
    const std::string name(what.substr(0, colon));
    std::string expected;
    // (CLI11 2.1 has no const accessor of an option's checks.)
    if (CLI::Option* o = const_cast<CLI::Option*>(given_option(app, name))) try {
        expected = o->get_validator()->get_description();
      } catch (const CLI::OptionNotFound&) {  // no check
      }
    const std::string line = expected.empty() ? fmt::format("{}: no value given", name)
                                        : fmt::format("{}: no value given: expected {}", name, expected);
    message.replace(0, what.size(), line);
  }
  return message;
}

}  // namespace tpusim::tools
