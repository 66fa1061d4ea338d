// The mapper's switches: which of the compiler's mapping techniques a compile may use. All on by
// default; an architect turns one off to measure what it buys on a design point (`tpusim run
// --mapper pack=off`, `tpusim compile --mapper ...`, a sweep's `mapper.pack` axis; docs/compiler.md
// "Mapper switches"). The table below is the one list of them: the CLI's help, the sweep spec, the
// program's meta and the report read it (docs/compiler.md repeats it by hand).
#pragma once

#include <string>
#include <string_view>

#include "nlohmann/json_fwd.hpp"

namespace tpusim::compiler {

struct LowerOptions {
  // Fuse a pool into the activates of the convolution before it where the shapes allow
  // (docs/compiler.md "Fusion"); off: every pool is its own instruction.
  bool fuse_pools = true;
  // Pack kernel positions and output pixels of narrow convolutions onto the array's rows through
  // the data setup's gather (docs/compiler.md "Packing"); off: one weight tile per kernel position.
  bool pack = true;
  // A batch in pieces runs by the piece schedule (docs/compiler.md "The piece schedule": only the
  // layers that need pieces run in them, where the cycle estimate says so); off: the whole model
  // once per piece.
  bool piece_schedule = true;
  // Store narrow tensors dense, several samples per UB row (docs/compiler.md "Dense layouts");
  // off: one UB row per (pixel, sample).
  bool dense = true;
  // Stream a model input into its first layer (docs/compiler.md "Input streaming"): its DMA in
  // parts, the first layer's matmuls starting on the rows already loaded; off: the whole input is
  // loaded before the first layer starts.
  bool stream_input = true;
  // Store a partial weight tile (fewer used rows or columns than the array) compactly as its used
  // box and fetch it with rw tile_rows / tile_cols, so only its used cells cross the weight memory
  // link (docs/compiler.md "Partial tiles"); off: every tile stored and fetched whole.
  bool partial_tiles = true;
  // Run a recurrent layer's time loop as the host drives it (docs/compiler.md "Host-driven loops"):
  // the machine has no branches, so each layer-step is a program segment of its own, ended by `int`
  // (interrupt host) and launched by the host; off: one program, the loop unrolled, weight tiles
  // prefetched across steps.
  bool host_loop = true;
  bool operator==(const LowerOptions&) const = default;
};

struct MapperSwitch {
  std::string_view key;
  bool LowerOptions::*field;
  std::string_view doc;
};
inline constexpr MapperSwitch kMapperSwitches[] = {
    {"fuse", &LowerOptions::fuse_pools,
     "fuse a pool into the activates of the convolution before it (docs/compiler.md \"Fusion\")"},
    {"pack", &LowerOptions::pack,
     "pack kernel positions and output pixels of narrow convolutions on the array's rows "
     "(docs/compiler.md \"Packing\")"},
    {"pieces", &LowerOptions::piece_schedule,
     "run only the layers that need pieces of a batch in pieces, the rest over the whole batch "
     "(docs/compiler.md \"The piece schedule\")"},
    {"dense", &LowerOptions::dense,
     "store narrow tensors dense, several samples per UB row (docs/compiler.md \"Dense layouts\")"},
    {"stream", &LowerOptions::stream_input,
     "load a model input in parts, its first layer starting on the rows already loaded (docs/compiler.md "
     "\"Input streaming\")"},
    {"partial", &LowerOptions::partial_tiles,
     "store partial weight tiles compactly and fetch only their used cells (docs/compiler.md \"Partial tiles\")"},
    {"host_loop", &LowerOptions::host_loop,
     "run each LSTM layer-step as a program segment the host launches, ended by `int` (docs/compiler.md "
     "\"Host-driven loops\")"},
};

// Sets one switch from "KEY=VALUE" (VALUE: on/off, true/false, 1/0). Throws InputError naming
// `where`, the text and what was expected (the known keys, the closest one).
void set_mapper_switch(LowerOptions& options, std::string_view key_value, std::string_view where);
// Sets switch `key` to the text `value` (as above, key and value apart).
void set_mapper_switch(LowerOptions& options, std::string_view key, std::string_view value, std::string_view where);

// The switches that differ from the default, {"pack": false, ...} (empty: all on); and back.
nlohmann::json mapper_to_json(const LowerOptions& options);
LowerOptions mapper_from_json(const nlohmann::json& j, std::string_view where);

// "pack=off, fuse=off" or "" when all are on: for keys and messages.
std::string describe(const LowerOptions& options);

}  // namespace tpusim::compiler
