// gemm_bench [--quick] [--json FILE]: the fast engine's int8 GEMM (sim/gemm.h) against oneDNN.
//
// For K = M = 256 (one weight tile) and several batch sizes B, with A int8 or uint8 and W int8:
// times PackedWeights::multiply (weights packed once, outside the timed loop, as the simulator
// packs each tile once) and oneDNN's int8 GEMM (dnnl_gemm_{s8,u8}s8s32, and the matmul primitive
// with its weights reordered once; the faster of the two counts), both on one thread, in the
// same process, interleaved, timed in thread CPU time. Prints the median GMAC/s of each over
// several repetitions and the ratio ours / oneDNN (target: at least 0.5; "BELOW TARGET" marks a
// miss, the exit code does not). Exits 1 when the int32 results differ, 2 on bad arguments.
#include <dlfcn.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <dnnl.hpp>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "sim/gemm.h"

namespace {

using tpusim::bench::cpu_model;
using tpusim::bench::median;
using tpusim::sim::PackedWeights;
using Options = tpusim::bench::BenchArgs;
constexpr int64_t kK = 256, kM = 256;
constexpr double kTarget = 0.5;

// oneDNN here runs on OpenMP (libgomp); the benchmark compares single cores, so both sides get one
// thread. omp_set_num_threads is looked up at run time: the benchmark does not link libgomp itself.
bool use_one_omp_thread() {
  auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (set != nullptr) set(1);
  return get == nullptr || get() == 1;
}

// One shape and signedness: the operands and the three ways to multiply them (C = A x W).
class Shape {
 public:
  Shape(int64_t B, bool a_unsigned, std::mt19937& rng)
      : B_(B),
        a_unsigned_(a_unsigned),
        a_(B * kK),
        w_(kK * kM),
        c_(B * kM),
        eng_(dnnl::engine::kind::cpu, 0),
        strm_(eng_) {
    for (auto& x : a_) x = static_cast<uint8_t>(rng());
    for (auto& x : w_) x = static_cast<uint8_t>(rng());
    packed_ = PackedWeights(w_.data(), kM, kK, kM, false);
    make_matmul();
  }
  int64_t B() const { return B_; }
  bool a_unsigned() const { return a_unsigned_; }
  const std::vector<int32_t>& c() const { return c_; }

  void ours() { packed_.multiply(a_.data(), kK, a_unsigned_, B_, c_.data(), kM, false); }
  void onednn_gemm() {
    const int32_t zero = 0;
    const auto* w = reinterpret_cast<const int8_t*>(w_.data());
    const dnnl_status_t st = a_unsigned_ ? dnnl_gemm_u8s8s32('N', 'N', 'F', B_, kM, kK, 1.f, a_.data(), kK, 0,
                                                             w, kM, 0, 0.f, c_.data(), kM, &zero)
                                         : dnnl_gemm_s8s8s32('N', 'N', 'F', B_, kM, kK, 1.f,
                                                             reinterpret_cast<const int8_t*>(a_.data()), kK,
                                                             0, w, kM, 0, 0.f, c_.data(), kM, &zero);
    if (st != dnnl_success) throw std::runtime_error("dnnl_gemm failed");
  }
  void onednn_matmul() {
    matmul_.execute(strm_, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}});
    strm_.wait();
  }

 private:
  // The matmul primitive with the weights in the layout it prefers, reordered once.
  void make_matmul() {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc src_md({B_, kK}, a_unsigned_ ? dt::u8 : dt::s8, tag::ab);
    const dnnl::memory::desc plain_w_md({kK, kM}, dt::s8, tag::ab), any_w_md({kK, kM}, dt::s8, tag::any);
    const dnnl::memory::desc dst_md({B_, kM}, dt::s32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, any_w_md, dst_md), eng_);
    matmul_ = dnnl::matmul(pd);
    src_ = dnnl::memory(src_md, eng_, a_.data());
    dst_ = dnnl::memory(dst_md, eng_, c_.data());
    dnnl::memory plain_w(plain_w_md, eng_, w_.data());
    weights_ = dnnl::memory(pd.weights_desc(), eng_);
    dnnl::reorder(plain_w, weights_).execute(strm_, plain_w, weights_);
    strm_.wait();
  }

  int64_t B_;
  bool a_unsigned_;
  std::vector<uint8_t> a_, w_;
  std::vector<int32_t> c_;
  PackedWeights packed_;
  dnnl::engine eng_;
  dnnl::stream strm_;
  dnnl::matmul matmul_;
  dnnl::memory src_, weights_, dst_;
};

