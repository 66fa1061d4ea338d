// fuzz_results: the input is the text of a JSON file `tpusim compare` reads: a GPU or CPU runner's
// results (gpu/results.h, tpusim-gpu-results/1) or reference data (gpu/reference.h: measured,
// published). Each reader must either accept the document or reject it with an InputError (which
// names the line of the offending record: gpu/json_reader.h scans the accepted text for it);
// nothing else. What a reader accepts, written back in its format, must read again to the same
// document (a second write gives the same bytes).
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/reference.h"
#include "gpu/results.h"
#include "isa/error.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using tpusim::fuzz::finding;

namespace {

// One reader's contract on `text`: parse refuses it with an InputError, or what it accepts, written
// back, reads again, and a second write gives the same bytes.
template <typename Parse, typename Write>
void check(const char* stage, const std::string& text, Parse parse, Write write) {
  fuzz::guarded(stage, [&] {
    decltype(parse(text)) document;
    try {
      document = parse(text);
    } catch (const InputError&) {
      return;
    }
    const std::string once = write(document);
    std::string twice;
    try {
      twice = write(parse(once));
    } catch (const InputError& e) {
      finding("%s: its writer made a document it refuses: %s", stage, e.what());
    }
    if (twice != once)
      finding("%s: a second write differs at byte %zu", stage,
              fuzz::first_difference({reinterpret_cast<const uint8_t*>(once.data()), once.size()},
                                     {reinterpret_cast<const uint8_t*>(twice.data()), twice.size()}));
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check("fuzz_results: results", text, [](const std::string& t) { return gpu::parse_results(t, "fuzz.json"); },
        [](const gpu::ResultsFile& r) { return gpu::results_json(r); });
  check("fuzz_results: reference", text, [](const std::string& t) { return gpu::parse_reference(t, "fuzz.json"); },
        [](const gpu::ReferenceData& d) { return gpu::reference_json(d); });
  return 0;
}
