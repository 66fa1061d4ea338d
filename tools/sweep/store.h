// The sweep's results database (SQLite): the store every other output is exported from.
//
// Tables (docs/sweeps.md, "Querying the database"):
//   meta(key, value): spec_name, spec_file, spec_text, spec_points (points in the whole spec),
//     columns (the results columns as a JSON list), tpusim (version);
//   results: one row per finished point: the CSV columns (columns()), then `key` (the point's
//     identity, spec.h), `host_seconds` (wall time of the simulation), `point_seconds` (wall time
//     of the whole point in its worker, compiling included), `finished` (UTC time) and
//     `json` (the JSON Lines record, the whole report included).
// Points are stored in transactions (record()) of the points that finished while the last one was
// written, so a sweep killed at any moment leaves every point stored before it, and nothing
// half-written (a point answered but not yet stored runs again on --resume).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "tools/sweep/results.h"
#include "tools/sweep/spec.h"

struct sqlite3;

namespace tpusim::tools::sweep {

class Statement;  // a prepared statement (statement.h)

class ResultStore {
 public:
  // Opens (creating when missing) the database at `path`; ":memory:" for a scratch one.
  explicit ResultStore(const std::filesystem::path& path, bool read_only = false);
  ~ResultStore();
  ResultStore(const ResultStore&) = delete;
  ResultStore& operator=(const ResultStore&) = delete;

  // Creates the tables for `spec`, or checks that an existing database belongs to it: the same
  // columns, and every stored point's key one of the spec's points (points are matched by key, so
  // a spec that gained points or grid values keeps its results); stored rows take the spec's
  // numbers and the meta table the spec's text.
  void attach_spec(const Spec& spec);
  // Deletes the failed rows among `keys` (--retry-failed); returns how many.
  uint64_t forget_failed(const std::set<std::string>& keys);
  // Creates the tables with the given meta values (merging).
  void create(const std::map<std::string, std::string>& meta);

  uint64_t count();
  std::set<std::string> finished_keys();
  std::map<std::string, std::string> meta();

  void record(const std::vector<PointResult>& points);  // one transaction

  // Every stored row, ordered by point: the CSV (header first) and the JSON Lines.
  std::string csv();
  std::string jsonl();

  // Copies in every row of another database with the same columns; a point number both hold
  // must have the same key. Returns the rows added.
  uint64_t merge_from(const std::filesystem::path& other);

  const std::filesystem::path& path() const { return path_; }

 private:
  void exec(const std::string& sql);
  // f() inside BEGIN IMMEDIATE .. COMMIT; rolled back when f or the commit throws.
  template <class F>
  void transaction(F&& f);
  void check_columns();
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
  // record()'s INSERT, prepared on its first call (the results table exists by then) and reused
  // (Statement::run resets it after each point, stored or not).
  std::unique_ptr<Statement> insert_;
};

}  // namespace tpusim::tools::sweep
