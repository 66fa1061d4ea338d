// fuzz_simulate: the input drives a small machine and a program. Byte 0 picks the array shape,
// byte 1 the weight FIFO and queue depths (low 4 bits) and the timing parameters (high 4 bits:
// 0 the usual small latencies, else values up to the ends of their ranges in docs/arch.md, so
// that checked time arithmetic and huge durations are exercised); the rest is 16-byte instruction words
// (words the decoder rejects are skipped), with a halt appended, on a 256-byte weight image and one input and
// one output host region. The fast engine must either refuse the program with a SimError or run it: then the
// timing engine runs it too, on every instruction's exact cycles, and the fast engine's memories equal the
// reference executor's. A crash, a hang (the run is capped with
// --max-cycles) or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "isa/instruction.h"
#include "sim/machine.h"
#include "sim/reference.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using tpusim::fuzz::finding;

// libsystemc references sc_main; libFuzzer provides main().
extern "C" int sc_main(int, char**) { return 0; }

namespace {

sim::Arch small_arch(uint8_t shape, uint8_t depths) {
  sim::Arch a;
  a.array_rows = 2 + shape % 7;        // 2..8
  a.array_cols = 2 + shape / 7 % 7;    // 2..8
  a.ub_bytes = 64 * a.ub_row_bytes();  // 64 UB rows
  a.acc_entries = 32;
  a.weight_fifo_tiles = 1 + depths % 4;
  a.station_queue_depth = 1 + depths / 4 % 4;
  a.weight_mem_bytes = a.tile_bytes() * 64;
  a.host_latency_cycles = 5;
  a.weight_mem_latency_cycles = 3;
  // Timing profiles: each bit of the high nibble moves a group of parameters to an end of its range.
  const unsigned timing = depths >> 4;
  if (timing & 1)
    a.host_latency_cycles = a.weight_mem_latency_cycles = a.activation_latency_cycles = 1'000'000'000;
  if (timing & 2) a.host_gbps = a.weight_mem_gbps = 1e-3;
  if (timing & 4) a.clock_mhz = timing & 8 ? 1 : 1e5;
  else if (timing & 8) a.issue_cycles = 1'000'000, a.activation_lanes = 1;
  return a;
}

isa::Program program_from(std::span<const uint8_t> words) {
  isa::Program p;
  p.model = "fuzz";
  p.weights.assign(256, 0);
  for (size_t i = 0; i < p.weights.size(); ++i) p.weights[i] = uint8_t(i * 37 + 11);
  isa::HostRegion in;
  in.name = "x";
  in.host_addr = 0;
  in.bytes = 512;
  in.init.assign(512, 0);
  for (size_t i = 0; i < in.init.size(); ++i) in.init[i] = uint8_t(i * 13 + 5);
  isa::HostRegion out;
  out.name = "y";
  out.output = true;
  out.host_addr = 1024;
  out.bytes = 512;
  p.host_regions = {in, out};
  for (size_t at = 0; at + isa::kInstructionBytes <= words.size() && p.code.size() < 64;
       at += isa::kInstructionBytes) {
    try {
      p.code.push_back(isa::decode(words.subspan(at).first<isa::kInstructionBytes>(), "fuzz"));
    } catch (const InputError&) {
    }
  }
  p.code.push_back(isa::make_instruction(isa::Opcode::halt));
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  return fuzz::guarded("fuzz_simulate", [&] {
    const sim::Arch arch = small_arch(data[0], data[1]);
    const isa::Program p = program_from({data + 2, size - 2});
    sim::RunResult timing, fast;
    try {
      fast = sim::simulate(p, arch, {sim::Engine::fast, 200000});
    } catch (const InputError&) {
      return;  // refused: a bad address, a hazard, a deadlock, the cycle limit, bad data
    }
    // Whatever the fast engine runs, the timing engine runs the same way (it only lacks the
    // data, so it may accept a program whose data the fast engine refuses, never the reverse).
    timing = sim::simulate(p, arch, {sim::Engine::timing, 200000});
    if (!(fast.timeline == timing.timeline) || !(fast.matrix == timing.matrix))
      finding("timing and fast engines disagree on the schedule (%llu vs %llu cycles)",
              (unsigned long long)timing.cycles, (unsigned long long)fast.cycles);
    std::string why;
    if (!sim::same_memories(*fast.state, sim::run_reference(p, arch), &why))
      finding("fast engine memories differ from the reference: %s", why.c_str());
  });
}