// True when all three give the same int32 C.
bool same_results(Shape& s) {
  s.ours();
  const std::vector<int32_t> ours = s.c();
  s.onednn_gemm();
  const bool gemm_ok = s.c() == ours;
  s.onednn_matmul();
  const bool matmul_ok = s.c() == ours;
  if (!gemm_ok || !matmul_ok)
    fmt::print(stderr, "gemm_bench: B={} {}: results differ from oneDNN's {}\n", s.B(),
               s.a_unsigned() ? "u8s8" : "s8s8", gemm_ok ? "matmul" : "gemm");
  return gemm_ok && matmul_ok;
}

// This thread's CPU time in seconds: on a shared machine, time spent descheduled does not count.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// GMAC/s of `iters` back-to-back calls.
double gmacs(const std::function<void()>& f, int64_t iters, double macs) {
  const double t0 = thread_seconds();
  for (int64_t i = 0; i < iters; ++i) f();
  return macs * static_cast<double>(iters) / (thread_seconds() - t0) / 1e9;
}

struct Row {
  int64_t B;
  std::string signedness, onednn_api;
  double ours, onednn;
};

// Median GMAC/s of ours and of oneDNN's faster API, the three timed in turn each repetition.
Row measure(Shape& s, const Options& opt) {
  const double macs = static_cast<double>(s.B() * kK * kM);
  const int reps = opt.quick ? 3 : 11;
  const int64_t iters = std::max<int64_t>(1, static_cast<int64_t>((opt.quick ? 2e8 : 2e9) / macs));
  std::vector<double> ours, gemm, matmul;
  s.ours(), s.onednn_gemm(), s.onednn_matmul();  // warm up
  for (int r = 0; r < reps; ++r) {
    ours.push_back(gmacs([&] { s.ours(); }, iters, macs));
    gemm.push_back(gmacs([&] { s.onednn_gemm(); }, iters, macs));
    matmul.push_back(gmacs([&] { s.onednn_matmul(); }, iters, macs));
  }
  const double g = median(gemm), m = median(matmul);
  return {s.B(), s.a_unsigned() ? "u8s8" : "s8s8", g >= m ? "gemm" : "matmul", median(ours), std::max(g, m)};
}

void write_json(const std::string& path, const std::vector<Row>& rows) {
  nlohmann::json j;
  j["kernel"] = std::string(tpusim::sim::gemm_kernel_name());
  j["cpu"] = cpu_model();
  j["K"] = kK;
  j["M"] = kM;
  j["threads"] = 1;
  j["rows"] = nlohmann::json::array();
  for (const Row& r : rows)
    j["rows"].push_back({{"B", r.B},
                         {"signedness", r.signedness},
                         {"ours_gmacs", r.ours},
                         {"onednn_gmacs", r.onednn},
                         {"onednn_api", r.onednn_api},
                         {"ratio", r.ours / r.onednn}});
  std::ofstream(path) << j.dump(2) << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!tpusim::bench::parse_bench_args(argc, argv, opt)) {
    fmt::print(stderr, "usage: gemm_bench [--quick] [--json FILE]\n");
    return 2;
  }
  if (!use_one_omp_thread()) fmt::print(stderr, "gemm_bench: warning: oneDNN may run on several threads\n");
  fmt::print("int8 GEMM, K = M = {}, one thread; kernel {}; CPU {}\n", kK, tpusim::sim::gemm_kernel_name(),
             cpu_model());
  fmt::print("{:>6} {:>5} {:>12} {:>14} {:>8} {:>7}\n", "B", "A x W", "ours GMAC/s", "oneDNN GMAC/s", "(api)",
             "ratio");
  std::mt19937 rng(1);
  std::vector<Row> rows;
  for (int64_t B : {8, 64, 200, 256, 1024, 4096})
    for (bool a_unsigned : {false, true}) {
      Shape shape(B, a_unsigned, rng);
      if (!same_results(shape)) return 1;
      const Row r = measure(shape, opt);
      const double ratio = r.ours / r.onednn;
      fmt::print("{:>6} {:>5} {:>12.1f} {:>14.1f} {:>8} {:>7.2f}{}\n", r.B, r.signedness, r.ours, r.onednn,
                 r.onednn_api, ratio, ratio < kTarget ? "  BELOW TARGET" : "");
      std::fflush(stdout);
      rows.push_back(r);
    }
  if (!opt.json.empty()) write_json(opt.json, rows);
  return 0;
}
