// The tpusim instruction set, defined once.
//
// Every instruction is kInstructionBytes long, little-endian, read as one 128-bit word:
// bits 0..7 hold the opcode, bits 8..15 the opcode's flag fields, bits 16..127 its operand
// fields. This table is the only place that says which fields an opcode has, where they sit
// and what they mean. The encoder, decoder, assembler, disassembler, docs/isa.md, the
// SystemVerilog package in hw/ and the simulator's dispatch are all driven from it.
// Layout is explicit (bit position + width, packed with shifts and masks), never C bitfields.
//
// Source for the instruction repertoire: Jouppi et al., ISCA 2017, section 2 (see
// shared TPU-V1.md). Encodings are ours; the paper publishes only MatrixMultiply's field sizes
// (3-byte UB address, 2-byte accumulator address, 4-byte length, opcode and flags), which
// `matmul` follows.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace tpusim::isa {

inline constexpr int kInstructionBytes = 16;
inline constexpr int kInstructionBits = kInstructionBytes * 8;

// Execution stations of the 4-stage pipeline, plus the control unit that issues.
enum class Unit : uint8_t { control, host_dma, weight_fetch, matrix, activation };
inline constexpr std::array<std::string_view, 5> kUnitNames = {"control", "host_dma", "weight_fetch",
                                                               "matrix", "activation"};

enum class Opcode : uint8_t {
  nop = 0x00,
  halt = 0x01,
  sync = 0x02,
  barrier = 0x03,
  set_config = 0x04,
  debug_tag = 0x05,
  interrupt = 0x06,
  read_host = 0x10,
  write_host = 0x11,
  read_weights = 0x20,
  matmul = 0x30,
  activate = 0x40,
  vector = 0x41,
  pool = 0x42,
};

// A named value of an enum or mask field.
struct EnumValue {
  std::string_view name;
  uint8_t value;
  std::string_view doc;
};

// Activation functions of the activation unit (ACTIVATE.func, VECTOR.func).
enum class Func : uint8_t { identity = 0, relu = 1, relux = 2, sigmoid = 3, tanh = 4 };
inline constexpr EnumValue kFuncValues[] = {
    {"identity", 0, "no function: requantized value, saturated to int8 (int16 with 16-bit results)"},
    {"relu", 1, "max(0, y)"},
    {"relux", 2, "min(max(0, y), clip): ReLU clipped at `clip` (ReLU6 with clip = round(6/scale))"},
    {"sigmoid", 3,
     "round(127 * sigmoid(y / 256)): y read as Q7.8 (clamped to [-2048, 2047], where the curve is flat at int8 "
     "precision), output Q0.7. With 16-bit results (setcfg act_high, vec_high_out): round(32767 * "
     "sigmoid(y / 256)), y clamped to [-4096, 4095], output Q0.15"},
    {"tanh", 4,
     "round(127 * tanh(y / 256)): y read as Q7.8 (clamped to [-2048, 2047], where the curve is flat at int8 "
     "precision), output Q0.7. With 16-bit results: round(32767 * tanh(y / 256)), y clamped to [-4096, 4095], "
     "output Q0.15"},
};

// sigmoid and tanh read the requantized accumulator value y (before any saturation to int8) as a
// fixed-point number with kCurveFractionBits fraction bits, clamped to [kCurveInputMin,
// kCurveInputMax] (|y / 256| <= 8: beyond that both curves round to their limits at int8
// precision, so the clamp changes nothing). Steps of 1/256 cost at most 1/1024 (sigmoid) and
// 1/512 (tanh) of output, under the output's own rounding (1/254).
inline constexpr int kCurveFractionBits = 8;
inline constexpr int64_t kCurveInputMin = -2048, kCurveInputMax = 2047;

// Element-wise operations of VECTOR.
enum class VecOp : uint8_t { add = 0, sub = 1, mul = 2, max = 3, min = 4, pass = 5 };
inline constexpr EnumValue kVecOpValues[] = {
    {"add", 0, "a + b (operands must share one scale)"},
    {"sub", 1, "a - b (operands must share one scale)"},
    {"mul", 2, "a * b (scale of the result is scale_a * scale_b before requantization)"},
    {"max", 3, "max(a, b)"},
    {"min", 4, "min(a, b)"},
    {"pass", 5, "a (b is not read; write src_b=0): requantize or apply `func` to one operand"},
};

