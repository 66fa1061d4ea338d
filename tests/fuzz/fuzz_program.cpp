// fuzz_program: the input is a .tpu container. isa::read_program either rejects it with InputError
// or returns a Program that
//   - write_program accepts, giving bytes that read_program reads back to an equal Program,
//     and that serialize again to the same bytes (write_program is deterministic), and
//   - the disassembler prints without throwing.
//
// Section CRCs would stop almost every mutation at the checksum test, so a custom mutator (below)
// mostly mutates the contents of one section and rebuilds the container with correct offsets,
// sizes and CRCs (and a manifest that is still JSON in canonical form); one mutation in four works
// on the raw bytes to exercise the header checks.
#include <boost/crc.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "isa/disassembler.h"
#include "isa/error.h"
#include "isa/program.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using tpusim::fuzz::finding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded("fuzz_program", [&] {
    isa::Program p;
    try {
      p = isa::read_program({data, size}, "fuzz.tpu");
    } catch (const InputError&) {
      return;
    }
    fuzz::check_container_round_trip("read_program", p);
    (void)isa::disassemble(p);  // must not throw for any valid program
  });
}

// ---- structure-aware mutation --------------------------------------------------------------

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

struct Section {
  uint32_t type;
  std::vector<uint8_t> data;
};

uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

void put_le(uint8_t* p, int bytes, uint64_t v) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// The sections of a container whose header and table are sane enough to take apart.
bool split(const uint8_t* data, size_t size, std::vector<Section>& out) {
  if (size < isa::kHeaderBytes) return false;
  const uint64_t count = get_le(data + 16, 4);
  if (count == 0 || count > 16 || isa::kHeaderBytes + count * isa::kSectionEntryBytes > size) return false;
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t* e = data + isa::kHeaderBytes + i * isa::kSectionEntryBytes;
    const uint64_t off = get_le(e + 8, 8), len = get_le(e + 16, 8);
    if (off > size || len > size - off) return false;
    out.push_back({static_cast<uint32_t>(get_le(e, 4)), std::vector<uint8_t>(data + off, data + off + len)});
  }
  return true;
}

// The layout write_program uses: header, table, then each section 16-byte aligned; the header
// keeps the original's other bytes (version and reserved fields stay whatever they were).
std::vector<uint8_t> build(const uint8_t* header, const std::vector<Section>& sections) {
  auto align16 = [](size_t n) { return (n + 15) & ~size_t{15}; };
  std::vector<uint8_t> out(align16(isa::kHeaderBytes + sections.size() * isa::kSectionEntryBytes));
  std::memcpy(out.data(), header, isa::kHeaderBytes);
  put_le(&out[16], 4, sections.size());
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t offset = out.size();
    const std::vector<uint8_t>& d = sections[i].data;
    boost::crc_32_type crc;
    crc.process_bytes(d.data(), d.size());
    uint8_t* e = &out[isa::kHeaderBytes + i * isa::kSectionEntryBytes];
    put_le(e, 4, sections[i].type);
    put_le(e + 4, 4, crc.checksum());
    put_le(e + 8, 8, offset);
    put_le(e + 16, 8, d.size());
    put_le(e + 24, 8, 0);
    out.resize(align16(offset + d.size()));
    std::copy(d.begin(), d.end(), out.begin() + static_cast<ptrdiff_t>(offset));
  }
  put_le(&out[24], 8, out.size());
  return out;
}

// The reader accepts only the canonical manifest text (write_program's), so a mutated manifest
// that is still JSON is re-serialized that way; otherwise nearly every mutation would stop at the
// canonical-form check.
void canonicalize(std::vector<uint8_t>& manifest) {
  int depth = 0;
  auto deepest = [&](int d, nlohmann::json::parse_event_t, nlohmann::json&) {
    return (depth = std::max(depth, d), true);
  };
  const nlohmann::json j = nlohmann::json::parse(manifest.begin(), manifest.end(), deepest, false);
  if (j.is_discarded() || depth > 100) return;  // dump() recurses: keep deep documents as they are
  const std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
  manifest.assign(text.begin(), text.end());
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  std::vector<Section> sections;
  if (rng() % 4 == 0 || !split(data, size, sections)) return LLVMFuzzerMutate(data, size, max_size);

  Section& s = sections[rng() % sections.size()];
  const size_t old = s.data.size();
  const size_t overhead = isa::kHeaderBytes + sections.size() * (isa::kSectionEntryBytes + 15) + 15;
  const size_t budget = max_size > overhead + size ? max_size - overhead - size : 0;
  const bool code = s.type == static_cast<uint32_t>(isa::SectionType::code);
  if (code && old >= isa::kInstructionBytes && old % isa::kInstructionBytes == 0 && rng() % 2) {
    // Mutate one instruction word in place, keeping the section a whole number of words.
    uint8_t* word = s.data.data() + (rng() % (old / isa::kInstructionBytes)) * isa::kInstructionBytes;
    uint8_t tmp[isa::kInstructionBytes];
    std::memcpy(tmp, word, sizeof tmp);
    const size_t n = LLVMFuzzerMutate(tmp, sizeof tmp, sizeof tmp);
    std::memcpy(word, tmp, n);
  } else {
    const size_t room = std::min<size_t>(budget, 256);
    s.data.resize(std::max<size_t>(old, 1) + room);
    if (old == 0) s.data[0] = 0;
    const size_t n = LLVMFuzzerMutate(s.data.data(), std::max<size_t>(old, 1), s.data.size());
    s.data.resize(n);
    if (s.type == static_cast<uint32_t>(isa::SectionType::manifest) && rng() % 4 != 0) canonicalize(s.data);
  }
  const std::vector<uint8_t> rebuilt = build(data, sections);
  if (rebuilt.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, rebuilt.data(), rebuilt.size());
  return rebuilt.size();
}
