// The order in which a sweep's workers take its points (workers.cpp).
//
// Two costs matter on a few cores: the longest points must start first, or the sweep ends with
// one worker still on a long point while the others wait (longest-processing-time-first); and a
// worker prepares each model it runs (parses it, and where its program depends on calibrated
// scales generates its weights and runs the float reference: LSTM0 takes about half a second),
// so the points of a model that is dear to prepare stay on the worker that prepared it unless
// moving one shortens the sweep.
//
// Costs are estimates in seconds, from the model's quantized graph and the point's machine and
// mapper switches: the pieces its batch runs in, and the matmul and activate instructions and
// weight tiles its lowering emits, counted by the compiler's own rules (compiler/lower.h: pieces,
// acc_budget, packing_for), never copies of them; only their order and rough size matter. The order changes no result: every point is compiled
// and simulated alone, and the results are stored by point number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tools/sweep/spec.h"

namespace tpusim::tools::sweep {

struct PointCost {
  double run = 0;      // compiling for the point's machine and simulating
  double prepare = 0;  // preparing its model, once per worker (0 for a program)
  std::string model;   // the worker's cache key: the points that share a preparation
  // What the estimate counted for a model's point: the pieces its batch runs in (compiler::pieces,
  // as lower() runs it), the matmul ops it packs (compiler::packing_for: a convolution layer's
  // "packing" in the program's mapping), and the activate instructions its lowering emits (the
  // activation unit's work, `activation` seconds of `run`: bench/sweep_cost_bench).
  uint64_t pieces = 1, packed = 0;
  double activates = 0, activation = 0;
};

// The key of the model a worker prepares for a point and keeps (workers.cpp's cache, and the points
// the scheduler keeps on one worker): its file, its batch, and the mapper's concat_inplace, which
// changes the quantized graph (the other switches act only when it is lowered). A worker's cache
// adds the compile kind, which is one per sweep.
std::string model_key(const std::string& path, std::optional<uint64_t> batch, bool concat_inplace);
std::string model_key(const Point& p);

// One estimate per point of `todo`. A model description or SCALE-Sim topology is parsed (without
// its data: LoadOptions::timing_only) and quantized without a float run (compiler::
// uncalibrated_graph), once per model key, to count its tiles and pieces on each point's machine
// (quantized again with the concats kept as parts where the point's worker keeps them so:
// compiler::ConcatInHost); a file that does not parse or a point the compiler refuses, an ONNX
// model or a program gets a default (its point then fails or runs in the worker as usual). Models and points are estimated
// on sim::parallel_for's threads; the estimates do not depend on how many.
std::vector<PointCost> estimate_costs(const Spec& spec, const std::vector<const Point*>& todo);

class Scheduler {
 public:
  Scheduler(std::vector<const Point*> todo, std::vector<PointCost> costs, size_t workers);
  // The next point for worker w (which is idle), nullptr when none should go to it now: no point
  // left, or only points of models other workers prepared whose preparation would cost more than
  // sharing them saves. `others_busy`: whether another worker is running a point (when none is,
  // a point is always given, so the sweep cannot stall).
  const Point* next(size_t w, bool others_busy);
  // A point to queue behind `running`, the one worker w is running, so that it goes on without
  // waiting for this process (workers.cpp): the dearest point of a model w holds, or of a program;
  // nullptr when there is none, or when the points left after it would not keep the other workers
  // busy for `running`'s estimated time (a queued point cannot be taken back: near the end of a
  // sweep it would wait behind a long point while another worker idles). (Which worker prepares
  // which model is decided only when one is idle, as above, with every point run so far counted.)
  const Point* queued(size_t w, const Point* running);
  // Point p goes back to the queue (its worker died); worker w starts afresh (prepared nothing).
  void put_back(const Point* p);
  void restart(size_t w);
  bool empty() const { return left_ == 0; }

 private:
  struct Item {
    const Point* point;
    PointCost cost;
    bool taken = false;
  };
  void take(size_t w, size_t i);
  std::vector<Item> items_;                     // longest first
  std::vector<std::set<std::string>> prepared_;  // per worker: the models it holds
  std::map<std::string, double> remaining_;     // per model: the run cost of its points not taken
  double remaining_all_ = 0;                    // the run cost of every point not taken
  size_t left_ = 0;
};

}  // namespace tpusim::tools::sweep
