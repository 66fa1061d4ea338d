// The program container (.tpu): what the compiler or assembler hands to the simulator.
// Byte layout and manifest schema: docs/container.md. All integers little-endian.
//
//   header (64 bytes)   magic "TPUSIMPG", version, section count, file size
//   section table       one 32-byte entry per section: type, CRC-32, offset, size
//   sections            code (16-byte instructions), weights (the weight-memory image),
//                       manifest (JSON: model, arch, metadata, host layout, symbols),
//                       host_init (initial contents of input regions)
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "isa/instruction.h"

namespace tpusim::isa {

inline constexpr char kMagic[8] = {'T', 'P', 'U', 'S', 'I', 'M', 'P', 'G'};
inline constexpr uint16_t kVersionMajor = 1;
inline constexpr uint16_t kVersionMinor = 0;
inline constexpr uint32_t kHeaderBytes = 64;
inline constexpr uint32_t kSectionEntryBytes = 32;

// Largest weight image, and largest host region, a program may carry (1 GiB: the paper's
// largest app, CNN1, has about 100 MB of weights; the limit keeps a typo from allocating
// gigabytes).
inline constexpr uint64_t kMaxDataBytes = uint64_t{1} << 30;

// Rows addressable in "ub" or "acc" (2^24 and 2^16: the widths of the ub and acc fields).
uint64_t address_space_rows(std::string_view space);

// Empty when `name` can name a symbol or host region: [A-Za-z_][A-Za-z0-9_]*, and neither a
// mnemonic nor an operand name; else why not.
std::string check_name(std::string_view name);

enum class SectionType : uint32_t { code = 1, weights = 2, manifest = 3, host_init = 4 };

// A named range of host memory the program reads (input) or writes (output).
struct HostRegion {
  std::string name;
  bool output = false;
  uint64_t host_addr = 0;
  uint64_t bytes = 0;
  std::string dtype = "int8";   // int8 | uint8 | int32
  std::vector<uint64_t> shape;  // optional; product * dtype size == bytes when given
  double scale = 0.0;           // quantization scale (real = scale * q); 0 when unknown
  std::vector<uint8_t> init;    // inputs only: initial contents, empty or exactly `bytes`
  bool operator==(const HostRegion&) const = default;
};

// A name for an address: a code label (instruction index) or a region of a modelled memory.
struct Symbol {
  std::string name;
  std::string space;  // code | ub | acc | weights
  uint64_t addr = 0;
  uint64_t size = 0;  // rows for ub/acc, bytes for weights, 0 for code labels
  bool operator==(const Symbol&) const = default;
};

// A weight tile's useful cells (the machine's useful-MAC counters): the box of the cells that hold
// weights, rows x cols, and the sum over those rows of each row's span from its first to its last
// weight. A compiler's program gives them for every tile, in meta.tile_uses ([rows, cols, spans,
// waddr] per tile, in address order; waddr is the tile's weight memory address, since a partial
// tile is stored compactly, docs/isa.md rw), since only the compiler knows which cells hold a
// weight that happens to be zero; without it the machine takes them from the bytes, the nonzero
// cells (isa::tile_use_of). The older form [rows, cols, spans] lists every full tile of the image,
// tile i at i x the tile's bytes.
struct WeightTileUse {
  uint32_t rows = 0, cols = 0;
  uint64_t spans = 0;
  uint64_t waddr = 0;
  bool operator==(const WeightTileUse&) const = default;
};

// The useful cells of a tile of `rows` x `cols` bytes from its bytes, taking every nonzero cell
// for a weight (waddr 0): the compiler's meta.tile_uses of a tile, and the machine's spans of a
// gathering matmul's tile where a program gives no meta.tile_uses (sim::tile_use finds the box
// alone with less scanning). With `rows` below the tile's, the spans over its first `rows` rows.
WeightTileUse tile_use_of(const uint8_t* tile, uint64_t rows, uint64_t cols);

// A matmul's useful multiply-accumulates per input vector (8-bit, per byte-plane pass) where its
// weight tile's useful cells do not say them: a packed convolution's last group of an output row
// has fewer pixels than the group its block-Toeplitz tile was built for (docs/compiler.md), so
// part of the tile's windows compute outputs no pixel keeps. Only the compiler knows the group's
// pixels: its program lists such matmuls in meta.matmul_macs ([instruction, macs] per matmul, in
// instruction order), and the machine counts macs per vector for each instead of the tile's
// cells (sim::RunResult::macs). So does a tile whose cells hold weights of channel pairs the
// model does not multiply (a grouped convolution's tile across groups: its box holds the zero
// blocks between them) or that another tile computes (a last N tile shifted back to fit its
// slice). An identity copy that joins a concat's parts ([instruction, macs, "copy"]) moves data
// and does none of the model's arithmetic: its macs per vector (the identity's ones in the tile,
// one per copied byte) count as copy MACs (sim::RunResult::copy_macs), not as macs.
struct MatmulMacs {
  uint64_t instruction = 0;
  uint64_t macs = 0;
  bool copy = false;
  bool operator==(const MatmulMacs&) const = default;
};

struct Program {
  std::vector<Instruction> code;
  std::vector<uint8_t> weights;                    // the weight-memory image, from address 0
  std::string model;                               // workload name
  nlohmann::json arch = nlohmann::json::object();  // architecture compiled for: name + params
  nlohmann::json meta = nlohmann::json::object();  // free-form: quantization scales, compiler
  std::vector<HostRegion> host_regions;
  std::vector<Symbol> symbols;
  // A timing-only compile's program (compiler LoadOptions::timing_only): the weight image's size
  // in bytes, its contents not computed (`weights` empty); 0 for every other program. Such a
  // program runs on the timing engine only and cannot be saved (check_program).
  uint64_t weights_not_computed = 0;
  uint64_t weight_bytes() const { return weights.empty() ? weights_not_computed : weights.size(); }
  bool operator==(const Program&) const = default;
};

// meta.tile_uses of `p` for an array of rows x cols (tiles of rows x cols bytes); empty when the
// program has none. Throws InputError when it is malformed: not one [rows, cols, spans] per
// tile of the weight image, or a box larger than the array.
std::vector<WeightTileUse> tile_uses(const Program& p, uint64_t rows, uint64_t cols);
// The place in `uses` (tile_uses' result, in address order) of the tile at weight address
// `waddr`, and its entry. Both throw InputError when no tile starts there.
size_t tile_index_at(const std::vector<WeightTileUse>& uses, uint64_t waddr);
const WeightTileUse& tile_use_at(const std::vector<WeightTileUse>& uses, uint64_t waddr);
// meta.matmul_macs of `p` for an array of rows x cols; empty when the program has none. Throws
// InputError when it is malformed: not [instruction, macs] or [instruction, macs, "copy"] in
// ascending instruction order, an instruction that is not a matmul, or macs beyond rows x cols.
std::vector<MatmulMacs> matmul_macs(const Program& p, uint64_t rows, uint64_t cols);
// The entry of `list` (matmul_macs' result) for instruction `i`, or null when it has none.
const MatmulMacs* matmul_macs_at(const std::vector<MatmulMacs>& list, uint64_t i);

// The heap bytes a JSON value holds (nlohmann::json's own layout: a 16-byte value, an array's
// vector of them, an object's tree nodes, strings beyond the short-string buffer), each allocation
// rounded as glibc's malloc rounds it (16-byte multiples, an 8-byte header, 32 at least).
uint64_t json_heap_bytes(const nlohmann::json& value);
// The memory a loaded program holds, by part: its code (sizeof(Instruction) each), weight image,
// host regions' initial contents, and its manifest (meta, arch, symbols). Saturates at 2^64 - 1.
std::vector<std::pair<std::string, uint64_t>> program_bytes(const Program& program);

// The bytes write_program allocates for `program`: its header, code words, weight image and host
// regions' contents exactly, its manifest's text bounded by the manifest's heap bytes (a JSON
// value's text is shorter than the nodes that hold it). Saturates at 2^64 - 1.
uint64_t program_file_bytes(const Program& program);

// Serializes; deterministic (same Program, same bytes).
std::vector<uint8_t> write_program(const Program& program);

// Parses and validates everything (magic, version, section bounds and CRCs, each instruction,
// the manifest's schema). Throws InputError naming `source` and the offending offset or key.
Program read_program(std::span<const uint8_t> bytes, const std::string& source);

Program load_program(const std::filesystem::path& path);  // throws InputError
void save_program(const std::filesystem::path& path, const Program& program);

// Parses JSON nested at most `max_depth` levels (deeper documents overflow the stack when
// copied). Returns why not in `error` (and a discarded value) when the text is invalid or too deep.
nlohmann::json parse_json_bounded(std::string_view text, int max_depth, std::string& error);

// The canonical order of Program::symbols: by space, then address, then name.
bool symbol_order(const Symbol& a, const Symbol& b);

// Checks cross-references a well-formed container must satisfy (regions inside sane bounds,
// unique names, init sizes); empty when fine. read_program and write_program both apply it.
std::string check_program(const Program& program);

}  // namespace tpusim::isa