enum class PoolKind : uint8_t { max = 0, avg = 1 };
inline constexpr EnumValue kPoolKindValues[] = {
    {"max", 0, "maximum over the window"},
    {"avg", 1, "sum over the window divided by window^2, rounded half away from zero"},
};

// Units a SYNC waits for (bit positions of the `units` mask).
inline constexpr EnumValue kUnitMaskValues[] = {
    {"host", 0, "host DMA station (read_host, write_host)"},
    {"weights", 1, "weight fetch station (read_weights: address issue)"},
    {"matrix", 2, "matrix unit (matmul)"},
    {"act", 3, "activation unit (activate, vector, pool)"},
};

// Configuration registers written by SET_CONFIG.
// Registers 3..7 make the systolic data setup gather each matmul input vector from several UB
// rows (im2col in hardware, docs/compiler.md "Packing"); 8..9 make activate scatter an
// accumulator row's column groups to several UB rows. All reset to 0: today's behaviour.
// act_pool .. act_pool_batch (10..14) configure the activate's fused pooling (the paper's
// Normalize/Pool after the activation pipeline); act_pool = 0 (reset) is the plain activate.
// act_high .. vec_high_out (15..18) make act's results and vec's operands and result 16-bit
// (two byte planes); 0 (reset) is int8.
// mm_in_hi and mm_weight_hi (19, 20) are the matrix unit's 16-bit modes (the paper's 8 x 16 and
// 16 x 16-bit multiplies at half and quarter speed, section 2), as passes over byte planes through
// the 8-bit array; 0 (reset) is the 8-bit matmul.
// dense_rows .. act_dense_bytes (22..25) make matmul read and activate write dense rows: several
// logical rows (e.g. samples of a narrow tensor) side by side in one UB row (docs/compiler.md
// "Dense layouts"); 0 (reset) is one logical row per UB row.
enum class ConfigReg : uint8_t {
  host_stride = 0,
  host_row_bytes = 1,
  act_lane = 2,
  gather_bytes = 3,
  gather_cols = 4,
  gather_rows = 5,
  gather_col_step = 6,
  gather_row_step = 7,
  act_groups = 8,
  act_group_cols = 9,
  act_pool = 10,
  act_pool_window = 11,
  act_pool_stride = 12,
  act_pool_width = 13,
  act_pool_batch = 14,
  act_high = 15,
  vec_high_a = 16,
  vec_high_b = 17,
  vec_high_out = 18,
  mm_in_hi = 19,
  mm_weight_hi = 20,
  dense_rows = 22,
  dense_bytes = 23,
  act_dense_rows = 24,
  act_dense_bytes = 25,
};
inline constexpr EnumValue kConfigRegValues[] = {
    {"host_stride", 0,
     "bytes between consecutive rows in host memory for read_host/write_host; 0 (reset) means "
     "the UB row width"},
    {"host_row_bytes", 1,
     "bytes moved per row by read_host/write_host; 0 (reset) means the UB row width; read_host "
     "zero-fills the rest of each UB row"},
    {"act_lane", 2,
     "UB row byte where activate writes its first column (0 at reset): column c goes to byte "
     "act_lane + c, act_lane + array_cols <= the UB row width, the row's other bytes are kept. "
     "On an array with more rows than columns, several N tiles fill one UB row side by side"},
    {"gather_bytes", 3,
     "matmul gather: bytes per segment (0 at reset: no gather, each vector is bytes lane .. "
     "lane+array_rows-1 of one UB row). When set, the data setup builds input vector v from "
     "segments (u, r), u < gather_cols, r < gather_rows: segment (u, r) is bytes lane .. "
     "lane+gather_bytes-1 of UB row origin(v) + u*gather_col_step + r*gather_row_step, placed at "
     "vector elements (u*gather_rows + r)*gather_bytes onward; the elements after the last "
     "segment are 0. origin(v) is the row a plain matmul reads for vector v. The UB gives the "
     "data setup gather_rows_per_cycle rows per cycle (arch table), so a vector of D segments "
     "enters the array every ceil(D / gather_rows_per_cycle) cycles"},
    {"gather_cols", 4, "matmul gather: segments across (e.g. input pixels along an image row); 0 reads as 1"},
    {"gather_rows", 5, "matmul gather: segments down (e.g. kernel rows); 0 reads as 1"},
    {"gather_col_step", 6, "matmul gather: UB rows between segments (u, r) and (u+1, r)"},
    {"gather_row_step", 7, "matmul gather: UB rows between segments (u, r) and (u, r+1)"},
    {"act_groups", 8,
     "activate scatter: column groups per accumulator row (0 at reset: no scatter). With G "
     ">= 1 groups of act_group_cols columns, an activate of `rows` rows writes group p "
     "(accumulator columns p*act_group_cols ..) of accumulator row acc+i to bytes act_lane .. "
     "act_lane+act_group_cols-1 of UB row ub + p*rows + i: G*rows UB rows, one per cycle"},
    {"act_group_cols", 9, "activate scatter: columns per group (used when act_groups > 0)"},
    {"act_pool", 10,
     "activate's fused pooling: 0 (reset) none; 1 max, 2 avg (as pool's `kind`). The activate then reads "
     "its `rows` accumulator rows as a map of rows / (act_pool_width x act_pool_batch) lines of "
     "act_pool_width pixels with act_pool_batch images interleaved (row (y*width + x)*batch + n), "
     "computes each value as without pooling, pools act_pool_window^2 windows at act_pool_stride (as "
     "pool: max, or the sum / window^2 rounded half away from zero, on int8 values) and writes only the "
     "out_h x out_w pooled map (out = (in - window) / stride + 1, rounded down), row ub + (oy*out_w + "
     "ox)*batch + n, columns at act_lane. Rows must be a whole number of lines, at least a window high and "
     "wide; not with `unsigned` or act_groups"},
    {"act_pool_window", 11, "side of act_pool's square window in pixels, 1..15"},
    {"act_pool_stride", 12, "act_pool's stride in pixels, 1..15"},
    {"act_pool_width", 13, "pixels per line of the map an act_pool activate reads (its input width), >= 1"},
    {"act_pool_batch", 14, "images interleaved per pixel in an act_pool activate's rows, >= 1"},
    {"act_high", 15,
     "activate's 16-bit results: 0 (reset) writes int8; H > 0 writes each value as int16 in two byte "
     "planes, the low byte (bits 0..7) where the int8 value would go and the high byte (bits 8..15, "
     "signed) at the same bytes of the row H rows further (H >= rows, so the planes do not overlap). "
     "Saturates to int16; sigmoid and tanh use the 16-bit curves (see `func`). A 16-bit write is two "
     "UB rows per accumulator row (docs/timing.md). Not with `unsigned`, act_groups or act_pool"},
    {"vec_high_a", 16,
     "vec's operand a as int16: 0 (reset) reads int8 bytes; H > 0 reads element k of row src + i as "
     "the low byte k of that row (unsigned) plus 256 x the high byte k of row src + H + i (signed). "
     "H >= rows"},
    {"vec_high_b", 17, "vec's operand b as int16, as vec_high_a (src_b); H >= rows"},
    {"vec_high_out", 18,
     "vec's result as int16: 0 (reset) writes int8; H > 0 writes the low bytes to rows ub + i and the "
     "high bytes to rows ub + H + i, saturated to int16 (sigmoid and tanh: the 16-bit curves). H >= rows"},
    {"mm_in_hi", 19,
     "matmul 16-bit inputs: UB rows from each input row to the row holding its high bytes (0 at reset: "
     "8-bit inputs). A 16-bit tensor is two byte planes in one layout: bits 0..7 (unsigned) at its rows, "
     "bits 8..15 (int8; uint8 with `unsigned`) at the same rows + mm_in_hi. The matmul then streams its "
     "vectors twice, the low plane (read as uint8) and then the high plane (gathered the same way from "
     "the rows + mm_in_hi), and the accumulators add the second pass's column sums shifted left 8 bits: "
     "2 x rows x repeat vectors, half speed. Below 2^40"},
    {"mm_weight_hi", 20,
     "matmul 16-bit weights: 0 (reset) the active tile's products enter the accumulators as they are (8-bit "
     "weights, or the low byte plane of 16-bit weights, fetched with `rw unsigned`); 1 the tile is the high "
     "byte plane (int8) of 16-bit weights: the column sums are shifted left 8 bits before the accumulators "
     "add them (with mm_in_hi, 8 and 16 bits for the two passes). A 16-bit weight matrix is two tiles and two "
     "accumulating matmuls, half speed (quarter with 16-bit inputs). Other values are refused"},
    {"dense_rows", 22,
     "matmul dense read: logical rows per UB row, Q (0 or 1 at reset: none). With Q >= 2 the matmul must "
     "gather (gather_bytes > 0; a 1 x 1 gather for a plain read) and every row offset the data setup "
     "forms from `ub` (group, vector and gather steps) counts logical rows: logical row L is the "
     "dense_bytes-byte field at byte (L mod Q)*dense_bytes of UB row ub + floor(L / Q), and a segment "
     "is bytes lane .. lane+gather_bytes-1 of that field (lane + gather_bytes <= dense_bytes, "
     "Q*dense_bytes <= the UB row width). Each segment is still one UB row read"},
    {"dense_bytes", 23, "matmul dense read: bytes per logical row's field (used when dense_rows >= 2)"},
    {"act_dense_rows", 24,
     "activate dense write: logical rows per UB row, Q (0 or 1 at reset: none). With Q >= 2 the "
     "activate's j-th written row (j = i, or p*rows + i for scatter group p, or the pooled row index with "
     "act_pool) is the act_dense_bytes-byte field at byte (j mod Q)*act_dense_bytes of UB row ub + "
     "floor(j / Q): it writes act_group_cols columns (scatter) or the columns c < array_cols with act_lane "
     "+ c < act_dense_bytes from byte act_lane of the field, keeping the rest of the row; Q written rows "
     "share one UB row write"},
    {"act_dense_bytes", 25, "activate dense write: bytes per logical row's field (used when act_dense_rows >= 2)"},
};

