// The sweep results database (store.h) on SQLite.
#include "tools/sweep/store.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "isa/error.h"
#include "tools/sweep/statement.h"

namespace tpusim::tools::sweep {

namespace {

std::string quoted(const std::string& name) { return "\"" + name + "\""; }

std::string columns_json() {
  nlohmann::json names = nlohmann::json::array();
  for (const Column& c : columns()) names.push_back(c.name);
  return names.dump();
}

std::string column_list(const std::string& prefix = "") {
  std::string out;
  for (const Column& c : columns()) out += (out.empty() ? "" : ", ") + prefix + quoted(c.name);
  return out;
}

const char* sql_type(ColumnType t) {
  return t == ColumnType::integer ? "INTEGER" : t == ColumnType::real ? "REAL" : "TEXT";
}

std::string utc_now() {
  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(now)));
}

}  // namespace

ResultStore::ResultStore(const std::filesystem::path& path, bool read_only) : path_(path) {
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw InputError(fmt::format("{}: cannot open the results database: {}", path.string(), why));
  }
  sqlite3_busy_timeout(db_, 10000);
  // The default rollback journal with synchronous=FULL: one file, and a point's transaction is
  // on disk before the next starts.
  exec("PRAGMA synchronous=FULL");
}

ResultStore::~ResultStore() {
  insert_.reset();  // (finalized first: SQLite does not close a connection with statements open)
  sqlite3_close(db_);
}

void ResultStore::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string why = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw InputError(fmt::format("{}: SQLite: {}", path_.string(), why));
  }
}

