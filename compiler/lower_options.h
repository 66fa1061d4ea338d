// The mapper's switches: which of the compiler's mapping techniques a compile may use. A switch not
// given takes its default: on, or, for a technique that the machine's own software may lack, the
// architecture parameter that says whether it has it (`pieces`: sim::Arch::driver_piece_schedule,
// 0 on tpu-v1; `host_loop`: sim::Arch::driver_host_loop, 1 on tpu-v1; `partial`:
// sim::Arch::driver_partial_tiles, 1 on tpu-v1). An architect turns one off (or on) to measure what it buys on a design point
// (`tpusim run --mapper pack=off`, `tpusim compile --mapper ...`, a sweep's `mapper.pack` axis;
// docs/compiler.md "Mapper switches"). The table below is the one list of them: the CLI's help,
// the sweep spec, the program's meta and the report read it (docs/compiler.md repeats it by hand).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json_fwd.hpp"
#include "sim/arch.h"

namespace tpusim::compiler {

struct LowerOptions {
  // Each switch: nullopt when not given (its default, kMapperSwitches), else the value given.
  // Fuse a pool into the activates of the convolution before it where the shapes allow
  // (docs/compiler.md "Fusion"); off: every pool is its own instruction.
  std::optional<bool> fuse_pools = std::nullopt;
  // Pack kernel positions and output pixels of narrow convolutions onto the array's rows through
  // the data setup's gather (docs/compiler.md "Packing"); off: one weight tile per kernel position.
  std::optional<bool> pack = std::nullopt;
  // A batch in pieces runs by the piece schedule (docs/compiler.md "The piece schedule": only the
  // layers that need pieces run in them, where the cycle estimate says so); off: the whole model
  // once per piece. Not given: the architecture's driver_piece_schedule (sim/arch.h).
  std::optional<bool> piece_schedule = std::nullopt;
  // Store narrow tensors dense, several samples per UB row (docs/compiler.md "Dense layouts");
  // off: one UB row per (pixel, sample).
  std::optional<bool> dense = std::nullopt;
  // Stream a model input into its first layer (docs/compiler.md "Input streaming"): its DMA in
  // parts, the first layer's matmuls starting on the rows already loaded; off: the whole input is
  // loaded before the first layer starts.
  std::optional<bool> stream_input = std::nullopt;
  // Store a partial weight tile (fewer used rows or columns than the array) compactly as its used
  // box and fetch it with rw tile_rows / tile_cols, so only its used cells cross the weight memory
  // link (docs/compiler.md "Partial tiles"); off: every tile stored and fetched whole. Not given:
  // the architecture's driver_partial_tiles (sim/arch.h).
  std::optional<bool> partial_tiles = std::nullopt;
  // Run a recurrent layer's time loop as the host drives it (docs/compiler.md "Host-driven loops"):
  // the machine has no branches, so each layer-step is a program segment of its own, ended by `int`
  // (interrupt host) and launched by the host; off: one program, the loop unrolled, weight tiles
  // prefetched across steps. Not given: the architecture's driver_host_loop (sim/arch.h).
  std::optional<bool> host_loop = std::nullopt;
  // Write a concat's branches in place (docs/compiler.md "Concatenation"): the joined tensor is
  // allocated before its first branch runs, each branch's activates write its channels at their
  // offset in it, and its readers take dense K tiles over the joined channels, with no identity
  // copy; off: a concat is the list of its parts, each on K tiles of its own, joined by an
  // identity matmul for a reader that needs it (what the compiler did before; on by default). It changes the quantized graph (QGraph::
  // concat_inplace), so it is read when the model is quantized as well as when it is lowered.
  std::optional<bool> concat_inplace = std::nullopt;
  // Zero a padded map's border under other work (docs/compiler.md "Zero borders ahead"): the vecs
  // that clear its rows are held until after the instruction the next sync on the activation unit
  // guards, instead of being emitted when the map is allocated, ahead of that sync; off by
  // default: the paper apps validate better without it (docs/validation.md).
  std::optional<bool> zero_ahead = std::nullopt;
  // Not a switch: whether input streaming may go on into the second layer (lower_chain). lower()
  // clears it where the chain would not fit the unified buffer but streaming into the first layer
  // alone does (docs/compiler.md "Input streaming").
  bool stream_chain = true;
  // Not a switch: stream into the second layer wherever the shapes allow, not only where the
  // estimate says it ends the two layers sooner (lower_chain): for the tests of the chain's code.
  bool stream_chain_always = false;
  // Not a switch: for measuring the packing estimate against the machine (bench/packing_scan.cpp),
  // layer name -> the pixels per vector its convolution packs instead of the estimate's choice (0:
  // not packed); a P the array or the layer cannot take (packing_options) leaves it unpacked.
  std::map<std::string, uint64_t> pack_pixels = {};
  // Not a switch: the concats (layer names) the quantizer keeps as parts although concats are
  // written in place (concat_inplace not given): each one's joined tensor would have been held in
  // host memory on the machine compiled for, which a tensor several layers write cannot be. The
  // compile fills it (compile.h place_concats), never the user; the program's
  // meta.mapping_warnings name them (docs/compiler.md "Concatenation").
  std::vector<std::string> concats_as_parts = {};
  bool operator==(const LowerOptions&) const = default;
};

struct MapperSwitch {
  std::string_view key;
  std::optional<bool> LowerOptions::*field;
  std::string_view doc;
  // The architecture parameter (0 or 1) that gives the switch's default; null: `default_on`.
  uint64_t sim::Arch::*arch_default = nullptr;
  bool default_on = true;
};
inline constexpr MapperSwitch kMapperSwitches[] = {
    {"fuse", &LowerOptions::fuse_pools,
     "fuse a pool into the activates of the convolution before it (docs/compiler.md \"Fusion\")"},
    {"pack", &LowerOptions::pack,
     "pack kernel positions and output pixels of narrow convolutions on the array's rows "
     "(docs/compiler.md \"Packing\")"},
    {"pieces", &LowerOptions::piece_schedule,
     "run only the layers that need pieces of a batch in pieces, the rest over the whole batch "
     "(docs/compiler.md \"The piece schedule\"; default: the architecture's driver_piece_schedule, off on tpu-v1)",
     &sim::Arch::driver_piece_schedule},
    {"dense", &LowerOptions::dense,
     "store narrow tensors dense, several samples per UB row (docs/compiler.md \"Dense layouts\")"},
    {"stream", &LowerOptions::stream_input,
     "load a model input in parts, its first layer starting on the rows already loaded (docs/compiler.md "
     "\"Input streaming\")"},
    {"partial", &LowerOptions::partial_tiles,
     "store partial weight tiles compactly and fetch only their used cells (docs/compiler.md \"Partial tiles\"; "
     "default: the architecture's driver_partial_tiles, on on tpu-v1)",
     &sim::Arch::driver_partial_tiles},
    {"host_loop", &LowerOptions::host_loop,
     "run each LSTM layer-step as a program segment the host launches, ended by `int` (docs/compiler.md "
     "\"Host-driven loops\"; default: the architecture's driver_host_loop, on on tpu-v1)",
     &sim::Arch::driver_host_loop},
    {"concat_inplace", &LowerOptions::concat_inplace,
     "write a concat's branches in place in one joined tensor, read with dense K tiles, no identity copies "
     "(docs/compiler.md \"Concatenation\")"},
    {"zero_ahead", &LowerOptions::zero_ahead,
     "zero a padded map's border under other work, after the next sync on the activation unit instead of "
     "ahead of it (docs/compiler.md \"Zero borders ahead\"; default off)",
     nullptr, false},
};

// Switch `m`'s value in a compile for `arch`: the value given, else its default.
bool switch_on(const LowerOptions& options, const MapperSwitch& m, const sim::Arch& arch);
// Whether concats are written in place (the concat_inplace switch, which has no architecture
// default: the quantizer reads it before any machine is chosen).
bool concat_inplace(const LowerOptions& options);
// Every switch given its value for `arch` (what the lowering reads: each field then has a value).
LowerOptions resolve(const LowerOptions& options, const sim::Arch& arch);

// Sets one switch from "KEY=VALUE" (VALUE: on/off, true/false, 1/0). Throws InputError naming
// `where`, the text and what was expected (the known keys, the closest one).
void set_mapper_switch(LowerOptions& options, std::string_view key_value, std::string_view where);
// Sets switch `key` to the text `value` (as above, key and value apart).
void set_mapper_switch(LowerOptions& options, std::string_view key, std::string_view value, std::string_view where);

// The switches given that matter whatever the machine, {"pack": false, "pieces": true, ...}: a
// switch on by default when given off, a switch whose default is the architecture's whenever
// given (empty: none); and back.
nlohmann::json mapper_to_json(const LowerOptions& options);
LowerOptions mapper_from_json(const nlohmann::json& j, std::string_view where);

// "pack=off, pieces=on" for the same switches, or "" when there are none: for keys and messages.
std::string describe(const LowerOptions& options);
// Every switch given, at its default or not ("pack=on, fuse=off"), or "": for messages.
std::string describe_given(const LowerOptions& options);

}  // namespace tpusim::compiler