// 16-bit element mode (setcfg act_high, vec_high_*): a 16-bit value lies in two byte planes of
// the same layout, the low plane (bits 0..7, unsigned) at the value's rows and the high plane
// (bits 8..15, signed) the register's number of rows further. sigmoid and tanh with 16-bit
// results read y as Q7.8 too (kCurveFractionBits), clamped to [kCurve16InputMin,
// kCurve16InputMax] (|y / 256| <= 16: beyond that both curves round to their limits at int16
// precision, 32767 / (1 + e^16) < 0.5), and write round(32767 f(y / 256)), Q0.15.
inline constexpr int64_t kCurve16InputMin = -4096, kCurve16InputMax = 4095;
inline constexpr int64_t kCurve16One = 32767;  // the 16-bit curves' output for f = 1

enum class FieldKind : uint8_t {
  uint,         // unsigned integer: an address, a count, a scale
  flag,         // one bit, written as a bare word in assembly when set
  enumeration,  // a named value from `values`
  mask,         // a set of named bits from `values`, written a|b in assembly
};

// Every field name used by any opcode. A name means the same thing in every opcode that has it.
enum class Field : uint8_t {
  host,
  ub,
  acc,
  rows,
  waddr,
  tiles,
  repeat,
  stride,
  lane,
  src,
  src_b,
  mult,
  shift,
  clip,
  qtable,
  in_w,
  out_h,
  out_w,
  batch,
  window,
  pool_stride,
  units,
  reg,
  value,
  tag,
  accumulate,
  switch_weights,
  unsigned_data,
  per_channel,
  func,
  op,
  kind,
  tile_rows,
  tile_cols,
  count_  // number of fields, not a field
};
inline constexpr int kFieldCount = static_cast<int>(Field::count_);

