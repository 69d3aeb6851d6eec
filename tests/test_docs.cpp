// The reference documents under docs/ against the code they describe, so that they cannot drift from it.
// docs/CONFIG.md: its "## Keys" section has one table row per config key, under a "### <group>" heading named
// as the schema groups the key; each row's type, default, range and help must be what config_schema() says,
// and no row may name a key the schema lacks. Its "## Defaults" JSON block must be the config {} means.
// The expected text of a cell is computed here from the schema, so a failure prints the row to write.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "test_support.h"
#include "unet/backend/cuda_requirements.h"
#include "unet/config/config.h"

using namespace unet;
using json = nlohmann::json;

namespace {

const std::string kConfigDoc = std::string(UNET_SOURCE_DIR) + "/docs/CONFIG.md";

std::vector<std::string> read_lines(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// "| a | b |" -> {"a", "b"}. Cells hold no '|' (the doc writes none inside them).
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string t = trim(row);
  if (t.size() < 2 || t.front() != '|' || t.back() != '|') return out;
  std::stringstream ss(t.substr(1, t.size() - 2));
  for (std::string cell; std::getline(ss, cell, '|');) out.push_back(trim(cell));
  return out;
}

// A bound as the doc writes it: whole numbers in full ("0", not "0.0"), others as their shortest JSON text.
std::string bound(const ConfigKey& k, double b) {
  if (k.type == ConfigType::number && (b != std::floor(b) || std::fabs(b) > 1e15)) return json(b).dump();
  return std::to_string(static_cast<long long>(b));
}

// The range cell: bounds ("1..64", ">= 0, < 1", "> 0"), choices, "non-empty", "`true`, `false`", or "any".
std::string expected_range(const ConfigKey& k) {
  std::vector<std::string> parts;
  if (k.type == ConfigType::enumeration) {
    std::string s;
    for (const std::string& c : k.choices) s += (s.empty() ? "" : ", ") + ("`" + c + "`");
    parts.push_back(s);
  }
  if (k.unsigned64) {
    parts.push_back("0..2^64-1");
  } else if (k.min && k.max && !k.min_exclusive && !k.max_exclusive && k.type != ConfigType::number) {
    parts.push_back(bound(k, *k.min) + ".." + bound(k, *k.max));
  } else {
    if (k.min) parts.push_back((k.min_exclusive ? "> " : ">= ") + bound(k, *k.min));
    if (k.max) parts.push_back((k.max_exclusive ? "< " : "<= ") + bound(k, *k.max));
  }
  if ((k.type == ConfigType::integer_pair || k.type == ConfigType::number_list) && parts.size() == 1)
    parts.back() = "each " + parts.back();
  if (k.type == ConfigType::boolean) parts.push_back("`true`, `false`");
  if (k.non_empty) parts.push_back("non-empty");
  if (parts.empty()) return "any";
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

std::string expected_row(const ConfigKey& k) {
  return "| `" + k.path + "` | " + to_string(k.type) + " | `" + k.default_value.dump() + "` | " +
         expected_range(k) + " | " + k.help + " |";
}

struct Row {
  std::string group;
  std::vector<std::string> cells;
  int line = 0;
};

}  // namespace

class TestDocs : public QObject {
  Q_OBJECT

 private slots:
  // Every schema key has exactly one row, under its group, with the schema's type, default, range and help;
  // every row names a schema key.
  void config_keys_match_the_schema() {
    const std::vector<std::string> lines = read_lines(kConfigDoc);
    QVERIFY2(!lines.empty(), ("cannot read " + kConfigDoc).c_str());

    std::map<std::string, Row> rows;
    bool in_keys = false;
    std::string group;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i];
      if (line.starts_with("## ")) in_keys = line == "## Keys";
      if (!in_keys) continue;
      if (line.starts_with("### ")) group = trim(line.substr(4));
      const std::vector<std::string> c = cells(line);
      if (c.empty() || !c[0].starts_with('`') || !c[0].ends_with('`') || c[0].size() < 2) continue;
      const std::string key = c[0].substr(1, c[0].size() - 2);
      const std::string where = kConfigDoc + ":" + std::to_string(i + 1);
      QVERIFY2(find_config_key(key), (where + ": " + key + " is not a config key").c_str());
      QVERIFY2(!rows.count(key), (where + ": " + key + " has a second row").c_str());
      rows[key] = Row{group, c, static_cast<int>(i + 1)};
    }

