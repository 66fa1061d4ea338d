#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "sim/energy.h"
#include "sim/host_model.h"

namespace tpusim::sim {

namespace {

constexpr ReportKey kKeys[] = {
    {"workload", "string", "the program's model name (`.model`, or the compiled model)"},
    {"arch", "object", "every architecture parameter as resolved for this run (docs/arch.md), with `name`"},
    {"machine", "string",
     "the machine named by what differs from its preset, e.g. `tpu-v1` or `tpu-v1 array_rows=128` "
     "(an `--arch` file's machine: its own name)"},
    {"engine", "string", "`fast`, `stepped`, `timing` or `rtl` (`tpusim run --engine rtl`: stepped, with the Verilated RTL array)"},
    {"cycles", "integer", "clock cycles from the first issue to the end of `halt`"},
    {"seconds", "number", "cycles / (clock_mhz x 10^6): simulated time"},
    {"tops", "number",
     "2 x macs / seconds / 10^12: useful tera-operations per second (a concat's identity copies, `copy_macs`, "
     "not counted)"},
    {"inferences_per_second", "number",
     "batch / seconds, with batch from the program's `.meta batch` (else 1)"},
    {"batch", "integer", "inferences per run of the program"},
    {"pieces", "object or null",
     "how a batch whose live tensors do not fit the unified buffer whole runs (docs/compiler.md \"The piece "
     "schedule\"): `piece` (samples per piece: the program's `meta.batch_piece`; the last piece may be smaller), "
     "`pieces` (batch / piece, rounded up), `schedule`: `whole model` (the whole model once per piece, as tpu-v1's "
     "driver runs it) or `piece schedule` (each run of layers in its own pieces, with `segments`: per run "
     "`first_layer`, `last_layer`, `piece`, `pieces`, the program's `meta.piece_segments`); null when the batch "
     "runs in one piece or the program does not say"},
    {"latency_seconds", "number",
     "one batch as a serving host sees it (sim/host_model.h, docs/timing.md \"Host model\"): `seconds` (the "
     "program's own input and output DMA over the host link included) + `host_overhead_seconds`"},
    {"host_overhead_seconds", "number",
     "the host's serial time around the program per batch: host_driver_us + the download of the program's "
     "instructions over the host link (host_latency_cycles + transfer of instructions x 16 bytes at host_gbps)"},
    {"macs", "integer",
     "useful multiply-accumulates the array computed: the model's arithmetic as the machine runs it, the sum of "
     "the layers' `macs` below (8-bit; for a compiled model the layers' `model_macs` x byte-plane passes, so "
     "`macs` = `model_macs` for an all-8-bit model, however it is mapped). Per matmul: for one the program lists "
     "in meta.matmul_macs, vectors x its figure (the compiler lists every matmul whose useful MACs per vector "
     "its tile's cells do not say: a grouped or depthwise convolution's tile across groups, whose box holds the "
     "zero blocks between them; a last N tile shifted back to fit its UB slice, whose first columns the tile "
     "before computes; a packed convolution's short last group of an output row, whose pixels use part of its "
     "tile's windows; a packed convolution's dilated kernel, whose tile's spans hold the zeros between its "
     "taps; weights from a file that are zero at a tile's edge; docs/compiler.md); else vectors x the "
     "used rows x used cols of its tile (the bounding box of its weights: meta.tile_uses; a program without it, "
     "e.g. assembled by hand, counts its nonzero cells), or for a matmul that gathers several UB segments a "
     "vector (a packed convolution's block-Toeplitz tile; a read of a dense layout gathers one and counts its "
     "box) vectors x the sum over the tile's rows of each row's span from its first to its last weight. A "
     "concat's identity copies are not in it (`copy_macs`). These are 8-bit multiply-accumulates: a matmul "
     "with 16-bit inputs or weights (setcfg mm_in_hi / mm_weight_hi) counts each byte-plane pass, so a "
     "16 x 8-bit product counts 2 and a 16 x 16-bit one 4"},
    {"copy_macs", "integer",
     "the multiply-accumulates of the identity matmuls that copy a concat's parts into its joined tensor "
     "(docs/compiler.md, concats): one per byte copied (the identity's ones, vectors x the channels each copies; "
     "each byte-plane pass counted), listed as copies in meta.matmul_macs. A copy is real array work (its "
     "cycles, its `array_macs` and its energy are the machine's) but none of the model's arithmetic: moving a "
     "value through a weight of 1 computes nothing the model asks for, and a mapping that writes the branches in "
     "place (`--mapper concat_inplace`, the default) has fewer or none. So it is kept out of `macs` and `tops`, "
     "which then count the model's work on every mapping, and shown here; the rest of a copy's tile cells "
     "(zeros) are like any padding, in `array_macs` only (a tile of the identity block that holds none of its "
     "ones is not computed at all: docs/compiler.md, \"What a copy counts\"). 0 for a model without concats, "
     "or a program that "
     "lists no copies"},
    {"array_macs", "integer",
     "all cell multiply-accumulates: vectors streamed x array_rows x array_cols (array_active cycles x "
     "array_rows x array_cols, but for the cycles a gathering matmul waits for its next vector); 8-bit, "
     "each byte-plane pass of a 16-bit matmul counted (as `macs`)"},
    {"model_macs", "integer or null",
     "the model's multiply-accumulates per batch, each once whatever its operands' width and however the "
     "compiler maps it (a dilated kernel's taps, not the zero weights between them that the machine reads: "
     "docs/compiler.md \"Kernel taps\"): the sum of the layers' `model_macs` below (compiler::model_macs, what "
     "`tpusim compare` "
     "and the GPU and CPU runners count); null for a program without the compiler's layer mapping (e.g. "
     "assembled by hand)"},
    {"model_tops", "number or null",
     "2 x model_macs / seconds / 10^12: the model's TeraOps/s (the TPU paper's row 9 kind; `tops` above counts "
     "the array's 8-bit MACs, each byte-plane pass of a 16-bit matmul, so the two are equal for an all-8-bit "
     "model); null with model_macs"},
    {"layers", "array or null",
     "a compiled model's layers as the compiler mapped them (the program's `meta.mapping`), in program order: "
     "per layer `layer` (name), `macs` (useful multiply-accumulates), `copy_macs` (its identity copies' "
     "multiply-accumulates, one per byte copied: the concat layer that joins parts has them, 0 elsewhere), "
     "`array_macs` (computed: streamed vectors x array_rows x array_cols; all three 8-bit, each byte-plane pass "
     "of a 16-bit input or weight counted, as `macs`, `copy_macs` and `array_macs` above, so the layers' "
     "`macs`, `copy_macs` and `array_macs` each add up to the run's on every engine), `model_macs` (the model's "
     "multiply-accumulates the layer computes, each once whatever its operands' width and however the compiler "
     "maps it: `macs` of the first byte-plane pass, the identity copies that join a concat's parts not counted, "
     "so a concat's own row has 0; the layers' sum is the model's MACs, compiler::model_macs, what "
     "`tpusim validate`'s model TOPS, `tpusim compare` and the GPU and CPU runners count), `useful_share` (macs / array_macs; a concat's copies: 0), `weight_tiles` (tiles switched in), "
     "`ub_bytes` (UB rows held during the layer x the row width, per-column tables included), for a batch run in "
     "pieces `piece` (the samples per piece the layer runs in: its segment's, docs/compiler.md), for a packed "
     "convolution `packing` (docs/compiler.md: pixels per vector, gathered input pixels and kernel rows), and "
     "where a pool is fused into a convolution's activates `fusion` (on the convolution: \"pools as it writes: "
     "max 2x2 stride 2 (POOL)\", on the pool: \"fused into CONV's activates\"), and for a layer the machine "
     "runs with 16-bit weights or inputs `precision` (\"16-bit weights\", \"16-bit inputs\" or \"16-bit weights "
     "and inputs\", docs/compiler.md); null for a program without "
     "that metadata"},
    {"mapper", "object",
     "the compiler's mapping techniques turned off for this program, and `pieces`, `host_loop` or `partial` whenever "
     "given (their defaults are the architecture's `driver_piece_schedule`, `driver_host_loop` and `driver_partial_tiles`) (the program's `meta.mapper`, e.g. `{\"pack\": false}` "
     "from `--mapper pack=off`, `{\"pieces\": true}` from `--mapper pieces=on`; docs/compiler.md \"Mapper "
     "switches\"); {} when none was given or the program was not compiled from a model"},
    {"mapping_warnings", "array",
     "one sentence per mapping choice given up for the whole program that the program records (its "
     "`meta.mapping_warnings`: each concat the compiler kept as parts where, written in place, its joined tensor "
     "would have been held in host memory, docs/compiler.md \"Concatenation\"), then one per layer that maps "
     "badly: it computes at least 1% of the model's array MACs and less than 10% of them are useful (narrow "
     "tensors, few input channels per tile; not a layer with identity copies, whose `copy_macs` say what they "
     "cost); empty when none"},
    {"instructions", "object", "instructions executed, per mnemonic"},
    {"instruction_cycles", "object", "per mnemonic, the sum of (end - start) cycles of its instructions"},
    {"breakdown", "object", "the TPU paper's counters as fractions of all cycles (keys below)"},
    {"units_busy", "object", "per unit, the fraction of cycles it had an instruction in progress"},
    {"weight_memory_busy", "number", "fraction of cycles the weight memory was transferring"},
    {"ub_peak_bytes", "integer",
     "unified buffer rows any instruction touched (their number, wherever they lie) x the row width: the "
     "UB capacity the program uses"},
    {"acc_peak_rows", "integer", "highest accumulator row any instruction touched, plus one"},
    {"energy_joules", "number",
     "energy of the run: the per-action energies (`energy`) plus static_watts x seconds (docs/energy.md)"},
    {"joules_per_inference", "number", "energy_joules / batch"},
    {"average_watts", "number",
     "energy_joules / seconds: average power over the run (the die and its weight DRAM)"},
    {"tops_per_watt", "number", "tops / average_watts"},
    {"energy", "object",
     "joules per action: `mac`, `ub_read`, `ub_write`, `acc_read`, `acc_write`, `weight_fifo`, `dram`, "
     "`host_link`, `static` (sim/energy.h)"},
    {"output_matches_reference", "bool or null",
     "the results equal the references named by `checked_against`; null when not checked (--no-check, or "
     "the timing engine, which computes no data)"},
    {"checked_against", "string or null",
     "`reference executor` (every UB, accumulator and host memory byte against sim/reference.h), `golden model "
     "reference` (a compiled model's output against compiler/golden.cpp; models whose array work exceeds 2e9 "
     "MACs skip the slow reference executor unless --full-check), or both joined by ` and `"},
    {"quantization_error", "object or null",
     "a compiled model: its output against the float reference on the calibration samples (every input when "
     "--calibrate gives separate ones): `max_abs`, "
     "`relative` (max_abs / max |float output|), `rms`; null for programs"},
    {"layer_quantization_error", "array or null",
     "a compiled model run with --layer-errors: per layer that owns an output tensor, in model order (not a "
     "flatten, whose output is its input's, nor a layer written into a concat's tensor in place, which the "
     "concat's row covers), its output as quantized (the golden reference's int8 or 16-bit tensor x its scale) "
     "against the float reference's output of that layer, on the samples of `quantization_error`: `layer`, "
     "`bits` (8 or 16), `scale`, `max_abs`, `max_float` (max |float output|: its range), `rms`, `rms_relative` "
     "(rms / max_float), `sqnr_db` (10 log10 of the float output's energy over the error's; null when the "
     "error is 0); null otherwise"},
    {"accuracy", "object or null",
     "a compiled model run with --labels: `samples`, `top1_float` (the float reference's top-1 accuracy on "
     "them) and `top1_int8` (the simulated int8 output's); the top class is the largest output, the lowest "
     "index among equals; null otherwise"},
    {"host_seconds", "number", "wall time of the simulation proper (not loading or checking)"},
    {"simulated_cycles_per_second", "number", "cycles / host_seconds"},
};

constexpr ReportKey kBreakdown[] = {
    {"array_active", "number", "cycles an input vector entered the array"},
    {"useful_macs", "number",
     "array_active weighted by the fraction of cells doing useful work: macs / (array_rows x array_cols) cycles"},
    {"unused_macs", "number",
     "array_active - useful_macs: cells doing none of the model's work (padding, the zero blocks between "
     "groups, a concat's identity copies)"},
    {"weight_stall", "number", "a matmul waiting for its tile to arrive from weight memory"},
    {"weight_shift", "number", "a matmul waiting for its tile to shift into the shadow slot"},
    {"non_matrix", "number", "the rest: array_active + weight_stall + weight_shift + non_matrix = 1"},
    {"raw_stall", "number",
     "part of non_matrix: issue held by a `sync` naming `act`, or a program segment's drain before `int` (from "
     "the end of its issue cycle until the matrix and activation units are idle), while no matmul streams or waits for "
     "its tile (a matmul behind the sync that also waits for its tile counts here, not as weight_stall)"},
    {"input_stall", "number",
     "part of non_matrix: the same for a `sync` naming `host` (not `act`), or a host DMA in an `int`'s drain"},
    {"host_launch", "number",
     "part of non_matrix: issue held by `int` (interrupt host) after its drain, for the host's launch of the "
     "next program segment (docs/timing.md, \"Host model\")"},
};

double frac(double x, uint64_t cycles) { return cycles ? x / double(cycles) : 0.0; }

// meta.mapping with each layer's useful share, or null.
nlohmann::ordered_json layers_of(const isa::Program& p) {
  const auto it = p.meta.find("mapping");
  if (it == p.meta.end() || !it->is_array()) return nullptr;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& l : *it) {
    if (!l.is_object() || !l.contains("macs") || !l.contains("array_macs")) return nullptr;
    const auto macs = l["macs"].get<uint64_t>(), array = l["array_macs"].get<uint64_t>();
    out.push_back({{"layer", l.value("layer", "")},
                   {"macs", macs},
                   {"copy_macs", l.value("copy_macs", uint64_t{0})},
                   {"array_macs", array},
                   {"model_macs", l.value("model_macs", macs)},
                   {"useful_share", array ? double(macs) / double(array) : 0.0},
                   {"weight_tiles", l.value("weight_tiles", uint64_t{0})},
                   {"ub_bytes", l.value("ub_bytes", uint64_t{0})}});
    if (l.contains("packing") && l["packing"].is_string()) out.back()["packing"] = l["packing"];
    if (l.contains("fusion") && l["fusion"].is_string()) out.back()["fusion"] = l["fusion"];
    if (l.contains("piece") && l["piece"].is_number_unsigned()) out.back()["piece"] = l["piece"];
    if (l.contains("precision") && l["precision"].is_string()) out.back()["precision"] = l["precision"];
  }
  return out;
}

// The program's pieces of the batch (meta.batch_piece, meta.piece_segments), or null for one piece.
// (A program's metadata is the user's to write: what does not have the compiler's form is left out.)
nlohmann::ordered_json pieces_of(const isa::Program& p, uint64_t batch) {
  const auto count = [](const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number_integer() && it->get<int64_t>() >= 1 ? it->get<uint64_t>() : 0;
  };
  const uint64_t n = count(p.meta, "batch_piece");
  nlohmann::ordered_json segments = nlohmann::ordered_json::array();
  if (const auto it = p.meta.find("piece_segments"); it != p.meta.end() && it->is_array())
    for (const auto& g : *it) {
      const auto name = [&](const char* key) {
        return g.contains(key) && g[key].is_string() ? g[key].get<std::string>() : std::string();
      };
      if (!g.is_object() || !count(g, "piece") || !count(g, "pieces")) return nullptr;
      segments.push_back({{"first_layer", name("first_layer")}, {"last_layer", name("last_layer")},
                          {"piece", count(g, "piece")}, {"pieces", count(g, "pieces")}});
    }
  const bool scheduled = !segments.empty();
  if (n == 0 || (n >= batch && !scheduled)) return nullptr;
  nlohmann::ordered_json j = {{"piece", n}, {"pieces", (batch + n - 1) / n},
                              {"schedule", scheduled ? "piece schedule" : "whole model"}};
  if (scheduled) j["segments"] = std::move(segments);
  return j;
}

// "batch 32 in 2 pieces of 16 (the whole model once per piece)", or for a piece schedule each
// run of layers with its pieces: "batch 256 by the piece schedule: conv1..fc1 in 5 pieces of 52,
// fc2..fc3 over the whole batch".
std::string describe_pieces(const nlohmann::ordered_json& p, uint64_t batch) {
  if (p["schedule"] == "whole model")
    return fmt::format("batch {} in {} pieces of {} (the whole model once per piece)", batch,
                       p["pieces"].get<uint64_t>(), p["piece"].get<uint64_t>());
  std::string s = fmt::format("batch {} by the piece schedule:", batch);
  std::string_view sep = " ";
  for (const auto& g : p["segments"]) {
    const std::string first = g["first_layer"].get<std::string>(), last = g["last_layer"].get<std::string>();
    const uint64_t n = g["pieces"].get<uint64_t>();
    s += fmt::format("{}{} ", std::exchange(sep, ", "), first == last ? first : first + ".." + last);
    s += n > 1 ? fmt::format("in {} pieces of {}", n, g["piece"].get<uint64_t>()) : "over the whole batch";
  }
  return s;
}

// The layers that compute at least 1% of the array MACs with less than 10% of them useful.
nlohmann::ordered_json warnings_of(const isa::Program& program, const nlohmann::ordered_json& layers) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  // The compiler's, for choices it made for the whole program (meta.mapping_warnings).
  if (const auto it = program.meta.find("mapping_warnings"); it != program.meta.end() && it->is_array())
    for (const auto& w : *it)
      if (w.is_string()) out.push_back(w.get<std::string>());
  if (!layers.is_array()) return out;
  uint64_t total = 0;
  for (const auto& l : layers) total += l["array_macs"].get<uint64_t>();
  for (const auto& l : layers) {
    const double share = l["useful_share"].get<double>();
    const auto array = l["array_macs"].get<uint64_t>();
    // (A concat's identity copies move data: no useful MACs by definition, `copy_macs` says them.)
    if (array == 0 || share >= 0.1 || double(array) < 0.01 * double(total) || l["copy_macs"].get<uint64_t>()) continue;
    out.push_back(fmt::format(
        "layer {} maps badly: {:.2f}% of the {:.3g} MACs it computes ({:.0f}% of the model's) are useful, over {} "
        "weight tiles (narrow tensors or few input channels fill a fraction of each tile's rows and columns)",
        l["layer"].get<std::string>(), 100 * share, double(array), 100.0 * double(array) / double(total),
        l["weight_tiles"].get<uint64_t>()));
  }
  return out;
}

}  // namespace