// The modelled memory an address field points into; `none` for fields that are not addresses.
enum class AddressSpace : uint8_t { none, host, ub, acc, weights };
inline constexpr std::array<std::string_view, 5> kAddressSpaceNames = {"none", "host", "ub", "acc",
                                                                       "weights"};

struct FieldSpec {
  Field id;
  std::string_view name;  // spelling in assembly
  FieldKind kind;
  std::span<const EnumValue> values;  // for enumeration and mask
  std::string_view doc;
  AddressSpace space = AddressSpace::none;
};

inline constexpr FieldSpec kFields[] = {
    {Field::host, "host", FieldKind::uint, {}, "host memory byte address", AddressSpace::host},
    {Field::ub, "ub", FieldKind::uint, {}, "unified buffer row address", AddressSpace::ub},
    {Field::acc, "acc", FieldKind::uint, {}, "accumulator row address", AddressSpace::acc},
    {Field::rows, "rows", FieldKind::uint, {}, "number of rows"},
    {Field::waddr,
     "waddr",
     FieldKind::uint,
     {},
     "weight memory byte address of the first tile",
     AddressSpace::weights},
    {Field::tiles, "tiles", FieldKind::uint, {}, "number of weight tiles"},
    {Field::repeat, "repeat", FieldKind::uint, {}, "number of row groups (second length dimension)"},
    {Field::stride, "stride", FieldKind::uint, {}, "UB rows between the starts of consecutive groups"},
    {Field::lane,
     "lane",
     FieldKind::uint,
     {},
     "UB row byte where the systolic data setup starts each input vector: element k is byte lane + k "
     "(lane + array_rows <= the UB row width)"},
    {Field::src,
     "src",
     FieldKind::uint,
     {},
     "source unified buffer row address (operand a)",
     AddressSpace::ub},
    {Field::src_b,
     "src_b",
     FieldKind::uint,
     {},
     "second source unified buffer row address (operand b)",
     AddressSpace::ub},
    {Field::mult, "mult", FieldKind::uint, {}, "requantization multiplier"},
    {Field::shift, "shift", FieldKind::uint, {}, "requantization right shift"},
    {Field::clip, "clip", FieldKind::uint, {}, "upper bound of relux, in output units"},
    {Field::qtable,
     "qtable",
     FieldKind::uint,
     {},
     "UB row address of the per-column parameter table: with C = array_cols, bytes [0, 4C) hold "
     "bias[c] (int32), [4C, 6C) mult[c] (uint16), [6C, 7C) shift[c] (low 6 bits: 0..63), little-endian, "
     "spanning ceil(7C / row width) rows",
     AddressSpace::ub},
    {Field::in_w, "in_w", FieldKind::uint, {}, "input map width in pixels"},
    {Field::out_h, "out_h", FieldKind::uint, {}, "output map height in pixels"},
    {Field::out_w, "out_w", FieldKind::uint, {}, "output map width in pixels"},
    {Field::batch, "batch", FieldKind::uint, {}, "images interleaved per pixel (rows per pixel)"},
    {Field::window, "window", FieldKind::uint, {}, "square pooling window side"},
    {Field::pool_stride, "pstride", FieldKind::uint, {}, "pooling stride in pixels"},
    {Field::units, "units", FieldKind::mask, kUnitMaskValues, "units to wait for"},
    {Field::reg, "reg", FieldKind::enumeration, kConfigRegValues, "configuration register"},
    {Field::value, "value", FieldKind::uint, {}, "value written to the register"},
    {Field::tag, "tag", FieldKind::uint, {}, "tag shown in traces and the debugger"},
    {Field::accumulate, "accumulate", FieldKind::flag, {}, "add to the accumulators (else overwrite)"},
    {Field::switch_weights,
     "switch",
     FieldKind::flag,
     {},
     "make the shadow weight tile active before the first row"},
    {Field::unsigned_data, "unsigned", FieldKind::flag, {}, "operands are uint8 (else int8)"},
    {Field::per_channel,
     "perchan",
     FieldKind::flag,
     {},
     "take bias, multiplier and shift per column from the table at `qtable` (instead of `mult` "
     "and `shift`)"},
    {Field::func, "func", FieldKind::enumeration, kFuncValues, "activation function"},
    {Field::op, "op", FieldKind::enumeration, kVecOpValues, "element-wise operation"},
    {Field::kind, "kind", FieldKind::enumeration, kPoolKindValues, "pooling kind"},
    {Field::tile_rows,
     "tile_rows",
     FieldKind::uint,
     {},
     "rows of each fetched tile stored in weight memory (0: array_rows); the weight FIFO fills rows "
     "tile_rows .. array_rows-1 with zeros"},
    {Field::tile_cols,
     "tile_cols",
     FieldKind::uint,
     {},
     "columns of each fetched tile stored in weight memory (0: array_cols); the weight FIFO fills "
     "columns tile_cols .. array_cols-1 with zeros"},
};
static_assert(std::size(kFields) == kFieldCount, "one FieldSpec per Field, in enum order");
static_assert(std::size(kAddressSpaceNames) == static_cast<int>(AddressSpace::weights) + 1);

