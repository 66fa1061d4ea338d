// The back end: a QGraph to a TPU program for one architecture. Owner: back end.
//
// Beside lower(), the rules it maps by that other code needs without lowering (the sweep
// scheduler's cost estimate, tools/sweep/schedule.cpp): each is defined here once and lower()
// calls the same function, so an estimate cannot drift from what the compiler does.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "compiler/graph.h"
#include "compiler/lower_options.h"
#include "compiler/packing.h"
#include "isa/error.h"
#include "isa/program.h"
#include "sim/arch.h"

namespace tpusim::compiler {

isa::Program lower(const QGraph& graph, const sim::Arch& arch, const LowerOptions& options = {});

// lower()'s refusal of a concat written in place whose joined tensor would be held in host memory
// and streamed in bands (one sample does not fit the unified buffer): a tensor several layers write
// cannot be. `concat`: the concat layer whose joined tensor it is (its root, for nested concats).
// Where the mapper's concat_inplace was not given, the compile keeps that concat as parts instead
// and goes on (compile.h place_concats); given on, it is the user's error.
struct ConcatInHost : InputError {
  ConcatInHost(const std::string& what, std::string concat_layer) : InputError(what), concat(std::move(concat_layer)) {}
  std::string concat;
};

// What lowering holds besides the program it makes, for the memory checks (docs/limits.md "Memory").
struct LowerMemory {
  // Called once the program is laid out and before it is made: the bytes its weight image will
  // hold (each tile's stored box, padding and a packed convolution's repeated kernel columns
  // included; 0 for a graph without values, whose image holds no bytes) and its instructions. It
  // may throw (InputError) to refuse the compile before the image's bytes and the code are built.
  // Given, every try before the program is a measuring one (no code, the image without bytes).
  std::function<void(uint64_t image_bytes, uint64_t instructions)> before_program;
  // Set by lower(): the most its tries held at once besides the program (each try's containers,
  // the tiles the tries share: held_bytes.h).
  uint64_t working_bytes = 0;
};
isa::Program lower(const QGraph& graph, const sim::Arch& arch, const LowerOptions& options, LowerMemory& memory);

// The accumulator rows one pass of a matmul may use when its output holds `rows` rows (output
// pixels x samples): all of them when the whole output fits the accumulators (one pass), else half,
// so that one half takes a pass's matmuls while the activation unit drains the other (passes
// alternate between the halves). The output runs in div_up(rows, budget) chunks or more (a chunk
// holds whole output rows, or whole pixels).
uint64_t acc_budget(uint64_t rows, const sim::Arch& arch);

// The accumulator rows one pass of an unpacked matmul may use when its output holds `rows` rows,
// `tiles` computed weight tiles a pass over all its N tiles, whose activates drain a row in
// `drain_per_row` cycles together (ceil(N tile's columns / activation_lanes) summed), a tile
// switched in again for a matmul of V vectors costing refetch(V) cycles (its fetch from weight
// memory and the shift V leaves unhidden: Lowering::refetch_cycles's terms, as input streaming's
// cuts count a tile fetched again). acc_budget gives a pass all the accumulators where the output
// fits them; where it holds more than half, that pass has no other half to alternate with: the
// activation unit drains its rows while the matrix unit waits (the next pass, of the next N tile or
// the next layer, writes rows the drain still reads). Passes of at most half, c = ceil(rows / half)
// chunks, drain all but the last chunk's rows, rows - rows / c, behind the next chunk's matmuls,
// and switch every tile in c - 1 more times: tiles x (c - 1) x refetch(rows / c). Half is taken
// where the drain it hides exceeds that, else acc_budget. (The small inception model at batch 64 on
// 32 x 128, 24 MiB, one piece of 64: 8 x 8 x 64 = 4,096 rows, one pass of all 4,096 accumulators a
// layer, ran slower, 349,950 cycles, than with 1 MiB in two pieces of 32 and half passes, 337,022;
// with half passes 312,780.) lower() chunks unpacked matmuls by it; a packed convolution keeps
// acc_budget (lower_packed, packing_for).
uint64_t pass_budget(uint64_t rows, uint64_t tiles, uint64_t drain_per_row,
                     const std::function<double(double)>& refetch, const sim::Arch& arch);

// The most samples one piece of a batch may hold: half the accumulators, so that a pass over one
// pixel of every sample of the piece fits a half (acc_budget). A larger batch runs in pieces.
uint64_t max_piece(const sim::Arch& arch);

// Whether convolution (or dense) op m of g may be packed at all (packing.h): the mapper's `pack`
// switch on for `arch`, one input, not 1 x 1 stride 1 without padding (which runs as a plain
// matmul over pixels), int8 weights and an int8 input (a 16-bit operand runs unpacked, a tile pair
// per kernel position).
bool may_pack(const QGraph& g, const MatmulOp& m, const sim::Arch& arch, const LowerOptions& options);

// How lower() packs op m of g for a piece of `piece` samples: nullopt where it may not (may_pack),
// where packing does not pay on `arch` (choose_packing, with the op's acc_budget), or where several
// pixels per vector would scatter a concat branch's channels across a slice boundary of the joined
// tensor it writes in place.
std::optional<Packing> packing_for(const QGraph& g, const MatmulOp& m, const sim::Arch& arch,
                                   const LowerOptions& options, uint64_t piece);

// The pieces lower() runs the batch in on `arch`: the fewest equal pieces (div_up(batch, piece))
// within max_piece, within the pool instruction's 255 interleaved samples where a pool reads a
// tensor that is not stored dense, and whose tensors fit the unified buffer, found by lower()'s own
// search with only its fit checks (no instruction is emitted: a few thousandths of a lowering).
// It is the single loop's count: with the mapper's `pieces` switch on, lower() may then run some
// layers over the whole batch (docs/compiler.md "The piece schedule"). Throws InputError where
// lower() does (one sample does not fit even with tensors in host memory, a malformed graph).
uint64_t pieces(const QGraph& graph, const sim::Arch& arch, const LowerOptions& options = {});

// The concat lower() refuses as ConcatInHost on `arch`, found by lower()'s own search for the
// batch's pieces with its fit checks alone (the only part of lower() that holds tensors in host
// memory), or nullopt: for the compile's fallback (compile.h place_concats). Throws the other
// InputErrors that search throws.
std::optional<std::string> concat_in_host(const QGraph& graph, const sim::Arch& arch, const LowerOptions& options = {});

}  // namespace tpusim::compiler
