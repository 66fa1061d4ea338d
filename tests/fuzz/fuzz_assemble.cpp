// fuzz_assemble: the input is assembly text. isa::assemble (file() paths resolve against a
// directory that does not exist) either rejects it with InputError or returns a Program that
//   - write_program serializes, and read_program reads back to an equal Program, and
//   - disassembles (weight image and input data written beside the listing, as `tpusim disasm -o`
//     does) to a listing that assembles to the same bytes.
//
// The assembler accepts regions of up to 4 GiB (the weight memory is that big), which would make
// single runs slow and trip libFuzzer's memory limit. While the target runs, operator new refuses
// (std::bad_alloc) any allocation above kMaxAllocation bytes or beyond kBudget bytes in total for
// the input, and such inputs are skipped as too big to test.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "isa/assembler.h"
#include "isa/disassembler.h"
#include "isa/error.h"
#include "isa/program.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using tpusim::fuzz::finding;

namespace {

constexpr size_t kMaxAllocation = size_t{16} << 20;
constexpr size_t kBudget = size_t{64} << 20;
bool g_armed = false;
size_t g_allocated = 0;

void* allocate(size_t n) noexcept {
  if (g_armed) {
    if (n > kMaxAllocation || g_allocated + n > kBudget) return nullptr;
    g_allocated += n;
  }
  return std::malloc(n ? n : 1);
}

// Arms the allocation limit for its lifetime.
struct Armed {
  Armed() { g_armed = true, g_allocated = 0; }
  ~Armed() { g_armed = false; }
};

// A scratch directory for the disassembler's data files, removed at exit.
const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("tpusim-fuzz-asm-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch(), ec);
    });
    return d;
  }();
  return dir;
}

}  // namespace

// Replacements of the throwing and nothrow forms (the aligned forms stay the sanitizer's).
void* operator new(size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::filesystem::path dir = scratch();
  Armed armed;
  try {
    fuzz::guarded("fuzz_assemble", [&] {
      isa::Program p;
      try {
        p = isa::assemble(text, "fuzz.s", "/nonexistent/tpusim-fuzz");
      } catch (const InputError&) {
        return;
      }
      const std::vector<uint8_t> bytes = fuzz::check_container_round_trip("assemble", p);

      isa::DisasmOptions opt;
      opt.data_stem = dir / "listing";
      const std::string listing = isa::disassemble(p, opt);
      isa::Program q;
      try {
        q = isa::assemble(listing, "listing.s", dir);
      } catch (const InputError& e) {
        finding("the disassembly does not assemble: %s\n--- listing ---\n%s", e.what(), listing.c_str());
      }
      const std::vector<uint8_t> again = isa::write_program(q);
      if (again != bytes)
        finding(
            "disassemble -> assemble changes the program (first difference at byte %zu)\n"
            "--- listing ---\n%s--- listing of the re-assembled program ---\n%s",
            fuzz::first_difference(again, bytes), listing.c_str(), isa::disassemble(q).c_str());
    });
  } catch (const std::bad_alloc&) {
    // The input asks for more memory than this target allows; not tested.
  }
  return 0;
}