constexpr const FieldSpec& field_spec(Field f) { return kFields[static_cast<int>(f)]; }

// Where a field sits in one opcode's encoding, its legal range and its assembly default.
struct Operand {
  Field field;
  uint8_t lsb;    // bit position in the 128-bit word
  uint8_t width;  // bits
  uint64_t min = 0;
  std::optional<uint64_t> default_value = std::nullopt;  // nullopt: required in assembly
};

struct OpcodeSpec {
  Opcode opcode;
  std::string_view mnemonic;
  std::string_view paper_name;  // the TPU paper's name for the instruction
  Unit unit;
  std::span<const Operand> operands;
  std::string_view semantics;
  std::string_view waits_for;
};

namespace layout {
// Flag fields live in bits 8..15, operands in 16..127.
inline constexpr Operand kReadHost[] = {{Field::host, 16, 40}, {Field::ub, 56, 24}, {Field::rows, 80, 24, 1}};
inline constexpr Operand kReadWeights[] = {{Field::unsigned_data, 8, 1, 0, 0},
                                          {Field::waddr, 16, 40},
                                          {Field::tiles, 56, 16, 1},
                                          {Field::tile_rows, 72, 16, 0, 0},
                                          {Field::tile_cols, 88, 16, 0, 0}};
inline constexpr Operand kMatmul[] = {{Field::accumulate, 8, 1, 0, 0},
                                      {Field::switch_weights, 9, 1, 0, 0},
                                      {Field::unsigned_data, 10, 1, 0, 0},
                                      {Field::ub, 16, 24},
                                      {Field::acc, 40, 16},
                                      {Field::rows, 56, 16, 1},
                                      {Field::repeat, 72, 16, 1, 1},
                                      {Field::stride, 88, 24, 0, 0},
                                      {Field::lane, 112, 16, 0, 0}};
inline constexpr Operand kActivate[] = {{Field::func, 8, 3, 0, 0},
                                        {Field::per_channel, 11, 1, 0, 0},
                                        {Field::unsigned_data, 12, 1, 0, 0},
                                        {Field::acc, 16, 16},
                                        {Field::ub, 32, 24},
                                        {Field::rows, 56, 16, 1},
                                        {Field::mult, 72, 16, 0, 1},
                                        {Field::shift, 88, 6, 0, 0},
                                        {Field::clip, 94, 8, 0, 127},
                                        {Field::qtable, 102, 24, 0, 0}};
inline constexpr Operand kVector[] = {{Field::op, 8, 3},
                                      {Field::func, 11, 3, 0, 0},
                                      {Field::src, 16, 24},
                                      {Field::src_b, 40, 24},
                                      {Field::ub, 64, 24},
                                      {Field::rows, 88, 16, 1},
                                      {Field::mult, 104, 16, 0, 1},
                                      {Field::shift, 120, 6, 0, 0}};
inline constexpr Operand kPool[] = {
    {Field::kind, 8, 1},          {Field::src, 16, 24},       {Field::ub, 40, 24},
    {Field::in_w, 64, 12, 1},     {Field::out_h, 76, 12, 1},  {Field::out_w, 88, 12, 1},
    {Field::batch, 100, 8, 1, 1}, {Field::window, 108, 4, 1}, {Field::pool_stride, 112, 4, 1}};
inline constexpr Operand kSync[] = {{Field::units, 16, 4, 1}};
inline constexpr Operand kSetConfig[] = {{Field::reg, 16, 8}, {Field::value, 24, 64}};
inline constexpr Operand kDebugTag[] = {{Field::tag, 16, 32}};
}  // namespace layout