    for (const ConfigKey& k : config_schema()) {
      const auto it = rows.find(k.path);
      QVERIFY2(it != rows.end(), ("no row for " + k.path + "; add:\n" + expected_row(k)).c_str());
      const Row& row = it->second;
      const std::string where = kConfigDoc + ":" + std::to_string(row.line) + ": " + k.path;
      QVERIFY2(row.group == k.group,
               (where + ": under \"" + row.group + "\", the schema's group is \"" + k.group + "\"").c_str());
      const std::vector<std::string> want = cells(expected_row(k));
      QVERIFY2(row.cells.size() == want.size(),
               (where + ": expected " + std::to_string(want.size()) + " cells:\n" + expected_row(k)).c_str());
      static const char* const names[] = {"key", "type", "default", "range", "help"};
      for (std::size_t c = 1; c < want.size(); ++c)
        QVERIFY2(row.cells[c] == want[c],
                 (where + ": " + names[c] + " is \"" + row.cells[c] + "\", the schema says \"" + want[c] +
                  "\"; the row:\n" + expected_row(k))
                     .c_str());
    }
  }

  // The JSON block after "## Defaults" is the whole default config, as config_to_json writes it.
  void config_defaults_block_is_the_default_config() {
    const std::vector<std::string> lines = read_lines(kConfigDoc);
    std::string block;
    bool in_defaults = false, in_block = false, found = false;
    for (const std::string& line : lines) {
      if (line.starts_with("## ")) in_defaults = line == "## Defaults";
      if (!in_defaults) continue;
      if (!in_block && line == "```json") {
        in_block = true;
        continue;
      }
      if (in_block && line == "```") {
        found = true;
        break;
      }
      if (in_block) block += line + "\n";
    }
    QVERIFY2(found, "docs/CONFIG.md has no ```json block under \"## Defaults\"");
    const json doc = json::parse(block, nullptr, false);
    QVERIFY2(!doc.is_discarded(), "the defaults block is not valid JSON");
    const json want = config_to_json(Config{});
    QVERIFY2(doc == want, ("the defaults block should be:\n" + config_to_string(Config{})).c_str());
  }

  // The recipe configs README.md points to load as they are, and each is the recipe it claims to be.
  void example_recipes_load() {
    const std::filesystem::path folder = std::filesystem::path(UNET_SOURCE_DIR) / "examples";
    const Config nnunet = load_config_file(folder / "nnunet-like.json");
    QCOMPARE(nnunet.optimizer.kind, OptimizerKind::sgd);
    QVERIFY(nnunet.optimizer.nesterov && nnunet.optimizer.momentum == 0.99);
    QCOMPARE(nnunet.schedule.kind, ScheduleKind::poly);
    const Config keras = load_config_file(folder / "keras-like.json");
    QCOMPARE(keras.optimizer.kind, OptimizerKind::adam);
    QCOMPARE(keras.schedule.kind, ScheduleKind::plateau);
    QVERIFY(keras.early_stopping.patience > 0 && keras.early_stopping.restore_best);
    std::size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      if (entry.path().extension() != ".json") continue;
      ++files;
      try {
        load_config_file(entry.path());
      } catch (const ConfigError& e) {
        QFAIL(qPrintable(QString::fromStdString(entry.path().string() + ": " + e.what())));
      }
    }
    QCOMPARE(files, std::size_t{2});
  }

  // Issue 25, item 8: what to install for a GPU has one source, the engine's words; docs/CLI.md's devices
  // table quotes each of them as a row's "what to do".
  void cuda_requirements_are_quoted_in_the_cli_doc() {
    std::set<std::string> what_to_do;
    for (const std::string& line : read_lines(std::string(UNET_SOURCE_DIR) + "/docs/CLI.md"))
      if (const std::vector<std::string> row = cells(line); row.size() == 2) what_to_do.insert(row[1]);
    for (const CudaRequirement r : kCudaRequirements) {
      const std::string text(cuda_requirement_text(r));
      QVERIFY2(!text.empty() && what_to_do.contains(text),
               qPrintable(QString::fromStdString(
                   "docs/CLI.md's devices table lacks the row's \"what to do\": " + text)));
    }
  }
};

QTEST_GUILESS_MAIN(TestDocs)
#include "test_docs.moc"
