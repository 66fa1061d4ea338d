// fuzz_arch: the input is the text of an --arch file. parse_arch must either return an
// architecture that passes validate() and survives a round trip through arch_to_json and
// parse_arch unchanged, or reject the text with an InputError; nothing else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/arch.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using tpusim::fuzz::finding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded("fuzz_arch", [&] {
    sim::Arch arch;
    try {
      arch = sim::parse_arch(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    } catch (const InputError&) {
      return;
    }
    sim::validate(arch);  // an accepted architecture must be valid: InputError here is a finding
    const std::string text = sim::arch_to_json(arch).dump();
    if (!(sim::parse_arch(text, "again.json") == arch))
      finding("arch_to_json does not read back: %s", text.c_str());
  });
}