template <class F>
void ResultStore::transaction(F&& f) {
  exec("BEGIN IMMEDIATE");
  try {
    f();
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void ResultStore::create(const std::map<std::string, std::string>& meta) {
  std::string ddl =
      "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
      "CREATE TABLE IF NOT EXISTS results(";
  for (const Column& c : columns())
    ddl +=
        fmt::format("{} {}{}, ", quoted(c.name), sql_type(c.type), c.name == "point" ? " PRIMARY KEY" : "");
  ddl +=
      "key TEXT NOT NULL UNIQUE, host_seconds REAL, point_seconds REAL, finished TEXT, json TEXT NOT NULL);";
  transaction([&] {
    exec(ddl);
    if (this->meta().empty()) {
      Statement one(db_, "INSERT INTO meta(key, value) VALUES (?1, ?2)", path_.string());
      for (const auto& [k, v] : meta) one.run({k, v});
    }
  });
  check_columns();
}

std::map<std::string, std::string> ResultStore::meta() {
  std::map<std::string, std::string> out;
  Statement exists(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                   path_.string());
  exists.step();
  if (exists.integer(0) == 0) return out;
  Statement s(db_, "SELECT key, value FROM meta", path_.string());
  while (s.step()) out[s.text(0)] = s.text(1);
  return out;
}

void ResultStore::check_columns() {
  const auto m = meta();
  const auto it = m.find("columns");
  if (it == m.end())
    throw InputError(fmt::format("{}: not a tpusim sweep database (no meta columns)", path_.string()));
  if (it->second != columns_json())
    throw InputError(
        fmt::format("{}: written by a tpusim with other result columns (tpusim {}); this tpusim cannot add "
                    "to it or merge "
                    "it: start a new results file, or export it with `sqlite3 -csv`",
                    path_.string(), m.contains("tpusim") ? m.at("tpusim") : "unknown"));
}

void ResultStore::attach_spec(const Spec& spec) {
  create({{"spec_name", spec.name},
          {"spec_file", spec.path.string()},
          {"spec_text", spec.text},
          {"spec_points", std::to_string(spec.points.size())},
          {"columns", columns_json()},
          {"tpusim", "0.1.0"}});
  // Points are identified by their key (workload, engine, batch, every parameter), not their
  // number: a spec that gained points or grid values renumbers the stored rows to its own order.
  std::map<std::string, uint64_t> index_of;
  for (const Point& p : spec.points) index_of.emplace(p.key, p.index);
  struct Stored {
    int64_t point;
    uint64_t now;
    std::string json;
  };
  std::vector<Stored> moved;
  {
    Statement s(db_, "SELECT point, key, json FROM results ORDER BY point", path_.string());
    while (s.step()) {
      const std::string key = s.text(1);
      const auto it = index_of.find(key);
      if (it == index_of.end())
        throw InputError(fmt::format(
            "{}: holds a result for a point that {} no longer has ({}); a sweep's results file holds one "
            "spec's points: write the results to a new file (or restore the spec)",
            path_.string(), spec.path.string(), describe_key(key)));
      if (s.integer(0) != static_cast<int64_t>(it->second))
        moved.push_back({s.integer(0), it->second, s.text(2)});
    }
  }
  transaction([&] {
    Statement one(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", path_.string());
    for (const auto& [k, v] :
         std::map<std::string, std::string>{{"spec_name", spec.name},
                                            {"spec_file", spec.path.string()},
                                            {"spec_text", spec.text},
                                            {"spec_points", std::to_string(spec.points.size())}})
      one.run({k, v});
    // Two steps, so that no row takes a number another still holds: out of the way (negative),
    // then to the spec's numbers.
    Statement aside(db_, "UPDATE results SET point = ?1 WHERE point = ?2", path_.string());
    for (const Stored& m : moved) aside.run({int64_t{-1} - m.point, m.point});
    Statement renumber(db_, "UPDATE results SET point = ?1, json = ?2 WHERE point = ?3", path_.string());
    for (const Stored& m : moved) {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(m.json);
      j["point"] = m.now;
      renumber.run({static_cast<int64_t>(m.now), j.dump(), int64_t{-1} - m.point});
    }
  });
}

uint64_t ResultStore::forget_failed(const std::set<std::string>& keys) {
  uint64_t dropped = 0;
  transaction([&] {
    Statement s(db_, "DELETE FROM results WHERE key = ?1 AND status = 'failed'", path_.string());
    for (const std::string& key : keys) {
      s.run({key});
      dropped += static_cast<uint64_t>(sqlite3_changes(db_));
    }
  });
  return dropped;
}

uint64_t ResultStore::count() {
  Statement s(db_, "SELECT count(*) FROM results", path_.string());
  s.step();
  return static_cast<uint64_t>(s.integer(0));
}

std::set<std::string> ResultStore::finished_keys() {
  std::set<std::string> keys;
  Statement s(db_, "SELECT key FROM results", path_.string());
  while (s.step()) keys.insert(s.text(0));
  return keys;
}

void ResultStore::record(const std::vector<PointResult>& points) {
  if (points.empty()) return;
  if (!insert_) {
    std::string params;
    for (size_t i = 1; i <= columns().size() + 5; ++i) params += fmt::format("{}?{}", i > 1 ? ", " : "", i);
    insert_ = std::make_unique<Statement>(
        db_,
        fmt::format("INSERT INTO results({}, key, host_seconds, point_seconds, finished, json) VALUES ({})",
                    column_list(), params),
        path_.string());
  }
  Statement& s = *insert_;
  transaction([&] {
    for (const PointResult& r : points) {
      // (run() resets the statement whether the point was stored or its step threw: the
      // transaction then rolls back, and the next batch finds it ready.)
      Row row = make_row(r);
      row.insert(row.end(), {r.point->key, host_seconds(r), r.point_seconds, utc_now(), json_line(r)});
      s.run(row);
    }
  });
}

std::string ResultStore::csv() {
  std::string out = csv_header();
  Statement s(db_, fmt::format("SELECT {} FROM results ORDER BY point", column_list()), path_.string());
  const int n = static_cast<int>(columns().size());
  Row row(n);
  while (s.step()) {
    for (int i = 0; i < n; ++i) row[i] = s.cell(i);
    out += csv_line(row);
  }
  return out;
}

std::string ResultStore::jsonl() {
  std::string out;
  Statement s(db_, "SELECT json FROM results ORDER BY point", path_.string());
  while (s.step()) out += s.text(0) + "\n";
  return out;
}

uint64_t ResultStore::merge_from(const std::filesystem::path& other) {
  ResultStore(other, /*read_only=*/true).check_columns();
  Statement(db_, "ATTACH DATABASE ?1 AS other", path_.string()).run({other.string()});
  struct Detach {
    ResultStore* s;
    ~Detach() { sqlite3_exec(s->db_, "DETACH DATABASE other", nullptr, nullptr, nullptr); }
  } detach{this};
  Statement clash(db_,
                  "SELECT a.point, a.key, b.key FROM results a JOIN other.results b ON a.point = b.point "
                  "WHERE a.key != b.key LIMIT 1",
                  path_.string());
  if (clash.step())
    throw InputError(
        fmt::format("{}: point {} differs from the same point of the files before it ({} against {}): "
                    "these results come from different specs",
                    other.string(), clash.integer(0), clash.text(2).substr(0, 120),
                    clash.text(1).substr(0, 120)));
  const std::string cols = column_list() + ", key, host_seconds, point_seconds, finished, json";
  exec(fmt::format("INSERT OR IGNORE INTO results({}) SELECT {} FROM other.results", cols, cols));
  return static_cast<uint64_t>(sqlite3_changes(db_));
}

}  // namespace tpusim::tools::sweep
