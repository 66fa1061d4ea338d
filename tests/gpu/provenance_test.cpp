// gpu/provenance.h: the command line both runners record is quoted so that it reruns as given.
#include <catch2/catch.hpp>

#include <regex>

#include "gpu/provenance.h"

using tpusim::gpu::provenance;
using tpusim::gpu::shell_quote;

TEST_CASE("provenance: the command is shell-quoted where it needs it, the date is UTC ISO 8601") {
  CHECK(shell_quote("build/tpusim-cpu") == "build/tpusim-cpu");
  CHECK(shell_quote("--batch=8,16") == "--batch=8,16");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("two words") == "'two words'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("$HOME") == "'$HOME'");
  const char* argv[] = {"tpusim-cpu", "a model.toml", "--batch", "8"};
  const auto p = provenance(4, argv);
  CHECK(p.command == "tpusim-cpu 'a model.toml' --batch 8");
  CHECK(std::regex_match(p.date, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  CHECK(!p.host.empty());
}
