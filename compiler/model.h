// Model descriptions (TOML, docs/model-format.md) and SCALE-Sim topologies (CSV) to a float
// Model with every shape inferred and every parameter present (loaded from .npy or generated
// from the seed). Owner: front end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "compiler/graph.h"

namespace tpusim::compiler {

struct LoadOptions {
  std::optional<uint64_t> batch;  // overrides the description's batch (inputs are then seeded)
};

// By extension: .toml a description, .csv a SCALE-Sim topology. Throws InputError with
// "FILE:LINE: layer NAME: field: value: what was expected".
Model load_model(const std::filesystem::path& path, const LoadOptions& options = {});

// A description's text; .npy paths in it are relative to `base_dir`.
Model parse_model(std::string_view text, const std::string& source, const std::filesystem::path& base_dir,
                  const LoadOptions& options = {});

// True when `path` names a model (a .toml description or a .csv topology) rather than a program.
bool is_model_path(const std::filesystem::path& path);

}  // namespace tpusim::compiler