inline constexpr OpcodeSpec kOpcodes[] = {
    {Opcode::nop, "nop", "Nop", Unit::control, {}, "Does nothing; takes one issue slot.", "nothing"},
    {Opcode::halt,
     "halt",
     "Halt",
     Unit::control,
     {},
     "Ends the program once every unit has finished all earlier instructions.",
     "all units idle and all weight fetches landed"},
    {Opcode::sync, "sync", "Sync (wait for units)", Unit::control, layout::kSync,
     "Holds issue until every earlier instruction of the named units has completed. Later "
     "instructions of any unit wait behind it. The compiler places it before a matmul that reads "
     "rows an activate is still writing (counted as RAW stall).",
     "the named units idle"},
    {Opcode::barrier,
     "barrier",
     "Sync (barrier)",
     Unit::control,
     {},
     "Holds issue until every unit is idle and every weight fetch started by read_weights has "
     "landed in the weight FIFO: a full drain, used between independent phases and before "
     "reading results on the host.",
     "all units idle and all weight fetches landed"},
    {Opcode::set_config, "setcfg", "Set Configuration", Unit::control, layout::kSetConfig,
     "Writes a configuration register; takes effect for instructions issued after it.",
     "nothing (registers are read at issue)"},
    {Opcode::debug_tag, "tag", "Debug tag", Unit::control, layout::kDebugTag,
     "No effect on the machine; marks a point in traces and the debugger (e.g. a layer start).", "nothing"},
    {Opcode::interrupt,
     "int",
     "Interrupt host",
     Unit::control,
     {},
     "Ends a program segment: the TPU has no branches, so a loop whose steps the host drives (a recurrence "
     "whose step count is known at run time) runs as segments the host launches one after another. Holds "
     "issue until every unit is idle and every weight fetch has landed (as `barrier`), then interrupts the "
     "host, whose driver takes the interrupt, downloads the next segment (the instructions after this one "
     "through the next `int` or `halt`) over the host link into the instruction buffer and launches it: "
     "issue resumes host_driver_us x clock_mhz + host_latency_cycles + transfer_cycles(its instructions x "
     "16 bytes, host_gbps) cycles after the drain (docs/timing.md, \"Host model\"). No effect on data; "
     "memories, the weight FIFO and configuration registers stay as they are. The held cycles count as "
     "host_launch, part of non_matrix; the drain before them as a `sync` on the units it waits for: RAW "
     "stall until the matrix and activation units are idle (the next segment reads what they write), then "
     "input stall while a host transfer runs (docs/timing.md, \"Counters\").",
     "all units idle and all weight fetches landed, then the host's launch of the next segment"},
    {Opcode::read_host, "rhm", "Read_Host_Memory", Unit::host_dma, layout::kReadHost,
     "Copies `rows` rows from host memory at `host` (rows `host_stride` bytes apart, "
     "`host_row_bytes` bytes each) into UB rows ub .. ub+rows-1.",
     "the host DMA station free"},
    {Opcode::write_host, "whm", "Write_Host_Memory", Unit::host_dma, layout::kReadHost,
     "Copies UB rows ub .. ub+rows-1 to host memory at `host` (rows `host_stride` bytes apart, "
     "`host_row_bytes` bytes each).",
     "the host DMA station free"},
    {Opcode::read_weights, "rw", "Read_Weights", Unit::weight_fetch, layout::kReadWeights,
     "Starts fetching `tiles` consecutive weight tiles from weight memory at `waddr` into the weight "
     "FIFO. Each tile is R x C bytes, row major (R = tile_rows, C = tile_cols; 0 means array_rows, "
     "array_cols): tile t at waddr + t*R*C, weight W[k][j] at byte k*C + j. A partial tile (R or C "
     "smaller than the array) is stored compactly and only its R*C bytes cross the weight memory "
     "link; the FIFO fills the other cells with zeros, so the array holds a full tile. Decoupled: "
     "it completes when the addresses are sent; the data lands later and the matrix unit stalls "
     "if it needs a tile that has not landed. Tiles move from the FIFO into the shadow tile in order.",
     "the weight fetch station free and a FIFO slot for each tile"},
    {Opcode::matmul, "matmul", "MatrixMultiply/Convolve", Unit::matrix, layout::kMatmul,
     "Streams repeat x rows input vectors through the array: group g (0 <= g < repeat) reads UB "
     "rows ub + g*stride .. ub + g*stride + rows-1, bytes lane .. lane+array_rows-1 of each row "
     "forming the vector (K tiles of array_rows channels side by side in a wider row; with the "
     "setcfg gather registers set, gathered from several rows instead). Result i (0 <= i < rows*repeat) goes to "
     "accumulator row acc + i, added to it when `accumulate` is set, else overwriting it. With "
     "`switch`, the shadow tile becomes active with the first row's wavefront. A convolution is "
     "one matmul per kernel position, accumulating, or with the gather registers several kernel "
     "positions (and output pixels) per vector. With setcfg mm_in_hi or mm_weight_hi, 16-bit "
     "inputs or weights: passes over byte planes, at half (quarter) speed (docs/timing.md).",
     "the input rows written (explicit sync), the active tile (or, with switch, the shadow tile) "
     "loaded"},
    {Opcode::activate, "act", "Activate", Unit::activation, layout::kActivate,
     "Reads accumulator rows acc .. acc+rows-1, requantizes each int32 x to "
     "y = round_half_away(x * mult / 2^shift) (with perchan: (x + bias[c]) * mult[c] / 2^shift[c] "
     "from the table), applies `func`, saturates to int8 (uint8 with `unsigned`; int16 in two byte "
     "planes with setcfg act_high) and writes each row's array_cols values to bytes act_lane .. act_lane+array_cols-1 (setcfg register) of UB "
     "rows ub .. ub+rows-1, keeping the rows' other bytes (with setcfg act_groups > 0: each "
     "column group to a UB row of its own). With the setcfg register act_pool set, it pools as it "
     "writes (the paper's Normalize/Pool): only the pooled map's rows are written (see `reg`).",
     "the activation unit free; the matrix unit finished writing the rows it reads"},
    {Opcode::vector, "vec", "Vector (element-wise)", Unit::activation, layout::kVector,
     "For each of `rows` UB rows: r = op(a, b) on int8 elements (int16 for an operand whose setcfg "
     "vec_high_a / vec_high_b is set) in 64 bits, then y = round_half_away(r * mult / 2^shift), then "
     "`func`, saturated to int8 (int16 with vec_high_out), written to UB row ub + i (and the high plane). "
     "Every operand row is read before any result is written. Used for LSTM gate arithmetic.",
     "the activation unit free"},
    {Opcode::pool, "pool", "Normalize/Pool", Unit::activation, layout::kPool,
     "Pools a feature map stored pixel-major with `batch` images interleaved (row of pixel (y,x) "
     "of image n = src + (y*in_w + x)*batch + n) over square windows, writing the out_h x out_w "
     "map in the same layout at `ub`.",
     "the activation unit free"},
};

