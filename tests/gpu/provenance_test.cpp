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

TEST_CASE("provenance: the kernel module's version is read from both forms of /proc/driver/nvidia/version") {
  using tpusim::gpu::kernel_module_version;
  // The proprietary module's line, and the open module's as an H200 machine printed it
  // (2026-11-28; the first runner read "for" from it).
  CHECK(kernel_module_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:04 UTC "
                              "2024") == "550.54.15");
  CHECK(kernel_module_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                              "(nixbld@)  ") == "580.159.04");
  CHECK(kernel_module_version("something else") == "something else");
  CHECK(kernel_module_version("NVIDIA Kernel Module for x86_64") == "NVIDIA Kernel Module for x86_64");
}
