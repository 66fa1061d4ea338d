// fuzz_npy: the input is the bytes of a NumPy .npy file (weights, biases and inputs that model
// descriptions name; compiler/npy.h). parse_npy must either return an array whose element bytes
// match its dtype and shape exactly, or reject the bytes with an InputError (bad magic, version,
// header dict, dtype, Fortran order, a size that does not match); nothing else. An accepted array
// must convert to floats element for element and survive write_npy -> read_npy unchanged.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/npy.h"
#include "isa/error.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using namespace tpusim::compiler;
using tpusim::fuzz::finding;

namespace {

size_t item_size(const std::string& dtype) {
  if (dtype == "<f4" || dtype == "<i4") return 4;
  if (dtype == "<f8" || dtype == "<i8") return 8;
  if (dtype == "|i1" || dtype == "|u1") return 1;
  finding("accepted dtype '%s', which parse_npy does not name canonically", dtype.c_str());
}

const std::filesystem::path& scratch() {
  static const struct Scratch {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("tpusim-fuzz-npy-" + std::to_string(getpid()) + ".npy");
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } scratch;
  return scratch.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded("fuzz_npy", [&] {
    NpyArray a;
    try {
      a = parse_npy(std::vector<uint8_t>(data, data + size), "fuzz.npy");
    } catch (const InputError&) {
      return;
    }
    uint64_t elements = 1;
    for (uint64_t d : a.shape)
      if (__builtin_mul_overflow(elements, d, &elements)) finding("accepted a shape whose element count overflows");
    if (a.elements() != elements) finding("elements() %llu, the shape's product %llu",
                                          (unsigned long long)a.elements(), (unsigned long long)elements);
    const size_t item = item_size(a.dtype);
    if (elements > size || a.data.size() != elements * item)
      finding("%llu data bytes for %llu elements of %s", (unsigned long long)a.data.size(),
              (unsigned long long)elements, a.dtype.c_str());
    if (a.to_float().size() != elements) finding("to_float() gave a different number of elements");
    // The round trip through a file (the tools write what they read).
    try {
      write_npy(scratch(), a);
      const NpyArray b = read_npy(scratch());
      if (b.dtype != a.dtype || b.shape != a.shape || b.data != a.data)
        finding("write_npy -> read_npy changed the array (%s)", a.dtype.c_str());
    } catch (const InputError& e) {
      finding("an accepted array does not round-trip: %s", e.what());
    }
  });
}