std::span<const ReportKey> report_keys() { return kKeys; }
std::span<const ReportKey> breakdown_keys() { return kBreakdown; }

uint64_t program_batch(const isa::Program& program) {
  const auto it = program.meta.find("batch");
  if (it != program.meta.end() && it->is_number_integer() && it->get<int64_t>() >= 1)
    return it->get<uint64_t>();
  return 1;
}

nlohmann::ordered_json make_report(const ReportInput& in) {
  const RunResult& r = *in.result;
  const Arch& a = *in.arch;
  const double seconds = double(r.cycles) / (a.clock_mhz * 1e6);
  const uint64_t batch = program_batch(*in.program);
  // Per opcode first (a program of a million instructions: no string per instruction), then by
  // mnemonic for the opcodes the program has.
  std::array<uint64_t, 256> op_counts{}, op_cycles{};
  for (uint64_t i = 0; i < r.timeline.size(); ++i) {
    const auto op = static_cast<uint8_t>(in.program->code[i].opcode);
    ++op_counts[op];
    op_cycles[op] += r.timeline[i].end - r.timeline[i].start;
  }
  std::map<std::string, uint64_t> counts, cycles;
  for (size_t op = 0; op < op_counts.size(); ++op)
    if (op_counts[op]) {
      const std::string m(isa::spec(static_cast<isa::Opcode>(op)).mnemonic);
      counts[m] = op_counts[op];
      cycles[m] = op_cycles[op];
    }
  const MatrixCounters& m = r.matrix;
  nlohmann::ordered_json breakdown = {
      {"array_active", frac(double(m.array_active), r.cycles)},
      {"useful_macs", frac(m.useful_mac_cycles, r.cycles)},
      {"unused_macs", frac(double(m.array_active) - m.useful_mac_cycles, r.cycles)},
      {"weight_stall", frac(double(m.weight_stall), r.cycles)},
      {"weight_shift", frac(double(m.weight_shift), r.cycles)},
      {"non_matrix", frac(double(m.non_matrix), r.cycles)},
      {"raw_stall", frac(double(m.raw_stall), r.cycles)},
      {"input_stall", frac(double(m.input_stall), r.cycles)},
      {"host_launch", frac(double(m.host_launch), r.cycles)},
  };
  nlohmann::ordered_json busy = nlohmann::ordered_json::object();
  for (int u = 0; u < kUnitCount; ++u)
    busy[std::string(isa::kUnitNames[u])] = frac(double(r.unit_busy[u]), r.cycles);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["workload"] = in.program->model;
  const nlohmann::json arch = arch_to_json(a);
  nlohmann::ordered_json& aj = j["arch"];
  aj["name"] = arch["name"];
  for (const ParamInfo& p : arch_params()) aj[std::string(p.name)] = arch[std::string(p.name)];
  j["machine"] = machine_name(a);
  j["engine"] = engine_name(in.engine);
  j["cycles"] = r.cycles;
  j["seconds"] = seconds;
  j["tops"] = seconds > 0 ? 2.0 * double(r.macs) / seconds / 1e12 : 0.0;
  j["inferences_per_second"] = seconds > 0 ? double(batch) / seconds : 0.0;
  j["batch"] = batch;
  j["pieces"] = pieces_of(*in.program, batch);
  const BatchLatency latency = batch_latency(a, r.cycles, segment_length(in.program->code, 0));
  j["latency_seconds"] = latency.total();
  j["host_overhead_seconds"] = latency.host_overhead();
  j["macs"] = r.macs;
  j["copy_macs"] = r.copy_macs;
  j["array_macs"] = r.array_macs;
  nlohmann::ordered_json layers = layers_of(*in.program);
  if (layers.is_array()) {
    uint64_t model_macs = 0;
    for (const auto& l : layers) model_macs += l["model_macs"].get<uint64_t>();
    j["model_macs"] = model_macs;
    j["model_tops"] = seconds > 0 ? 2.0 * double(model_macs) / seconds / 1e12 : 0.0;
  } else {
    j["model_macs"] = nullptr;
    j["model_tops"] = nullptr;
  }
  j["layers"] = std::move(layers);
  const auto mapper = in.program->meta.find("mapper");
  j["mapper"] = mapper != in.program->meta.end() && mapper->is_object() ? nlohmann::ordered_json(*mapper)
                                                                        : nlohmann::ordered_json::object();
  j["mapping_warnings"] = warnings_of(*in.program, j["layers"]);
  j["instructions"] = counts;
  j["instruction_cycles"] = cycles;
  j["breakdown"] = breakdown;
  j["units_busy"] = busy;
  j["weight_memory_busy"] = frac(double(r.weight_mem_busy), r.cycles);
  j["ub_peak_bytes"] = r.ub_peak_rows * a.ub_row_bytes();
  j["acc_peak_rows"] = r.acc_peak_rows;
  const Energy e = energy_of(count_actions(*in.program, a, r.timeline.size(), r.array_macs), a, seconds);
  j["energy_joules"] = e.total();
  j["joules_per_inference"] = e.total() / double(batch);
  j["average_watts"] = seconds > 0 ? e.total() / seconds : 0.0;
  j["tops_per_watt"] = e.total() > 0 ? j["tops"].get<double>() * seconds / e.total() : 0.0;
  nlohmann::ordered_json& ej = j["energy"];
  for (size_t i = 0; i < kEnergyActionNames.size(); ++i) ej[std::string(kEnergyActionNames[i])] = e.joules[i];
  ej["static"] = e.static_joules;
  j["output_matches_reference"] = in.output_matches_reference
                                      ? nlohmann::ordered_json(*in.output_matches_reference)
                                      : nlohmann::ordered_json(nullptr);
  j["checked_against"] = in.output_matches_reference && !in.checked_against.empty()
                             ? nlohmann::ordered_json(in.checked_against)
                             : nlohmann::ordered_json(nullptr);
  if (in.quantization_error)
    j["quantization_error"] = {{"max_abs", (*in.quantization_error)[0]},
                               {"relative", (*in.quantization_error)[1]},
                               {"rms", (*in.quantization_error)[2]}};
  else
    j["quantization_error"] = nullptr;
  if (in.layer_errors) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const ReportInput::LayerError& e : *in.layer_errors)
      a.push_back({{"layer", e.layer},
                   {"bits", e.bits},
                   {"scale", e.scale},
                   {"max_abs", e.max_abs},
                   {"max_float", e.max_float},
                   {"rms", e.rms},
                   {"rms_relative", e.rms_relative},
                   {"sqnr_db", std::isfinite(e.sqnr_db) ? nlohmann::ordered_json(e.sqnr_db) : nlohmann::ordered_json(nullptr)}});
    j["layer_quantization_error"] = std::move(a);
  } else {
    j["layer_quantization_error"] = nullptr;
  }
  if (in.accuracy)
    j["accuracy"] = {{"samples", in.accuracy->samples},
                     {"top1_float", in.accuracy->top1_float},
                     {"top1_int8", in.accuracy->top1_int8}};
  else
    j["accuracy"] = nullptr;
  j["host_seconds"] = r.host_seconds;
  j["simulated_cycles_per_second"] = r.host_seconds > 0 ? double(r.cycles) / r.host_seconds : 0.0;
  return j;
}

