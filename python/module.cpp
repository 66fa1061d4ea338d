// The Python module `tpusim` (docs/python.md): the command line's libraries, called from Python.
// Reports come back as the dicts of the report schema (sim/report.h, docs/report.md), sweeps as
// pandas DataFrames of the sweep CSV (docs/sweeps.md). Nothing here computes a figure of its own.
#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/npy.h"
#include "isa/assembler.h"
#include "isa/error.h"
#include "isa/program.h"
#include "sim/arch.h"
#include "sim/machine.h"
#include "sim/report.h"
#include "tools/commands.h"
#include "tools/machine_check.h"
#include "tools/sweep/workers.h"

// libsystemc defines main() and calls sc_main(); inside Python nothing calls it, but the shared
// library must resolve the symbol when Python loads the module (pybind11 hides symbols by default).
extern "C" __attribute__((visibility("default"))) int sc_main(int, char**) { return 0; }

namespace py = pybind11;
namespace fs = std::filesystem;

namespace tpusim::python {

namespace {

// JSON text -> Python objects, through Python's own json module (ints stay ints, floats floats).
py::object from_json(const nlohmann::ordered_json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

std::string text_of(const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) throw InputError("set: a parameter value cannot be a bool");
  return py::str(v).cast<std::string>();
}

// arch: None (tpu-v1), a preset name, an --arch JSON file, or a dict of parameters over tpu-v1;
// then `set`: a dict {param: value} or a list of "param=value", as --set.
sim::Arch resolve_arch(const py::object& arch, const py::object& set, const isa::Program* program) {
  sim::Arch a;
  std::vector<tools::GivenValue> given;  // of a dict arch and of set, for the message of a machine they break
  if (arch.is_none()) {
    if (program) a = tools::program_machine(program->arch, program->model.empty() ? "program" : program->model);  // a program compiled for another machine names it
  } else if (py::isinstance<py::dict>(arch)) {
    for (const auto& [k, v] : arch.cast<py::dict>()) {
      sim::set_param(a, text_of(k), text_of(v), "arch");
      given.push_back({"arch", text_of(k) + "=" + text_of(v)});
    }
  } else {
    const std::string name = arch.cast<std::string>();
    a = name.ends_with(".json") ? sim::load_arch_file(name) : sim::arch_preset(name);
  }
  if (py::isinstance<py::dict>(set)) {
    for (const auto& [k, v] : set.cast<py::dict>()) {
      sim::set_param(a, text_of(k), text_of(v), "set");
      given.push_back({"set", text_of(k) + "=" + text_of(v)});
    }
  } else if (!set.is_none()) {
    for (const std::string& s : set.cast<std::vector<std::string>>()) sim::apply_set(a, s), given.push_back({"set", s});
  }
  tools::validate_machine(a, given);
  return a;
}

// A model's data argument (input, calibrate, labels): None, a path (str or os.PathLike) to a .npy,
// or an array (a NumPy array, a CPU torch.Tensor, a list: anything numpy.asarray takes), saved to a
// .npy in the temporary folder `keep` (made on first use) for the compiler's reader. Samples go as
// float32; labels as int64 when they are integers (floats go as they are: the reader checks them).
std::optional<fs::path> npy_argument(const py::object& v, const char* what, py::object& keep) {
  if (v.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(v) || py::hasattr(v, "__fspath__"))
    return fs::path(py::module_::import("os").attr("fspath")(v).cast<std::string>());
  py::module_ np;
  try {
    np = py::module_::import("numpy");
  } catch (const py::error_already_set&) {
    throw InputError(fmt::format("{}: an array needs numpy (on Debian `apt-get install python3-numpy`); or pass a .npy path", what));
  }
  py::object a;
  try {
    if (std::string_view(what) == "labels") {
      a = np.attr("ascontiguousarray")(v);
      if (std::string("biu").find(a.attr("dtype").attr("kind").cast<std::string>()) != std::string::npos)
        a = a.attr("astype")(np.attr("int64"));
    } else {
      a = np.attr("ascontiguousarray")(v, py::arg("dtype") = np.attr("float32"));
    }
  } catch (const py::error_already_set& e) {
    throw InputError(fmt::format("{}: not an array of numbers ({})", what, e.what()));
  }
  if (keep.is_none()) keep = py::module_::import("tempfile").attr("TemporaryDirectory")(py::arg("prefix") = "tpusim-");
  const fs::path path = fs::path(keep.attr("name").cast<std::string>()) / (std::string(what) + ".npy");
  np.attr("save")(path.string(), a);
  return path;
}

// mapper: None, or {switch: bool or 'on'/'off'} (compiler/lower_options.h, as --mapper);
// precision: None (the description's), 'auto', 'int8' or 'wide' (as --precision).
compiler::LoadOptions load_options(const py::object& batch, const py::object& mapper, const py::object& precision,
                                   const py::object& input = py::none(), const py::object& calibrate = py::none(),
                                   py::object* keep = nullptr) {
  compiler::LoadOptions o;
  if (keep) {
    if (auto p = npy_argument(input, "input", *keep)) o.input_file = *p;
    if (auto p = npy_argument(calibrate, "calibrate", *keep)) o.calibration_file = *p;
  }
  if (!batch.is_none()) o.batch = batch.cast<uint64_t>();
  if (!precision.is_none()) {
    const std::string p = text_of(precision);
    o.precision = compiler::precision_named(p);
    if (!o.precision) throw InputError(fmt::format("precision: '{}': expected 'auto', 'int8' or 'wide'", p));
  }
  if (!mapper.is_none()) {
    if (!py::isinstance<py::dict>(mapper)) throw InputError("mapper: expected a dict such as {'pack': False}");
    for (const auto& [k, v] : mapper.cast<py::dict>()) {
      const std::string value = py::isinstance<py::bool_>(v) ? (v.cast<bool>() ? "on" : "off") : text_of(v);
      compiler::set_mapper_switch(o.mapper, text_of(k), value, "mapper");
    }
  }
  return o;
}

// labels: class numbers, one per sample, as --labels reads them (integers 0..65535).
std::vector<int64_t> read_labels(const fs::path& path) {
  const compiler::NpyArray a = compiler::read_npy(path);
  if (a.shape.size() != 1) throw InputError("labels: expected one class per sample, shape [N]");
  std::vector<int64_t> out;
  for (float v : a.to_float()) {
    if (!(v >= 0 && v < 65536 && v == std::floor(v)))
      throw InputError(fmt::format("labels: {} is not a class number (an integer 0..65535)", v));
    out.push_back(int64_t(v));
  }
  return out;
}

// The model output as a NumPy array in the front end's layout (compiler::output_npy: the one
// `tpusim run --save-output` writes).
py::object output_array(const std::vector<float>& v, const compiler::Compiled& c) {
  const compiler::NpyArray a = compiler::output_npy(c, v);
  py::module_ np = py::module_::import("numpy");
  const py::bytes raw(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  return np.attr("frombuffer")(raw, py::arg("dtype") = a.dtype).attr("reshape")(py::cast(a.shape)).attr("copy")();
}

py::dict run(const std::string& workload, const py::object& arch, const py::object& set,
             const std::string& engine, const py::object& batch, uint64_t max_cycles, bool timeline,
             const py::object& mapper, const py::object& precision, const py::object& input,
             const py::object& labels, const py::object& calibrate, bool check, bool outputs, bool layer_errors) {
  std::optional<compiler::Compiled> compiled;
  isa::Program loaded;
  sim::Arch a;
  py::object keep = py::none();  // the temporary folder of arrays given as data (removed on return)
  std::vector<int64_t> classes;
  const bool is_model = compiler::is_model_path(workload);
  const bool data = !input.is_none() || !calibrate.is_none() || !labels.is_none() || check || outputs || layer_errors;
  if (data && !is_model)
    throw InputError(fmt::format("{}: {} applies to models, not programs", workload,
                                 !input.is_none()       ? "input"
                                 : !calibrate.is_none() ? "calibrate"
                                 : !labels.is_none()    ? "labels"
                                 : check                ? "check"
                                 : outputs              ? "outputs"
                                                        : "layer_errors"));
  // Checking, accuracy and outputs read the simulated output: an engine that computes data.
  const bool needs_output = check || outputs || !labels.is_none();
  if ((needs_output || layer_errors) && engine == "timing")
    throw InputError(fmt::format("engine 'timing' computes no data: {} needs engine='fast' or 'stepped'",
                                 !labels.is_none() ? "labels" : check ? "check" : outputs ? "outputs" : "layer_errors"));
  if (is_model) {
    a = resolve_arch(arch, set, nullptr);
    compiler::LoadOptions o = load_options(batch, mapper, precision, input, calibrate, &keep);
    if (const auto p = npy_argument(labels, "labels", keep)) classes = read_labels(*p);
    py::gil_scoped_release free;
    compiled = compiler::compile_file(workload, a, o);
    if (!labels.is_none()) compiler::check_labels(*compiled, classes);  // before the simulation
  } else {
    if (!batch.is_none() || !mapper.is_none() || !precision.is_none())
      throw InputError(fmt::format("{}: {} applies to models, not programs", workload,
                                   !batch.is_none() ? "batch" : !mapper.is_none() ? "mapper" : "precision"));
    loaded = workload.ends_with(".s") ? isa::assemble_file(workload) : isa::load_program(workload);
    a = resolve_arch(arch, set, &loaded);
  }
  const isa::Program& program = compiled ? compiled->program : loaded;
  sim::RunOptions opt;
  opt.engine = sim::parse_engine(engine);
  opt.max_cycles = max_cycles;
  sim::RunResult result;
  {
    py::gil_scoped_release free;
    result = sim::simulate(program, a, opt);
  }
  // Like a sweep, this measures: output_matches_reference stays None (`tpusim run` checks data),
  // unless check, labels or outputs ask for the model's output.
  sim::ReportInput in{&program, &a, opt.engine, &result, std::nullopt, "", std::nullopt, std::nullopt, std::nullopt};
  std::optional<py::object> simulated, reference;
  if (compiled && needs_output) {
    const sim::HostBuffer* out = nullptr;
    if (result.state)
      for (const sim::HostBuffer& h : result.state->host)
        if (h.name == "output") out = &h;
    if (!out) throw std::logic_error("a compiled program without an \"output\" host region");
    std::vector<float> sim_out, float_out;
    std::optional<compiler::Accuracy> acc;
    {
      py::gil_scoped_release free;
      const compiler::OutputCheck c = compiler::check_output(*compiled, out->bytes, a);
      in.output_matches_reference = c.matches;
      in.quantization_error = std::array{c.error.max_abs, c.error.relative, c.error.rms};
      in.checked_against = "golden model reference";
      if (!labels.is_none()) acc = compiler::top1_accuracy(*compiled, out->bytes, a, classes);
      if (outputs) {
        sim_out = compiler::simulated_output(*compiled, out->bytes, a);
        float_out = compiler::run_float(compiled->model).back();
      }
    }
    if (acc)
      in.accuracy = sim::ReportInput::Accuracy{acc->samples, double(acc->correct_float) / double(acc->samples),
                                               double(acc->correct_int8) / double(acc->samples)};
    if (outputs) simulated = output_array(sim_out, *compiled), reference = output_array(float_out, *compiled);
  }
  if (compiled && layer_errors) {
    py::gil_scoped_release free;
    in.layer_errors.emplace();
    for (const compiler::LayerError& e : compiler::layer_errors(*compiled))
      in.layer_errors->push_back({e.layer, e.bits, e.scale, e.max_abs, e.max_float, e.rms, e.rms_relative, e.sqnr_db});
  }
  py::dict report = from_json(sim::make_report(in));
  if (simulated) {
    report["output"] = *simulated;
    report["float_output"] = *reference;
  }
  if (timeline) {
    py::list rows;
    for (uint64_t i = 0; i < result.timeline.size(); ++i) {
      const isa::OpcodeSpec& s = isa::spec(program.code[i].opcode);
      rows.append(py::dict(py::arg("index") = i, py::arg("mnemonic") = std::string(s.mnemonic),
                           py::arg("unit") = std::string(isa::kUnitNames[static_cast<int>(s.unit)]),
                           py::arg("start") = result.timeline[i].start,
                           py::arg("end") = result.timeline[i].end));
    }
    report["timeline"] = rows;
  }
  return report;
}

py::dict compile(const std::string& model, const py::object& output, const py::object& arch,
                 const py::object& set, const py::object& batch, const py::object& mapper,
                 const py::object& precision, const py::object& input, const py::object& calibrate) {
  const sim::Arch a = resolve_arch(arch, set, nullptr);
  py::object keep = py::none();
  const compiler::LoadOptions o = load_options(batch, mapper, precision, input, calibrate, &keep);
  compiler::Compiled c = [&] {
    py::gil_scoped_release free;
    return compiler::compile_file(model, a, o);
  }();
  py::dict out(py::arg("model") = c.program.model, py::arg("machine") = sim::machine_name(a),
               py::arg("layers") = c.model.layers.size(), py::arg("batch") = c.graph.batch,
               py::arg("instructions") = c.program.code.size(),
               py::arg("weight_bytes") = c.program.weights.size(),
               py::arg("weight_tiles") = c.program.meta.value("weight_tiles", uint64_t{0}));
  if (!output.is_none()) {
    isa::save_program(output.cast<std::string>(), c.program);
    out["program"] = output;
  }
  return out;
}

py::dict arch_dict(const py::object& arch, const py::object& set) {
  const sim::Arch a = resolve_arch(arch, set, nullptr);
  py::dict d = from_json(sim::arch_to_json(a));
  d["machine"] = sim::machine_name(a);
  return d;
}

py::list parameters() {
  py::list out;
  for (const sim::ParamInfo& p : sim::arch_params())
    out.append(py::dict(py::arg("name") = std::string(p.name),
                        py::arg("default") = std::string(p.default_text),
                        py::arg("unit") = std::string(p.unit), py::arg("meaning") = std::string(p.meaning),
                        py::arg("source") = std::string(p.source), py::arg("real") = p.is_real));
  return out;
}

std::string tpusim_executable() {
  if (const char* env = std::getenv("TPUSIM_EXECUTABLE"); env && *env) return env;
  for (const char* p : {TPUSIM_BUILD_EXECUTABLE, TPUSIM_INSTALLED_EXECUTABLE})
    if (fs::exists(p)) return p;
  throw InputError(fmt::format("sweep: no tpusim executable at {} or {}; set TPUSIM_EXECUTABLE",
                               TPUSIM_BUILD_EXECUTABLE, TPUSIM_INSTALLED_EXECUTABLE));
}

py::object read_results(const std::string& csv) {
  py::module_ pandas;
  try {
    pandas = py::module_::import("pandas");
  } catch (const py::error_already_set&) {
    throw py::import_error(
        "tpusim: sweep results as a DataFrame need pandas: on Debian `apt-get install python3-pandas` (its "
        "/usr/bin/python3); the CSV is at " +
        csv);
  }
  return pandas.attr("read_csv")(csv);
}

py::object sweep(const std::string& spec, const py::object& output, const py::object& jobs, bool resume,
                 bool retry_failed, const py::object& shard) {
  tools::SweepArgs a;
  a.spec = spec;
  py::object keep;  // a temporary folder, removed with this object
  if (output.is_none()) {
    keep = py::module_::import("tempfile").attr("TemporaryDirectory")(py::arg("prefix") = "tpusim-sweep-");
    a.output = (fs::path(keep.attr("name").cast<std::string>()) / "results.csv").string();
  } else {
    a.output = output.cast<std::string>();
  }
  if (!jobs.is_none()) {  // as -j: 1 to kMaxJobs worker processes (None: every core this process may use)
    // (a Python int beyond 64 bits compares as too large, not as a failed cast)
    const bool whole = py::isinstance<py::int_>(jobs) && !py::isinstance<py::bool_>(jobs);
    const bool in_range = whole && jobs.attr("__ge__")(1).cast<bool>() &&
                          jobs.attr("__le__")(tools::sweep::kMaxJobs).cast<bool>();
    if (!in_range)
      throw InputError(fmt::format("jobs: {}: expected a whole number of worker processes 1..{} (None: every "
                                   "core this process may use)",
                                   py::repr(jobs).cast<std::string>(), tools::sweep::kMaxJobs));
    const long long j = jobs.cast<long long>();
    a.jobs = static_cast<unsigned>(j);
  }
  if (!shard.is_none()) a.shard = shard.cast<std::string>();
  a.resume = resume;
  a.retry_failed = retry_failed;
  tools::sweep::set_worker_executable(tpusim_executable());
  int rc = 0;
  {
    py::gil_scoped_release free;
    rc = tools::cmd_sweep(a);
  }
  if (rc == 130) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  if (rc != 0)
    throw std::runtime_error(fmt::format("sweep {}: stopped (exit {}); resume=True continues it", spec, rc));
  py::object frame = read_results(a.output);
  // (keep is a null handle, not None, when output was given: is_none() said false and cleanup ran on
  // it, a segmentation fault after every sweep with output=.)
  if (keep) keep.attr("cleanup")();
  return frame;
}

}  // namespace

}  // namespace tpusim::python

PYBIND11_MODULE(tpusim, m) {
  using namespace tpusim::python;
  using tpusim::InputError;
  m.doc() = "tpusim: a cycle-accurate TPU-v1-style accelerator simulator (docs/python.md)";
  m.attr("__version__") = TPUSIM_VERSION;
  static py::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    }
  });
  m.def(
      "run", &run, py::arg("workload"), py::kw_only(), py::arg("arch") = py::none(),
      py::arg("set") = py::none(), py::arg("engine") = "fast", py::arg("batch") = py::none(),
      py::arg("max_cycles") = 0, py::arg("timeline") = false, py::arg("mapper") = py::none(),
      py::arg("precision") = py::none(), py::arg("input") = py::none(), py::arg("labels") = py::none(),
      py::arg("calibrate") = py::none(), py::arg("check") = false, py::arg("outputs") = false,
      py::arg("layer_errors") = false,
      "Compile (a model: .toml, SCALE-Sim .csv, .onnx) or load (a program: .tpu, .s) `workload`, simulate it and "
      "return the report (docs/report.md) as a dict. arch: None (tpu-v1), a preset, an arch .json file or a "
      "dict of parameters; set: {param: value} or ['param=value']; engine: 'fast', 'stepped' or 'timing'; "
      "timeline=True adds 'timeline', each instruction's unit and start/end cycles; mapper: {'pack': False} "
      "turns a mapping technique off (as --mapper pack=off); precision: 'auto', 'int8' or 'wide' 16-bit weights "
      "(as --precision). Models: input, calibrate: the samples and the calibration samples (a .npy path or an "
      "array, batch first, as --input and --calibrate); labels: their classes (adds 'accuracy', top-1 float "
      "and int8 as simulated); check=True compares the output with the golden reference "
      "('output_matches_reference', 'quantization_error'); outputs=True adds 'output' (the int8 output as "
      "simulated, dequantized) and 'float_output' (the float model's), NumPy arrays; layer_errors=True fills "
      "'layer_quantization_error', each layer's output against the float model's (as --layer-errors).");
  m.def("compile", &compile, py::arg("model"), py::arg("output") = py::none(), py::kw_only(),
        py::arg("arch") = py::none(), py::arg("set") = py::none(), py::arg("batch") = py::none(),
        py::arg("mapper") = py::none(), py::arg("precision") = py::none(), py::arg("input") = py::none(),
        py::arg("calibrate") = py::none(),
        "Compile a model for a machine (mapper, precision: as for run); writes the program to `output` (.tpu) when given. "
        "Returns its size.");
  m.def(
      "arch", &arch_dict, py::arg("arch") = py::none(), py::kw_only(), py::arg("set") = py::none(),
      "Every parameter of a machine as resolved (and 'machine', its name by what differs from its preset).");
  m.def("parameters", &parameters,
        "The architecture parameter table (docs/arch.md): name, default, unit, ...");
  m.def("sweep", &sweep, py::arg("spec"), py::kw_only(), py::arg("output") = py::none(),
        py::arg("jobs") = py::none(), py::arg("resume") = false, py::arg("retry_failed") = false,
        py::arg("shard") = py::none(),
        "Run a sweep spec (docs/sweeps.md) in tpusim worker processes and return its results as a pandas "
        "DataFrame (the CSV's columns). output: RESULTS.csv (its .db and .jsonl beside it), else a temporary "
        "folder.");
  m.def("read_results", &read_results, py::arg("csv"),
        "A sweep's CSV (tpusim sweep -o) as a pandas DataFrame.");
}
