// The memory checks' figures that only the lowering knows (docs/limits.md "Memory"): the weight
// image as laid out (each tile's stored box, counted before its bytes are built) and the lowering's
// working state (Compiled::lowering_bytes, from its containers' sizes: compiler/held_bytes.h).
#include <catch2/catch.hpp>

#include <map>
#include <unordered_map>

#include "compiler/compile.h"
#include "compiler/held_bytes.h"
#include "e2e_support.h"
#include "isa/error.h"
#include "tests/test_support.h"

namespace tpusim::test {

using Catch::Matchers::Contains;

namespace {

// 32 inputs, a dense layer of 16: on a 24 x 32 array (UB rows of 32 bytes) its 32 weight rows take
// two K tiles of 24 rows: channels 0..23, then the tile moved back to end at the row's end (lane
// 8: channels 8..31), whose first 16 rows (channels 8..23, the first tile's) are left zero
// (layout.h LaneTile). Each is stored as its useful box, 24 rows x 16 columns: 768 bytes against
// 512 weights.
const char* kDense = "[model]\nname = \"d\"\nbatch = 1\ninput = [32]\n\n[[layer]]\ntype = \"dense\"\nunits = 16\n";

}  // namespace

TEST_CASE("a full compile's memory is checked again with the weight image as laid out, before its bytes", "[memory]") {
  ScratchDir dir;
  write_text(dir / "d.toml", kDense);
  const sim::Arch arch = rect(24, 32);
  compiler::LoadOptions o;
  // Before lowering, a byte a weight: 528 float parameters (512 weights, 16 biases) x 4 = 2112;
  // quantized 512 + 16 x 4 = 576; the image 512; the input 1 x 32 x 6 (float, int8, TPU order) =
  // 192; the calibration run over 1 sample x 16 outputs x 4 = 64: 3456 bytes.
  o.max_memory = 3455;
  REQUIRE_THROWS_WITH(compiler::compile_file(dir / "d.toml", arch, o),
                      Contains("needs about 3456 bytes (2112 for 528 float parameters, 576 for their quantized weights "
                               "and biases, 512 for the weight image, 192 for batch 1 x 32 input values, 64 for a "
                               "calibration run over 1 samples x 16 layer output values), more than the 3455 bytes "
                               "allowed by --max-memory"));
  // Laid out: two tiles of 24 x 16 = 768 bytes in place of 512: 3712, refused before the image's
  // bytes are built (the message names the file once, as the first check's does).
  o.max_memory = 3711;
  REQUIRE_THROWS_WITH(compiler::compile_file(dir / "d.toml", arch, o),
                      Catch::Matchers::StartsWith((dir / "d.toml").string() + ": compiling model d needs about 3712 "
                                                  "bytes (2112 for 528 float parameters, 576 for their quantized "
                                                  "weights and biases, 768 for the weight image as laid out, 192"));
  o.max_memory = 3712;
  const compiler::Compiled c = compiler::compile_file(dir / "d.toml", arch, o);
  CHECK(c.program.weights.size() == 768);
  // A timing-only compile holds no image bytes: not checked again (its 16 biases x 8 = 128 bytes).
  o.timing_only = true;
  o.max_memory = 128;
  CHECK(compiler::compile_file(dir / "d.toml", arch, o).program.weights_not_computed == 768);
}

TEST_CASE("the lowering's working state is counted from its containers' sizes", "[memory]") {
  // held_bytes.h: a vector its capacity, a vector<bool> a bit an element, a tree node 32 bytes of
  // links and colour and its value, a hash node 16 bytes (link and cached hash) and its value, and
  // the bucket array.
  std::vector<uint64_t> v;
  v.reserve(10);
  CHECK(compiler::held_bytes(v) == 80);  // 10 x 8
  std::vector<bool> b(64);
  CHECK(compiler::held_bytes(b) == b.capacity() / 8);
  std::map<uint64_t, uint32_t> m{{1, 2}, {3, 4}};
  CHECK(compiler::tree_bytes(m) == 2 * (32 + 16));  // (a pair<const uint64_t, uint32_t>: 16 bytes)
  std::unordered_map<uint64_t, uint64_t> h{{1, 2}};
  CHECK(compiler::hash_bytes(h) == 16 + 16 + h.bucket_count() * 8);

  ScratchDir dir;
  write_text(dir / "d.toml", kDense);
  compiler::LoadOptions o;
  const compiler::Compiled full = compiler::compile_file(dir / "d.toml", rect(24, 32), o);
  o.timing_only = true;
  const compiler::Compiled timing = compiler::compile_file(dir / "d.toml", rect(24, 32), o);
  // One try (the batch fits in one piece, no piece schedule), the same containers either way, the
  // sum of each one's held_bytes (from a breakdown of this compile): the per-column table, 7 UB
  // rows of 32 bytes (7 bytes for each of 32 columns) = 224, its index 136 and the answers' cache
  // 192 (552); the image's index (2 tile uses, 2 seeded keys) 312; the layers' stats 288; the
  // tensors' storage 160 and whole-batch copies 176 (336); the passes' fetches 176 and the lane
  // tiles 144 (their maps), with their lists 264; the emitter's row sets 168; the ops' work 128;
  // vectors of an entry per op or tensor 112; two empty hash maps' buckets 16; and the tries' shared
  // tiles (two empty hash maps and no tile) 24: 2520 bytes.
  CHECK(full.lowering_bytes == timing.lowering_bytes);
  CHECK(full.lowering_bytes == 2520);
}

}  // namespace tpusim::test