std::string format_report(const nlohmann::ordered_json& j) {
  const auto& a = j["arch"];
  const auto& b = j["breakdown"];
  const double clock = a["clock_mhz"].get<double>();
  const double peak =
      2.0 * a["array_rows"].get<double>() * a["array_cols"].get<double>() * clock * 1e6 / 1e12;
  auto pct = [&](const char* k) { return 100.0 * b[k].get<double>(); };
  std::string s;
  s += fmt::format("workload     {}\n", j["workload"].get<std::string>());
  s += fmt::format("machine      {} ({}x{} array, {} MHz), engine {}\n", j["machine"].get<std::string>(),
                   a["array_rows"].get<uint64_t>(), a["array_cols"].get<uint64_t>(), clock,
                   j["engine"].get<std::string>());
  s += fmt::format("cycles       {} ({:.3f} us)\n", j["cycles"].get<uint64_t>(),
                   j["seconds"].get<double>() * 1e6);
  s += fmt::format("throughput   {:.2f} TOPS of {:.1f} peak, {:.0f} inferences/s (batch {})\n",
                   j["tops"].get<double>(), peak, j["inferences_per_second"].get<double>(),
                   j["batch"].get<uint64_t>());
  if (j["pieces"].is_object())
    s += fmt::format("pieces       {}\n", describe_pieces(j["pieces"], j["batch"].get<uint64_t>()));
  s += fmt::format("latency      {:.3f} us per batch with the host ({:.3f} us driver and instruction download)\n",
                   j["latency_seconds"].get<double>() * 1e6, j["host_overhead_seconds"].get<double>() * 1e6);
  if (const auto copies = j["copy_macs"].get<uint64_t>())
    s += fmt::format("MACs         {} useful of {} computed ({} copying a concat's parts)\n",
                     j["macs"].get<uint64_t>(), j["array_macs"].get<uint64_t>(), copies);
  else
    s += fmt::format("MACs         {} useful of {} computed\n", j["macs"].get<uint64_t>(),
                     j["array_macs"].get<uint64_t>());
  if (const auto& layers = j["layers"]; layers.is_array() && !layers.empty()) {
    // Every layer when there are few, else the 10 with the lowest useful share.
    std::vector<const nlohmann::ordered_json*> shown;
    const bool all = layers.size() <= 16;
    for (const auto& l : layers)
      if (all || l["array_macs"].get<uint64_t>() > 0) shown.push_back(&l);
    if (!all) {
      std::stable_sort(shown.begin(), shown.end(), [](const nlohmann::ordered_json* a, const nlohmann::ordered_json* b) {
        return (*a)["useful_share"].get<double>() < (*b)["useful_share"].get<double>();
      });
      shown.resize(std::min<size_t>(shown.size(), 10));
    }
    const auto any = [&](const char* key) {
      return std::any_of(shown.begin(), shown.end(), [&](const auto* l) { return l->contains(key); });
    };
    const bool packed = any("packing"), wide = any("precision");
    // A batch run in pieces: the samples per piece of each layer (docs/compiler.md, piece schedule).
    const bool pieces = any("piece");
    s += all ? "\nlayer                 useful share of computed MACs  weight tiles     UB bytes"
             : fmt::format("\nthe {} of {} layers with the lowest useful share of computed MACs (in the report's "
                           "`layers`: all)\n{:<55}weight tiles     UB bytes",
                           shown.size(), layers.size(), "");
    if (pieces) s += "  piece";
    std::string notes_head = any("fusion") ? "packing, fusion" : packed ? "packing" : "";
    if (wide) notes_head += notes_head.empty() ? "precision" : ", precision";
    const bool copies = std::any_of(shown.begin(), shown.end(), [](const auto* l) {
      return l->value("copy_macs", uint64_t{0}) > 0;
    });
    if (copies) notes_head += notes_head.empty() ? "copies" : ", copies";
    s += notes_head.empty() ? "\n" : "  " + notes_head + " (docs/compiler.md)\n";
    for (const auto* l : shown) {
      const auto array = (*l)["array_macs"].get<uint64_t>();  // 0: a pool or element-wise layer
      const std::string share = array ? fmt::format("{:>7.2f}% of {:.3g}", 100 * (*l)["useful_share"].get<double>(),
                                                    double(array))
                                      : std::string("      - (no matrix work)");
      s += fmt::format("  {:<20} {:<32} {:>8} {:>12}", (*l)["layer"].get<std::string>(), share,
                       (*l)["weight_tiles"].get<uint64_t>(), (*l)["ub_bytes"].get<uint64_t>());
      if (pieces) s += fmt::format(" {:>6}", l->value("piece", uint64_t{0}));
      std::string notes = l->contains("packing") ? (*l)["packing"].get<std::string>() : "";
      if (l->contains("fusion")) notes += (notes.empty() ? "" : "; ") + (*l)["fusion"].get<std::string>();
      if (l->contains("precision")) notes += (notes.empty() ? "" : "; ") + (*l)["precision"].get<std::string>();
      if (const auto copies = l->value("copy_macs", uint64_t{0}))
        notes += fmt::format("{}identity copies joining a concat: {} copy MACs", notes.empty() ? "" : "; ", copies);
      s += notes.empty() ? "\n" : "  " + notes + "\n";
    }
  }
  s += "\nmatrix unit, share of all cycles (TPU paper Table 3 counters)\n";
  s += fmt::format("  array active  {:6.2f}%   (useful MACs {:.2f}%, unused MACs {:.2f}%)\n",
                   pct("array_active"), pct("useful_macs"), pct("unused_macs"));
  s += fmt::format("  weight stall  {:6.2f}%\n  weight shift  {:6.2f}%\n", pct("weight_stall"),
                   pct("weight_shift"));
  s += fmt::format("  non-matrix    {:6.2f}%   (RAW stall {:.2f}%, input stall {:.2f}%, host launch {:.2f}%)\n",
                   pct("non_matrix"), pct("raw_stall"), pct("input_stall"), pct("host_launch"));
  s += "\nunits busy  ";
  for (const auto& [unit, f] : j["units_busy"].items())
    if (unit != "control") s += fmt::format(" {} {:.1f}%", unit, 100.0 * f.get<double>());
  s += fmt::format(", weight memory {:.1f}%\n", 100.0 * j["weight_memory_busy"].get<double>());
  s += "\ninstruction     count      cycles\n";
  for (const auto& [m, n] : j["instructions"].items())
    s += fmt::format("  {:<10} {:>8} {:>11}\n", m, n.get<uint64_t>(),
                     j["instruction_cycles"][m].get<uint64_t>());
  s += fmt::format(
      "energy       {:.4g} mJ per inference, {:.1f} W average, {:.3g} TOPS/W ({:.4g} mJ per run)\n",
      1e3 * j["joules_per_inference"].get<double>(), j["average_watts"].get<double>(),
      j["tops_per_watt"].get<double>(), 1e3 * j["energy_joules"].get<double>());
  s += fmt::format("\nUB peak {} bytes, accumulator peak {} rows\n", j["ub_peak_bytes"].get<uint64_t>(),
                   j["acc_peak_rows"].get<uint64_t>());
  const auto& ok = j["output_matches_reference"];
  const std::string against = j["checked_against"].is_string() ? j["checked_against"].get<std::string>() : "";
  s += fmt::format("check        {}\n",
                   ok.is_null()     ? "not checked (--no-check, or the timing engine, which computes no data)"
                   : ok.get<bool>() ? "results match the " + against
                                    : "MISMATCH against the " + against);
  if (const auto& q = j["quantization_error"]; q.is_object())
    s += fmt::format("quantization output vs float reference: max error {:.4g} ({:.2f}% of the largest output), "
                     "rms {:.4g}\n",
                     q["max_abs"].get<double>(), 100 * q["relative"].get<double>(), q["rms"].get<double>());
  if (const auto& layers = j["layer_quantization_error"]; layers.is_array() && !layers.empty()) {
    size_t width = 5;
    for (const auto& l : layers) width = std::max(width, l["layer"].get<std::string>().size());
    s += "quantization by layer (each layer's output vs the float model's):\n";
    s += fmt::format("  {:<{}} {:>4} {:>11} {:>11} {:>11} {:>9} {:>8}\n", "layer", width, "bits", "max error",
                     "max |float|", "rms", "rms/range", "SQNR dB");
    for (const auto& l : layers)
      s += fmt::format("  {:<{}} {:>4} {:>11.4g} {:>11.4g} {:>11.4g} {:>8.3f}% {:>8}\n", l["layer"].get<std::string>(),
                       width, l["bits"].get<int>(), l["max_abs"].get<double>(), l["max_float"].get<double>(),
                       l["rms"].get<double>(), 100 * l["rms_relative"].get<double>(),
                       l["sqnr_db"].is_null() ? std::string("exact") : fmt::format("{:.1f}", l["sqnr_db"].get<double>()));
  }
  if (const auto& a = j["accuracy"]; a.is_object())
    s += fmt::format("accuracy     top-1 {:.2f}% float, {:.2f}% int8 as simulated ({} labelled samples)\n",
                     100 * a["top1_float"].get<double>(), 100 * a["top1_int8"].get<double>(),
                     a["samples"].get<uint64_t>());
  s += fmt::format("host time    {:.3f} s ({:.3g} simulated cycles/s)\n", j["host_seconds"].get<double>(),
                   j["simulated_cycles_per_second"].get<double>());
  return s;
}

std::string report_markdown() {
  std::string s =
      "<!-- Generated from sim/report.cpp by `build/tpusim run --report-schema > docs/report.md`. Do not "
      "edit: a "
      "test fails when this file and the schema differ. -->\n"
      "# The run report\n\n"
      "`tpusim run PROG --report R.json` writes one JSON object with these keys, in this order "
      "(without `--report` the same figures print as a table). Fractions are of all cycles of the run.\n\n"
      "| key | type | meaning |\n|---|---|---|\n";
  for (const ReportKey& k : kKeys) s += fmt::format("| `{}` | {} | {} |\n", k.name, k.type, k.meaning);
  s += "\n## `breakdown`\n\nThe hardware counters of Jouppi et al., ISCA 2017, Table 3, as fractions of all "
       "cycles.\n\n"
       "| key | type | meaning |\n|---|---|---|\n";
  for (const ReportKey& k : kBreakdown) s += fmt::format("| `{}` | {} | {} |\n", k.name, k.type, k.meaning);
  s += "\n`units_busy` has one key per unit: `control`, `host_dma`, `weight_fetch`, `matrix`, `activation`. "
       "The matrix unit counts as busy while any matmul has data in the array (streaming or draining).\n";
  return s;
}

}  // namespace tpusim::sim