inline constexpr int kOpcodeCount = static_cast<int>(std::size(kOpcodes));

// Look-ups; nullptr / nullopt when absent.
const OpcodeSpec* find_opcode(uint8_t byte);
const OpcodeSpec* find_mnemonic(std::string_view mnemonic);
const OpcodeSpec& spec(Opcode op);
const Operand* find_operand(const OpcodeSpec& spec, Field field);
std::optional<Field> find_field(std::string_view name);
const EnumValue* find_value(std::span<const EnumValue> values, std::string_view name);
const EnumValue* find_value(std::span<const EnumValue> values, uint64_t value);

constexpr uint64_t field_max(const Operand& o) {
  return o.width >= 64 ? ~uint64_t{0} : (uint64_t{1} << o.width) - 1;
}
// The largest value operand `field` of `op` holds (its field_max); a logic error if `op` has no
// such operand.
uint64_t field_max(Opcode op, Field field);

// Compile-time checks of the table: operands inside the word, flags in byte 1, no overlaps.
namespace detail {
constexpr bool operands_well_formed(std::span<const Operand> ops) {
  std::array<bool, kInstructionBits> used{};
  for (int b = 0; b < 8; ++b) used[b] = true;  // opcode byte
  for (const Operand& o : ops) {
    if (o.width == 0 || o.width > 64 || o.lsb < 8 || o.lsb + o.width > kInstructionBits) return false;
    const FieldKind k = field_spec(o.field).kind;
    const bool in_flag_byte = o.lsb + o.width <= 16;
    const bool is_flagish = k == FieldKind::flag || (k == FieldKind::enumeration && in_flag_byte);
    if (in_flag_byte != is_flagish) return false;
    if (k == FieldKind::flag && o.width != 1) return false;
    for (int b = o.lsb; b < o.lsb + o.width; ++b) {
      if (used[b]) return false;
      used[b] = true;
    }
  }
  return true;
}
constexpr bool table_well_formed() {
  for (int i = 0; i < kFieldCount; ++i)
    if (static_cast<int>(kFields[i].id) != i) return false;
  for (int i = 0; i < kOpcodeCount; ++i) {
    if (!operands_well_formed(kOpcodes[i].operands)) return false;
    for (int j = 0; j < i; ++j)
      if (kOpcodes[i].opcode == kOpcodes[j].opcode || kOpcodes[i].mnemonic == kOpcodes[j].mnemonic)
        return false;
  }
  return true;
}
}  // namespace detail
static_assert(detail::table_well_formed(), "ISA table: overlapping, misplaced or duplicate fields");

}  // namespace tpusim::isa
